"""Declaring options: :func:`option`, the config bases, the record schema, and ``ConfigValueError``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from sidecar.api.events import ROLES


def option(default: Any = dataclasses.MISSING, doc: str = "", **checks: Any) -> Any:
    """Declare a config field: its default, its documentation and its checks.

    Checks understood by the loader: ``min``/``max`` (inclusive bounds),
    ``gt`` (strict lower bound), ``choices`` (allowed values), ``secret_ref``
    (the value names an env var or file, never a secret itself).
    """
    meta = {"doc": doc, **checks}
    if isinstance(default, list | dict | set):
        raise TypeError("use an immutable default (tuple) for config options")
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class FilterConfig:
    """Base of filter configs: frozen dataclasses of :func:`option` fields."""


@dataclass(frozen=True)
class SourceConfig:
    """Base of source configs."""


@dataclass(frozen=True)
class SinkConfig:
    """Base of sink configs."""


class ConfigValueError(ValueError):
    """A config value is wrong. ``key`` is relative to the component's mapping."""

    def __init__(self, key: str, problem: str, allowed: Sequence[Any] | None = None) -> None:
        super().__init__(problem)
        self.key = key
        self.problem = problem
        self.allowed = allowed


AOL_COLUMNS = ("AnonID", "Query", "QueryTime", "ItemRank", "ClickURL")


@dataclass(frozen=True)
class RolesConfig:
    """Which record field plays each role (AOL defaults)."""

    user: str = option("AnonID", "Field holding the user id.")
    query: str = option("Query", "Field holding the query text.")
    time: str | None = option("QueryTime", "Field holding the event time (null: none).")
    rank: str | None = option("ItemRank", "Field holding the clicked result's rank (null: none).")
    url: str | None = option("ClickURL", "Field holding the clicked URL (null: none).")

    def mapping(self) -> dict[str, str | None]:
        return {role: getattr(self, role) for role in ROLES}


PolicyName = Literal["keep", "drop", "hash", "ip_prefix", "ip_encrypt", "user_agent", "url", "scrub"]
"""What becomes of a non-role field's value (``schema.fields``; applied by the runtime, :mod:`sidecar.fieldpolicy`)."""
POLICY_NAMES: tuple[str, ...] = get_args(PolicyName)
#: Field policies that need the field key (``schema.field_key_env`` / ``field_key_file``).
KEYED_POLICIES = frozenset({"hash", "ip_encrypt"})
#: Policies a role's field may have (not the query's): applied to the role's value before any filter.
ROLE_POLICIES = ("keep", "hash", "ip_prefix", "ip_encrypt", "user_agent")


@dataclass(frozen=True)
class FieldPolicy:
    """One field's policy with its options (the short form is the policy's name alone: ``ip: ip_encrypt``)."""

    policy: PolicyName = option(
        doc="keep (as it is), drop (removed; a format with fixed columns writes its placeholder), hash (keyed "
        "HMAC-SHA256, hex), ip_prefix (IPv4 /24, IPv6 /48 kept, the rest zero), ip_encrypt (Crypto-PAn: keyed, "
        "prefix-preserving pseudonym addresses), user_agent (browser family and major version), url (scheme and "
        "host, as truncate_url), scrub (hipaa_scrub with its defaults on the field's text)."
    )
    ipv4_prefix: int = option(24, "ip_prefix: leading bits of an IPv4 address kept.", min=0, max=32)
    ipv6_prefix: int = option(48, "ip_prefix: leading bits of an IPv6 address kept.", min=0, max=128)
    length: int = option(16, "hash: hex characters of the digest written.", min=8, max=64)

    def __post_init__(self) -> None:
        if self.policy != "ip_prefix" and (self.ipv4_prefix, self.ipv6_prefix) != (24, 48):
            raise ConfigValueError("ipv4_prefix", "prefix lengths apply to the ip_prefix policy only")
        if self.policy != "hash" and self.length != 16:
            raise ConfigValueError("length", "length applies to the hash policy only")


