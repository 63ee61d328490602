"""Options of ``hipaa_scrub``: which fields are scrubbed and what happens to each identifier type."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import PurePath
from typing import Literal

from filters.hipaa_scrub.custom import CustomRecognizer
from filters.hipaa_scrub.detectors import GENERALIZABLE, KINDS
from filters.hipaa_scrub.operators import KEYED
from sidecar.api import ROLES, ConfigValueError, FilterConfig, option

Policy = Literal["remove", "replace", "generalize", "mask", "hash", "encrypt", "keep"]


@dataclass(frozen=True)
class HipaaScrubConfig(FilterConfig):
    """Options of ``hipaa_scrub``."""

    fields: tuple[str, ...] = option(
        ("query",), "Roles scrubbed (query text by default; also e.g. url for click-URL paths)."
    )
    default_policy: Policy = option("remove", "Policy of every type not named in `policies`.")
    policies: Mapping[str, Policy] | None = option(
        None,
        "Per-type policy: remove | replace ([TYPE] token) | generalize (zip, date, age, city, county, url) | mask "
        "(all but the last 4 characters as *) | hash (<TYPE#keyed hash>) | encrypt (<TYPE:key id:AES-SIV>, "
        "reversible by key holders) | keep. hash and encrypt need key_env or key_file. "
        f"Types: {', '.join(KINDS)}, and those of `recognizers`.",
    )
    thresholds: Mapping[str, float] | None = option(
        None,
        "Per-type least confidence (0..1) of a finding: below it the finding is dropped. Built-in rules give 1.0, "
        "a name its census odds (name_threshold 1.5 = 0.97), a custom recognizer its score and context.",
    )
    recognizers: tuple[CustomRecognizer, ...] = option(
        (), "Custom recognizers: patterns with an optional checksum, deny lists, context words (see README)."
    )
    key_env: str | None = option(
        None, "Environment variable holding the secret of the hash and encrypt policies.", secret_ref=True
    )
    key_file: str | None = option(
        None, "File holding that secret (relative to the config file; 16 bytes or more).", secret_ref=True
    )
    key_id: str | None = option(
        None, "Id of that secret, written into encrypted tokens (default: the variable's or file's name)."
    )
    city_keep_population: int | None = option(
        20000, "Cities and towns with more people than this are not identifiers (null: scrub every city).", min=0
    )
    bare_domains: Literal["keep", "scrub"] = option(
        "keep", "A bare domain (`myspace.com`) is a navigational query: keep it, or scrub it as a URL."
    )
    url_paths: Literal["personal", "all"] = option(
        "personal", "URL paths scrubbed: those that look personal (profiles, user names, ids), or all."
    )
    name_threshold: float = option(
        1.5, "log10 odds (census name vs ordinary words) a first+last pair needs to count as a name."
    )
    name_cue_threshold: float = option(0.5, "Same, when the query has a person cue (obituary, funeral, mr...).")
    allow_names: tuple[str, ...] = option((), "Extra `first last` phrases never treated as names (brands).")
    names: Literal["private", "all"] = option(
        "private",
        "Person names scrubbed: `private` keeps the names of public figures and brands (the classifier's curated "
        "terms, WordNet's people shared by few, a built-in list), `all` scrubs every person name. Default private: "
        "a searcher's own name is the re-identification vector (AOL 2006), a film star's is a topic.",
    )
    emptied: Literal["keep", "drop", "token"] = option(
        "keep",
        "An event whose query is empty after scrubbing (the scrubber removed it all, or it came empty): "
        "keep it with its empty query (the log keeps its size), drop it (counted as dropped_emptied_query), "
        "or replace the query by `emptied_token`.",
    )
    emptied_token: str = option(
        "[REMOVED]", "The query written for an emptied one with `emptied: token` (not empty, no tab or line break)."
    )

    def __post_init__(self) -> None:
        token = self.emptied_token
        if not token.strip() or any(c in token for c in "\t\r\n"):
            raise ConfigValueError("emptied_token", "must hold a visible character and no tab or line break")
        for f in self.fields:
            if f not in ROLES:
                raise ConfigValueError("fields", f"unknown role {f!r}", ROLES)
        if not self.fields:
            raise ConfigValueError("fields", "must name at least one role", ROLES)
        kinds = self.kinds()
        for kind, policy in (self.policies or {}).items():
            if kind not in kinds:
                raise ConfigValueError(f"policies.{kind}", "unknown identifier type", kinds)
            if policy == "generalize" and kind not in GENERALIZABLE:
                raise ConfigValueError(
                    f"policies.{kind}", f"type {kind} has no generalize policy", ("remove", "replace", "keep")
                )
        for kind, least in (self.thresholds or {}).items():
            if kind not in kinds:
                raise ConfigValueError(f"thresholds.{kind}", "unknown identifier type", kinds)
            if not 0.0 <= least <= 1.0:
                raise ConfigValueError(f"thresholds.{kind}", f"must be between 0 and 1, got {least!r}")
        names = [r.name for r in self.recognizers]
        if len(set(names)) != len(names):
            raise ConfigValueError("recognizers", "every recognizer needs its own name")
        if KEYED.intersection(self.policy_map().values()) and self.key_env is None and self.key_file is None:
            raise ConfigValueError("key_env", "the hash and encrypt policies need a secret: set key_env or key_file")
        if self.key_env is not None and self.key_file is not None:
            raise ConfigValueError("key_env", "set key_env or key_file, not both")
        if self.key_id is not None and not re.fullmatch(r"[a-z0-9][a-z0-9._-]{0,63}", self.key_id):
            raise ConfigValueError("key_id", "1-64 lower-case letters, digits, '.', '_' or '-'")
        if self.default_policy == "generalize":
            raise ConfigValueError(
                "default_policy",
                "generalize applies to some types only: name it per type in policies",
                ("remove", "replace", "keep"),
            )

    def operator_key_id(self) -> str:
        """The id written into encrypted tokens: ``key_id``, else the variable's or file's name."""
        named = self.key_env or PurePath(self.key_file or "key").name
        return self.key_id or re.sub(r"[^a-z0-9._-]", "-", named.lower())[:64]

    def kinds(self) -> tuple[str, ...]:
        """The built-in types and those of the custom recognizers."""
        return KINDS + tuple(dict.fromkeys(r.type for r in self.recognizers if r.type not in KINDS))

    def policy_map(self) -> dict[str, str]:
        """The policy of every type."""
        out: dict[str, str] = dict.fromkeys(self.kinds(), self.default_policy)
        out.update(self.policies or {})
        return out
