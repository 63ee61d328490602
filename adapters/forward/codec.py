"""Forward entries <-> events: roles map to record keys as for JSON lines (``schema.roles``).

An event decoded from an :class:`~adapters.forward.protocol.Entry` keeps the entry as its
``record``: its tag, its time exactly as given (an integer stays an integer, an EventTime keeps
its nanoseconds) and its record map with every key in order, str values as str and bin values as
bytes. :meth:`ForwardCodec.encode` gives an entry back: the very same entry when no role changed,
else a new entry whose map is a copy with the changed role values written into their keys (key
order kept; the entry another event may share is never changed in place).

An event from another codec (a TSV line, a gRPC message) becomes a fresh entry: the sink's tag,
the current time as an EventTime, and a map of the event's carried-through fields plus its roles; an event of a
codec whose records are JSON objects (``json_records``: a UBI record) becomes that object, its own keys and
nesting kept.

Bad records (dead-lettered by the runtime, by reason): ``record_not_map``, ``missing_query`` (no
query key, or null), ``query_not_string``, ``missing_user``, ``invalid_utf8`` (a user or query that
is a str with bytes that are not UTF-8: no text filter could treat it). A query that is ``""`` is a
valid event, as in every codec.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.forward.protocol import Entry, EventTime, packb, unpackb
from sidecar.api import NO_META, Codec, Event, FieldError, SchemaConfig
from sidecar.records import foreign_record

__all__ = ["DEFAULT_TAG", "ForwardCodec", "ForwardEvent"]

DEFAULT_TAG = "querylog"


class ForwardEvent(Event):
    """An event decoded from a forward entry: ``orig`` holds the role values as decoded and the entry, ``packed``
    the entry's original bytes (PackedForward), so an unchanged event is sent on as those very bytes."""

    __slots__ = ("orig", "packed")

    orig: tuple[Any, Any, Any, Any, Any, Entry]
    packed: bytes | None

    def mark_changed(self) -> None:
        """The record was edited in place: its original bytes no longer say what it holds."""
        self.raw = None
        self.packed = None


def _surrogates(value: Any) -> bool:
    if type(value) is not str or value.isascii():
        return False
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