@dataclass(frozen=True)
class SchemaConfig:
    """How input records look. Output uses the same schema."""

    format: Literal["auto", "tsv", "jsonl", "access_log", "ubi"] = option(
        "auto",
        "Record format; auto picks by file extension (.tsv/.txt -> tsv, .jsonl/.json/.ndjson -> jsonl), else by the "
        "first record (`{`: jsonl; a `combined` access-log line: access_log; else tsv). access_log: nginx/Apache "
        "access logs (log_format or apache_format); ubi: UBI query and event records, events follow their query "
        "(docs/STACK.md).",
    )
    header: bool = option(True, "TSV: the first line is a header naming the columns (kept in the output).")
    columns: tuple[str, ...] = option(AOL_COLUMNS, "TSV: column names when there is no header line.")
    roles: RolesConfig = option(
        RolesConfig(),
        "Record field of each role. access_log: a variable of the format (`user: remote_addr`, `time: time_local`), "
        "the query a URL parameter (`query: request.q`, or `request.q|query`: the first the URL has); roles left "
        "at their TSV defaults read remote_addr, request.q, time_local.",
    )
    log_format: str = option(
        "combined",
        "access_log: the nginx `log_format` string of the log (`$remote_addr - $remote_user [$time_local] ...`), or "
        "`combined`, nginx's own. Values escaped as nginx's escape=default does.",
    )
    apache_format: str | None = option(
        None,
        'access_log: the Apache `LogFormat` string of the log (`%h %l %u %t \\"%r\\" %>s %b`), or `common` / '
        "`combined`, instead of log_format.",
    )
    search_path: str | None = option(
        None,
        "access_log: the path of search requests (`/search`); only a request to it, or a referer URL with it, has a "
        "query. null: any URL that has the query parameter.",
    )
    fields: Mapping[str, PolicyName | FieldPolicy] | None = option(
        None,
        "Policy of each non-role field by name (`client_ip: ip_encrypt`, or `{policy: ip_prefix, ipv4_prefix: "
        "16}`): keep, drop, hash, ip_prefix, ip_encrypt, user_agent, url, scrub (docs/FIELDS.md).",
    )
    unlisted: Literal["keep", "drop", "error"] = option(
        "keep",
        "A non-role field `fields` does not name: keep it, drop it, or dead-letter the record (undeclared_field, "
        "counted by field name: fail-closed).",
    )
    field_key_env: str | None = option(
        None, "Environment variable holding the key of the hash and ip_encrypt policies.", secret_ref=True
    )
    field_key_file: str | None = option(
        None, "File holding the key of the hash and ip_encrypt policies (relative to the config).", secret_ref=True
    )

    def __post_init__(self) -> None:
        if not self.header and len(set(self.columns)) != len(self.columns):
            raise ConfigValueError("columns", "column names must be unique")
        roles = {name: role for role, name in self.roles.mapping().items() if name is not None}
        for name, spec in (self.fields or {}).items():
            role = roles.get(name)
            if role == "query":
                raise ConfigValueError(f"fields.{name}", "is the query's field: its filters decide, not a field policy")
            if role is not None and policy_of(spec).policy not in ROLE_POLICIES:
                raise ConfigValueError(
                    f"fields.{name}", f"is the {role} role's field: a role takes a value policy only", ROLE_POLICIES
                )
        keyed = sorted(n for n, spec in (self.fields or {}).items() if policy_of(spec).policy in KEYED_POLICIES)
        if self.field_key_env is not None and self.field_key_file is not None:
            raise ConfigValueError("field_key_env", "Set field_key_env or field_key_file, not both")
        if keyed and self.field_key_env is None and self.field_key_file is None:
            raise ConfigValueError(
                f"fields.{keyed[0]}", "hash and ip_encrypt need a key: set field_key_env or field_key_file"
            )

    def policies(self) -> dict[str, FieldPolicy]:
        """Each configured field's :class:`FieldPolicy`."""
        return {name: policy_of(spec) for name, spec in (self.fields or {}).items()}


def policy_of(spec: PolicyName | FieldPolicy) -> FieldPolicy:
    """The :class:`FieldPolicy` of a configured value (a policy name, or the mapping form)."""
    return spec if isinstance(spec, FieldPolicy) else FieldPolicy(policy=spec)
