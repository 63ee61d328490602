"""``pseudonymize``: replace user ids by a keyed HMAC-SHA256 (the key never sits in YAML).

The same id always maps to the same pseudonym under one key, so per-user
analysis keeps working; without the key the mapping cannot be inverted or
recomputed from a list of candidate ids. ``decimal`` output keeps an integer
column (AOL's AnonID) an integer.

An empty value (None, ``""`` or only spaces: an empty query with ``role: query``,
a blank user id) stays as it is (counted ``empty_kept``): there is nothing to hide
in it, and a pseudonym would make a missing value look like a real id (or query)
shared by every record that lacks one.

**Keys and their ids.** One key (``key_env`` or ``key_file``; its id is ``key_id``, else the variable's or the
file's name) or a list ``keys: [{id, key_env | key_file}, ...]``. The *last* entry of the list is the newest and
pseudonymizes every event; the earlier ones are still read and checked (at least 16 bytes each), so the config
keeps the record of the ids in use before and a rollback is moving an entry last. The id in use (never the key)
is in ``stats()`` (``querylog_pseudonymize_key_info`` in ``/metrics``) and in the audit's provenance. Keys are
read when the filter is built, with nothing cached outside it: a reload that builds a new chain from a config
with a new key picks that key up without a restart.

**Rotation.** ``rotate: daily`` or ``weekly`` derives one key per period from the key in use with HKDF-SHA256
(RFC 5869; no salt; info ``querylog-sidecar pseudonymize <period>``, the period ``2026-11-27`` or ``2026-W48``,
an ISO week), so the same id gets unlinkable pseudonyms in two periods and the same one within a period. The
period is the UTC day or ISO week of the event's ``time`` role (seconds since the epoch, above 10^11
milliseconds, or an ISO 8601 / AOL ``YYYY-MM-DD HH:MM:SS`` text; no zone: UTC); an event without a time that
reads so is placed in the period of the processing time. ``rotate: none`` (the default) is the key itself, as
before: output byte-identical to earlier versions.
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import PurePath
from typing import Any, Literal

from sidecar.api import ROLES, BuildContext, ConfigValueError, Event, Filter, FilterConfig, option

#: Shortest HMAC key accepted: a shorter one can be guessed, and with it every pseudonym reversed.
MIN_KEY_BYTES = 16
#: What a key id may be (it is a metric label and an audit field).
KEY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
#: HKDF's ``info`` before the period label.
INFO_PREFIX = b"querylog-sidecar pseudonymize "
#: Epoch numbers above this are milliseconds.
MILLIS_ABOVE = 1e11


def _check_id(key_id: str, where: str) -> None:
    if not KEY_ID.fullmatch(key_id):
        raise ConfigValueError(
            where, "a key id is 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"
        )


@dataclass(frozen=True)
class PseudonymizeKey:
    """One HMAC key with its id; exactly one of ``key_env`` or ``key_file``."""

    id: str = option(doc="The key's id, shown in /metrics and the audit (never the key).")
    key_env: str | None = option(None, "Environment variable holding the key.", secret_ref=True)
    key_file: str | None = option(None, "File holding the key (relative to the config file).", secret_ref=True)

    def __post_init__(self) -> None:
        _check_id(self.id, "id")
        if (self.key_env is None) == (self.key_file is None):
            raise ConfigValueError("key_env", "Set exactly one of key_env or key_file")


@dataclass(frozen=True)
class PseudonymizeConfig(FilterConfig):
    """Options of ``pseudonymize``."""

    key_env: str | None = option(None, "Environment variable holding the HMAC key.", secret_ref=True)
    key_file: str | None = option(None, "File holding the HMAC key (relative to the config file).", secret_ref=True)
    key_id: str | None = option(None, "Id of the key_env/key_file key (default: the variable's or file's name).")
    keys: tuple[PseudonymizeKey, ...] = option(
        (), "Several keys with ids, instead of key_env/key_file; the last (newest) pseudonymizes the events."
    )
    rotate: Literal["none", "daily", "weekly"] = option(
        "none", "Derive one key per UTC day or ISO week of the event's time (HKDF-SHA256): unlinkable across periods."
    )
    role: Literal["user", "query", "time", "rank", "url"] = option("user", "Role whose value is replaced.")
    output: Literal["hex", "decimal"] = option(
        "hex",
        "Pseudonym alphabet: hex digits, or decimal digits (always below 2^53, so a JSON number stays exact in "
        "JavaScript and jq; an integer id stays an integer).",
    )
    length: int = option(16, "Pseudonym length in characters.", min=8, max=64)
    cache_size: int = option(100_000, "Ids whose pseudonyms are kept in memory.", min=0)

    def __post_init__(self) -> None:
        if self.keys:
            if self.key_env is not None or self.key_file is not None or self.key_id is not None:
                raise ConfigValueError("keys", "keys replaces key_env, key_file and key_id: set one or the other")
            ids = [k.id for k in self.keys]
            if len(set(ids)) != len(ids):
                raise ConfigValueError("keys", "every key needs its own id")
        elif (self.key_env is None) == (self.key_file is None):
            raise ConfigValueError("key_env", "Set exactly one of key_env or key_file")
        elif self.key_id is not None:
            _check_id(self.key_id, "key_id")
        if self.output == "decimal" and self.length > 19:
            raise ConfigValueError("length", "decimal pseudonyms are at most 19 digits")
        assert self.role in ROLES

    def key_ids(self) -> list[str]:
        """The configured key ids, oldest first (the last one is in use)."""
        if self.keys:
            return [k.id for k in self.keys]
        return [self.key_id or self.key_env or PurePath(self.key_file or "").name]


def hkdf_sha256(key: bytes, info: bytes) -> bytes:
    """HKDF-SHA256 (RFC 5869) of ``key`` without salt, 32 bytes of output keyed to ``info``."""
    prk = hmac.digest(bytes(32), key, "sha256")
    return hmac.digest(prk, info + b"\x01", "sha256")


def event_day(value: Any) -> date | None:
    """The UTC day of a time value (epoch seconds or milliseconds, ISO 8601 or AOL text), None when unreadable."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            value = float(text)  # epoch seconds (or milliseconds) as text
        except ValueError:
            try:
                stamp = datetime.fromisoformat(text)
            except ValueError:
                return None
            return (stamp.astimezone(UTC) if stamp.tzinfo else stamp).date()
    if isinstance(value, int | float):
        seconds = value / 1000 if value > MILLIS_ABOVE else value
        try:
            return datetime.fromtimestamp(seconds, UTC).date()
        except (OverflowError, OSError, ValueError):
            return None
    return None