class ForwardCodec(Codec):
    """Fluentd forward entries; the record keys of the roles come from the schema (AOL key names by default)."""

    format = "forward"

    def __init__(self, schema: SchemaConfig | None = None, tag: str = DEFAULT_TAG) -> None:
        self.schema = schema or SchemaConfig()
        self.tag = tag
        keys = self.schema.roles.mapping()
        self.pairs = tuple((role, key) for role, key in keys.items() if key is not None)
        self._role_keys = frozenset(key for _, key in self.pairs)
        u, q = keys["user"], keys["query"]
        assert u is not None and q is not None  # typed str in RolesConfig
        self._user_key, self._query_key = u, q
        self._t, self._r, self._l = keys["time"], keys["rank"], keys["url"]

    def decode_many(self, records: Sequence[Any], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        out: list[Event] = []
        append = out.append
        uk, qk, tk, rk, lk = self._user_key, self._query_key, self._t, self._r, self._l
        new = ForwardEvent.__new__
        for i, entry in enumerate(records):
            m = entry.record
            if type(m) is not dict:
                bad.append((i, "record_not_map"))
                continue
            query = m.get(qk)
            if type(query) is not str:
                bad.append((i, "missing_query" if query is None else "query_not_string"))
                continue
            user = m.get(uk)
            if user is None:
                bad.append((i, "missing_user"))
                continue
            if (not query.isascii() and _surrogates(query)) or (type(user) is str and _surrogates(user)):
                bad.append((i, "invalid_utf8"))
                continue
            ev = new(ForwardEvent)
            ev.user = user
            ev.query = query
            t = ev.time = m.get(tk) if tk is not None else None
            r = ev.rank = m.get(rk) if rk is not None else None
            u = ev.url = m.get(lk) if lk is not None else None
            ev.orig = (user, query, t, r, u, entry)
            ev.packed = getattr(entry, "packed", None)
            ev.record = entry
            ev.raw = None
            ev.codec = self
            ev.eol = eol
            ev.meta = NO_META
            append(ev)
        return out

    @staticmethod
    def unchanged(event: Event) -> bytes | None:
        """The original bytes of ``[time, record]`` when the event is exactly as decoded (else None)."""
        if type(event) is not ForwardEvent or event.packed is None:
            return None
        u, q, t, r, lk, entry = event.orig
        if (
            event.record is entry
            and event.user is u
            and event.query is q
            and event.time is t
            and event.rank is r
            and event.url is lk
        ):
            return event.packed
        return None

    def encode(self, event: Event) -> Entry:
        """The event's entry: unchanged when no role changed, else a new entry with the roles written in."""
        entry = event.record
        if type(event) is ForwardEvent:
            u, q, t, r, lk, orig = event.orig
            if (
                entry is orig
                and event.user is u
                and event.query is q
                and event.time is t
                and event.rank is r
                and event.url is lk
            ):
                return entry
        if isinstance(event.codec, ForwardCodec) and isinstance(entry, Entry) and type(entry.record) is dict:
            m = entry.record
            for role, key in self.pairs:
                value = getattr(event, role)
                if key in m:
                    old = m[key]
                    if old is value or (type(old) is type(value) and old == value):
                        continue
                elif value is None:
                    continue
                break
            else:
                return entry
            m = dict(m)
            for role, key in self.pairs:
                value = getattr(event, role)
                if key in m or value is not None:
                    m[key] = value
            return Entry(entry.tag, entry.time, m)
        other = event.codec
        if other is not None and getattr(other, "json_records", False):  # a UBI record: its own map, nesting kept
            return Entry(self.tag, EventTime.from_ns(time.time_ns()), json.loads(other.encode(event)))
        return Entry(self.tag, EventTime.from_ns(time.time_ns()), foreign_record(event, self.pairs))

    # ---- field access (filters that change non-role fields) ------------------------------------
    def fields(self, event: Event) -> Mapping[str, Any]:
        entry = event.record
        if not isinstance(entry, Entry) or type(entry.record) is not dict:
            return {}
        role_keys = self._role_keys
        return {k: v for k, v in entry.record.items() if k not in role_keys}

    def layout(self, event: Event) -> list[tuple[str, str | None]]:
        """The record map's keys in order, each with the role it plays (None: a carried field)."""
        entry = event.record
        if not isinstance(event.codec, ForwardCodec) or not isinstance(entry, Entry) or type(entry.record) is not dict:
            return []
        role_of = {key: role for role, key in event.codec.pairs}
        return [(k, role_of.get(k)) for k in entry.record]

    def get_field(self, event: Event, name: str) -> Any:
        entry = event.record
        if not isinstance(entry, Entry) or type(entry.record) is not dict or name not in entry.record:
            raise FieldError("no_such_field")
        return entry.record[name]

    def set_field(self, event: Event, name: str, value: Any) -> None:
        entry = self._own(event)
        if name in self._role_keys:
            raise FieldError("field_is_role")
        m = dict(entry.record)
        m[name] = value
        event.record = Entry(entry.tag, entry.time, m)

    def remove_field(self, event: Event, name: str) -> None:
        entry = self._own(event)
        if name in self._role_keys:
            raise FieldError("field_is_role")
        if name in entry.record:
            event.record = Entry(entry.tag, entry.time, {k: v for k, v in entry.record.items() if k != name})

    def _own(self, event: Event) -> Entry:
        entry = event.record
        if not isinstance(event.codec, ForwardCodec) or not isinstance(entry, Entry) or type(entry.record) is not dict:
            raise FieldError("unsupported_codec")
        return entry

    # ---- the state store (held events) ---------------------------------------------------------
    def pack_record(self, record: Any) -> Any:
        """An entry as msgpack bytes ``[tag, time, map]`` (EventTime, str/bin and surrogates kept)."""
        if not isinstance(record, Entry):
            return None
        return packb([record.tag, record.time, record.record])

    def unpack_record(self, data: Any) -> Any:
        if not isinstance(data, bytes):
            return None
        tag, t, m = unpackb(data)
        return Entry(tag, t, m)
