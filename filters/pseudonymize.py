"""``pseudonymize``: replace user ids by a keyed HMAC-SHA256 (the key never sits in YAML).

The same id always maps to the same pseudonym under one key, so per-user
analysis keeps working; without the key the mapping cannot be inverted or
recomputed from a list of candidate ids. ``decimal`` output keeps an integer
column (AOL's AnonID) an integer.

An empty value (None, ``""`` or only spaces: an empty query with ``role: query``,
a blank user id) stays as it is (counted ``empty_kept``): there is nothing to hide
in it, and a pseudonym would make a missing value look like a real id (or query)
shared by every record that lacks one.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Literal

from sidecar.api import ROLES, BuildContext, ConfigValueError, Event, Filter, FilterConfig, option

#: Shortest HMAC key accepted: a shorter one can be guessed, and with it every pseudonym reversed.
MIN_KEY_BYTES = 16


@dataclass(frozen=True)
class PseudonymizeConfig(FilterConfig):
    """Options of ``pseudonymize``."""

    key_env: str | None = option(None, "Environment variable holding the HMAC key.", secret_ref=True)
    key_file: str | None = option(None, "File holding the HMAC key (relative to the config file).", secret_ref=True)
    role: Literal["user", "query", "time", "rank", "url"] = option("user", "Role whose value is replaced.")
    output: Literal["hex", "decimal"] = option(
        "hex",
        "Pseudonym alphabet: hex digits, or decimal digits (always below 2^53, so a JSON number stays exact in "
        "JavaScript and jq; an integer id stays an integer).",
    )
    length: int = option(16, "Pseudonym length in characters.", min=8, max=64)
    cache_size: int = option(100_000, "Ids whose pseudonyms are kept in memory.", min=0)

    def __post_init__(self) -> None:
        if (self.key_env is None) == (self.key_file is None):
            raise ConfigValueError("key_env", "Set exactly one of key_env or key_file")
        if self.output == "decimal" and self.length > 19:
            raise ConfigValueError("length", "decimal pseudonyms are at most 19 digits")
        assert self.role in ROLES


class PseudonymizeFilter(Filter[PseudonymizeConfig]):
    """Replace a role's value (the user id by default) by its keyed HMAC-SHA256."""

    NAME = "pseudonymize"
    Config = PseudonymizeConfig
    SUMMARY = "keyed HMAC-SHA256 of the user id (key from env var or file)"

    def __init__(self, config: PseudonymizeConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self._key = ctx.secret(config.key_env, config.key_file, "HMAC key")
        if len(self._key) < MIN_KEY_BYTES:
            raise ConfigValueError(
                "key_env" if config.key_env else "key_file",
                f"the HMAC key has {len(self._key)} bytes; at least {MIN_KEY_BYTES} are needed",
            )
        self._cache: dict[str, str] = {}
        #: decimal pseudonyms stay below 2^53 (the largest integer a JSON number keeps exactly in JavaScript)
        self._modulus = min(10**config.length, 2**53)

    def pseudonym(self, value: object) -> str:
        text = "" if value is None else str(value)
        cached = self._cache.get(text)
        if cached is not None:
            return cached
        digest = hmac.digest(self._key, text.encode("utf-8"), "sha256")
        if self.config.output == "hex":
            out = digest.hex()[: self.config.length]
        else:
            out = str(int.from_bytes(digest[:8], "big") % self._modulus).zfill(self.config.length)
        if len(self._cache) >= self.config.cache_size:
            self._cache.clear()
        if self.config.cache_size:
            self._cache[text] = out
        return out

    def pseudonymized_roles(self) -> frozenset[str]:
        """The configured role: later filters (a profile) see its pseudonyms, never the original values."""
        return frozenset({self.config.role})

    def process(self, batch: list[Event]) -> list[Event]:
        role = self.config.role
        pseudonym = self.pseudonym
        keep_int = self.config.output == "decimal"
        empty = 0
        for ev in batch:
            value = getattr(ev, role)
            if value is None or (type(value) is str and (not value or value.isspace())):
                empty += 1  # nothing to pseudonymize: an empty value stays empty
                continue
            out = pseudonym(value)
            # decimal keeps an integer an integer (a JSON AnonID stays a number)
            setattr(ev, role, int(out) if keep_int and type(value) is int else out)
        self.counts["pseudonymized"] += len(batch) - empty
        if empty:
            self.counts["empty_kept"] += empty
        return batch