def period_label(day: date, rotate: str) -> str:
    """``2026-11-27`` (daily) or ``2026-W48`` (weekly: the ISO week)."""
    if rotate == "daily":
        return day.isoformat()
    year, week, _ = day.isocalendar()
    return f"{year}-W{week:02d}"


class PseudonymizeFilter(Filter[PseudonymizeConfig]):
    """Replace a role's value (the user id by default) by its keyed HMAC-SHA256."""

    NAME = "pseudonymize"
    Config = PseudonymizeConfig
    SUMMARY = "keyed HMAC-SHA256 of the user id (keys from env vars or files, optionally rotated per period)"

    def __init__(self, config: PseudonymizeConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        if config.keys:
            keys = [self._read(k.key_env, k.key_file, f"keys[{i}].") for i, k in enumerate(config.keys)]
        else:
            keys = [self._read(config.key_env, config.key_file, "")]
        self._key = keys[-1]  # the newest key pseudonymizes
        self._key_id = config.key_ids()[-1]
        #: pseudonyms by id (with rotation: by period and id), at most cache_size of them
        self._cache: dict[str, str] = {}
        #: rotation: the derived keys of the periods seen last (a few)
        self._period_keys: dict[str, bytes] = {}
        #: rotation: the period of a zoneless ``YYYY-MM-DD hh:mm:ss`` time by its date (its key is in _period_keys)
        self._labels: dict[str, str] = {}
        self._period: str | None = None
        self._rotate = config.rotate != "none"
        #: decimal pseudonyms stay below 2^53 (the largest integer a JSON number keeps exactly in JavaScript)
        self._modulus = min(10**config.length, 2**53)

    def _read(self, env: str | None, file: str | None, where: str) -> bytes:
        """A key from its variable or file, at least MIN_KEY_BYTES long (errors at ``where`` + the option)."""
        option_key = where + ("key_env" if env else "key_file")
        try:
            key = self.ctx.secret(env, file, "HMAC key")
        except ConfigValueError as exc:
            raise ConfigValueError(where + exc.key, exc.problem, exc.allowed) from None
        if len(key) < MIN_KEY_BYTES:
            raise ConfigValueError(
                option_key, f"the HMAC key has {len(key)} bytes; at least {MIN_KEY_BYTES} are needed"
            )
        return key

    def _digest(self, key: bytes, text: str) -> str:
        digest = hmac.digest(key, text.encode("utf-8"), "sha256")
        if self.config.output == "hex":
            return digest.hex()[: self.config.length]
        return str(int.from_bytes(digest[:8], "big") % self._modulus).zfill(self.config.length)

    def _store(self, key: bytes, text: str, cache_key: str) -> str:
        """The pseudonym of ``text`` under ``key``, kept in the cache under ``cache_key`` (bounded by cache_size)."""
        cache = self._cache
        out = cache.get(cache_key)
        if out is None:
            out = self._digest(key, text)
            if len(cache) >= self.config.cache_size:
                cache.clear()
            if self.config.cache_size:
                cache[cache_key] = out
        return out

    def pseudonym(self, value: object, when: Any = None) -> str:
        """The pseudonym of ``value``; with rotation, in the period of the time ``when`` (None: now)."""
        text = "" if value is None else str(value)
        if self._rotate:
            label = self.period_of(when)
            return self._store(self._period_keys[label], text, label + "\x00" + text)
        cached = self._cache.get(text)  # the hot path without rotation: one lookup, as before rotation existed
        if cached is not None:
            return cached
        return self._store(self._key, text, text)

    def period_of(self, when: Any) -> str:
        """The rotation period of a time value (the processing time's when it has none); its key is ready."""
        prefix = None
        if type(when) is str and len(when) == 19 and when[10] in " T":  # no zone: the day is its first 10 chars
            prefix = when[:10]
            label = self._labels.get(prefix)
            if label is not None:
                self._period = label
                return label
        day = event_day(when)
        label = period_label(day or datetime.fromtimestamp(self.ctx.clock(), UTC).date(), self.config.rotate)
        if prefix is not None and day is not None:
            if len(self._labels) >= 1024:
                self._labels.clear()
            self._labels[prefix] = label
        if label not in self._period_keys:
            if len(self._period_keys) >= 8:  # events of many periods: keep a few keys
                self._period_keys.clear()
                self._labels.clear()
            self._period_keys[label] = hkdf_sha256(self._key, INFO_PREFIX + label.encode())
        self._period = label
        return label

    def pseudonymized_roles(self) -> frozenset[str]:
        """The configured role: later filters (a profile) see its pseudonyms, never the original values."""
        return frozenset({self.config.role})

    def stats(self) -> dict[str, Any]:
        """The key id in use (never the key), the rotation and the period of the last event (None before one)."""
        return {"key_id": self._key_id, "rotate": self.config.rotate, "period": self._period}

    def process(self, batch: list[Event]) -> list[Event]:
        role = self.config.role
        pseudonym = self.pseudonym
        rotate = self._rotate
        keep_int = self.config.output == "decimal"
        empty = 0
        for ev in batch:
            value = getattr(ev, role)
            if value is None or (type(value) is str and (not value or value.isspace())):
                empty += 1  # nothing to pseudonymize: an empty value stays empty
                continue
            out = pseudonym(value, ev.time) if rotate else pseudonym(value)
            # decimal keeps an integer an integer (a JSON AnonID stays a number)
            setattr(ev, role, int(out) if keep_int and type(value) is int else out)
        self.counts["pseudonymized"] += len(batch) - empty
        if empty:
            self.counts["empty_kept"] += empty
        return batch
