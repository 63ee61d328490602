"""Vector log events <-> events: the ``vector`` codec.

A record is one ``event.EventWrapper`` as it came in (:class:`VectorRecord`: the parsed message and its
wire bytes). The roles are top-level keys of the log's map, named by ``schema.roles`` exactly as for JSON
lines: the defaults are the AOL column names (``AnonID``, ``Query``, ``QueryTime``, ``ItemRank``,
``ClickURL``), so a Vector user sets them to the keys of their events, for instance::

    schema:
      roles: {user: user_id, query: message, time: timestamp, rank: null, url: null}

(``null``: the event has no such role.) The map is ``Log.value`` (what current Vector sends); a log without
``value`` is read from the deprecated ``Log.fields`` map and written back there.

**The identity rule.** An event whose role values are those decoded (the very objects, or equal values of
the same type) is encoded as its original bytes: everything (``metadata_full``, the deprecated
``metadata``, unknown fields, map order) round-trips byte for byte. A changed event is the original
message with only its changed role keys rewritten, each keeping its kind where the new value fits (a
timestamp stays a timestamp, see :mod:`adapters.vector.values`), serialized deterministically (map keys in
order, as Vector itself writes them). Events from other formats (a TSV line, a JSON object, a gRPC
``QueryEvent``) become fresh logs: their roles and carried fields in ``Log.value``.

Records are read-only: a filter changes a non-role field with ``set_field``/``remove_field`` (which give
the event a new record; the old one, perhaps still held by another event, is untouched), never by editing
the message.

**Bad records** (dead-lettered by reason): ``invalid_event`` (bytes that are no ``EventWrapper``, or a
map key that is not UTF-8), ``unsupported_event`` (a metric or a trace: not a query), ``empty_event``
(no kind), ``log_value_not_map`` (a log whose ``value`` is not a map: Vector's ``log_namespace`` mode with
a bare message), ``missing_query`` (no query key, or null), ``query_not_string`` (a query of another
kind), ``query_not_utf8`` (query bytes that are not UTF-8), ``missing_user`` (no user key, or null). An
empty query is a valid event.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import msgpack
from google.protobuf.message import DecodeError

from adapters.vector.stubs.event_pb2 import EventWrapper, Value
from adapters.vector.values import plain, set_value, to_python
from sidecar.api import ROLES, BadRecord, Codec, Event, FieldError, SchemaConfig
from sidecar.protowire import read_varint
from sidecar.records import foreign_record

__all__ = ["EventWrapper", "VectorCodec", "VectorRecord", "frame", "split_request"]

_LOG = "log"
_PACK_VERSION = 1


class VectorRecord:
    """One Vector event: the parsed ``EventWrapper``, its wire bytes and the role keys it was decoded with."""

    __slots__ = ("keys", "legacy", "orig", "wire", "wrapper")

    def __init__(
        self, wrapper: EventWrapper, wire: bytes, keys: tuple[str | None, ...], legacy: bool, orig: tuple[Any, ...]
    ) -> None:
        self.wrapper = wrapper
        #: the serialization of ``wrapper``: the input bytes when decoded, else the bytes after the edit
        self.wire = wire
        #: the record key of each role (``ROLES`` order; None: no such role)
        self.keys = keys
        #: True when the map is the deprecated ``Log.fields`` (no ``Log.value``)
        self.legacy = legacy
        #: the role values as decoded from this record
        self.orig = orig

    def fields(self) -> Any:
        """The log's top-level map (a protobuf map of ``event.Value``); read only."""
        return _map_of(self.wrapper, self.legacy)

    def __repr__(self) -> str:  # never show values
        return f"<VectorRecord bytes={len(self.wire)} legacy={self.legacy}>"


def _map_of(wrapper: EventWrapper, legacy: bool) -> Any:
    log = wrapper.log
    return log.fields if legacy else log.value.map.fields


def _same(a: Any, b: Any) -> bool:
    """``a`` is ``b`` as a role value: the same object, or equal values of the same kind (str subclasses alike)."""
    if a is b:
        return True
    if a != b:
        return False
    ta, tb = type(a), type(b)
    return ta is tb or (isinstance(a, str) and isinstance(b, str))


def _read(fields: Any, key: str | None) -> Any:
    if key is None:
        return None
    v = fields.get(key)
    return None if v is None else to_python(v)


class VectorCodec(Codec):
    """Vector ``EventWrapper`` records (wire bytes) <-> events; roles are top-level keys of the log map."""

    format = "vector"

    def __init__(self, schema: SchemaConfig | None = None) -> None:
        """``schema``: the configured record schema (None: the defaults, as when a held event is restored)."""
        self.schema = schema or SchemaConfig()
        mapping = self.schema.roles.mapping()
        self.keys: tuple[str | None, ...] = tuple(mapping[r] for r in ROLES)
        self.pairs = tuple((role, key) for role, key in mapping.items() if key is not None)

    # ---- decoding -------------------------------------------------------------------------------
    def decode_many(self, records: Sequence[Any], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        """Events for ``EventWrapper`` wire bytes (or messages), in order; bad ones go to ``bad`` by reason."""
        keys = self.keys
        uk, qk, tk, rk, lk = keys
        out: list[Event] = []
        append = out.append
        from_string = EventWrapper.FromString
        for i, data in enumerate(records):
            if isinstance(data, EventWrapper):
                wrapper, data = data, data.SerializeToString()
            else:
                try:
                    wrapper = from_string(data)
                except (DecodeError, ValueError, TypeError):
                    bad.append((i, "invalid_event"))
                    continue
            kind = wrapper.WhichOneof("event")
            if kind != _LOG:
                bad.append((i, "unsupported_event" if kind else "empty_event"))
                continue
            log = wrapper.log
            legacy = not log.HasField("value")
            if legacy:
                fields = log.fields
            else:
                value = log.value
                if value.WhichOneof("kind") != "map":
                    bad.append((i, "log_value_not_map"))
                    continue
                fields = value.map.fields
            q = fields.get(qk) if qk is not None else None
            if q is None or q.WhichOneof("kind") != "raw_bytes":
                kind = q.WhichOneof("kind") if q is not None else None
                bad.append((i, "missing_query" if kind is None or kind == "null" else "query_not_string"))
                continue
            try:
                query = q.raw_bytes.decode("utf-8")
            except UnicodeDecodeError:
                bad.append((i, "query_not_utf8"))
                continue
            v = fields.get(uk) if uk is not None else None
            user = to_python(v) if v is not None else None
            if user is None:
                bad.append((i, "missing_user"))
                continue
            v = fields.get(tk) if tk is not None else None
            time = to_python(v) if v is not None else None
            v = fields.get(rk) if rk is not None else None
            rank = to_python(v) if v is not None else None
            v = fields.get(lk) if lk is not None else None
            url = to_python(v) if v is not None else None
            record = VectorRecord(wrapper, data, keys, legacy, (user, query, time, rank, url))
            append(Event(user, query, time, rank, url, record, None, self, eol))
        return out

    # ---- encoding -------------------------------------------------------------------------------
    def encode(self, event: Event) -> bytes:
        """The event as ``EventWrapper`` wire bytes (see the identity rule); :class:`BadRecord` for a value
        Vector cannot carry."""
        rec = event.record
        if type(rec) is not VectorRecord:
            return self.fresh(event)
        o = rec.orig
        u, q, t, r, lk = o
        if (
            (event.query is q or _same(event.query, q))
            and (event.user is u or _same(event.user, u))
            and (event.time is t or _same(event.time, t))
            and (event.rank is r or _same(event.rank, r))
            and (event.url is lk or _same(event.url, lk))
        ):
            return rec.wire
        wrapper = EventWrapper.FromString(rec.wire)
        fields = _map_of(wrapper, rec.legacy)
        for i, (role, key) in enumerate(zip(ROLES, rec.keys)):
            value = getattr(event, role)
            if key is None or _same(value, o[i]):
                continue
            old = fields.get(key)
            if old is None and value is None:
                continue  # absent, and still none
            like = old.WhichOneof("kind") if old is not None else None
            v = fields[key]
            v.Clear()
            set_value(v, value, like)
        return wrapper.SerializeToString(deterministic=True)

    def fresh(self, event: Event) -> bytes:
        """A new log from an event of another format, in ``Log.value``: the keys of its record
        (:func:`~sidecar.codecs.foreign_record`: a null role key stays, as a null) in key order, as Vector writes
        a map. A record that is a JSON object of its own (``json_records``: a UBI record) is that object: its own
        keys, nested objects as maps."""
        wrapper = EventWrapper()
        value = wrapper.log.value
        value.map.SetInParent()
        fields = value.map.fields
        other = event.codec
        if other is not None and getattr(other, "json_records", False):
            record = json.loads(other.encode(event))
        else:
            record = foreign_record(event, self.pairs)
        for key, item in record.items():
            set_value(fields[str(key)], item)
        return wrapper.SerializeToString(deterministic=True)

    # ---- fields ---------------------------------------------------------------------------------
    def fields(self, event: Event) -> Mapping[str, Any]:
        """Non-role top-level fields, in key order, as other formats carry them (bytes and timestamps as text)."""
        rec = event.record
        if type(rec) is not VectorRecord:
            return {}
        fields = rec.fields()
        roles = set(rec.keys)
        return {k: plain(fields[k]) for k in sorted(fields) if k not in roles}

    def layout(self, event: Event) -> list[tuple[str, str | None]]:
        """The log's top-level keys, each with the role it plays: a Vector map has no order of its own, so the
        other keys in key order, then the role keys it has (null ones too) in role order (user, query, time,
        rank, url), as other formats have always received them."""
        rec = event.record
        if type(rec) is not VectorRecord:
            return []
        fields = rec.fields()
        roles = [(key, role) for role, key in zip(ROLES, rec.keys, strict=True) if key is not None and key in fields]
        role_keys = {key for key, _ in roles}
        return [*((k, None) for k in sorted(fields) if k not in role_keys), *roles]

    def get_field(self, event: Event, name: str) -> Any:
        """The typed value of top-level field ``name`` (see :mod:`adapters.vector.values`)."""
        rec = event.record
        if type(rec) is not VectorRecord:
            raise FieldError("no_such_field")
        v = rec.fields().get(name)
        if v is None:
            raise FieldError("no_such_field")
        return to_python(v)

    def set_field(self, event: Event, name: str, value: Any) -> None:
        """Set non-role top-level field ``name`` (the event gets a new record; its kind kept where it fits)."""
        rec = self._own(event, name)
        wrapper = EventWrapper.FromString(rec.wire)
        fields = _map_of(wrapper, rec.legacy)
        old = fields.get(name)
        like = old.WhichOneof("kind") if old is not None else None
        v = Value()
        try:
            set_value(v, value, like)
        except BadRecord as exc:
            raise FieldError(exc.reason) from None
        fields[name].CopyFrom(v)
        event.record = self._edited(rec, wrapper)

    def remove_field(self, event: Event, name: str) -> None:
        """Remove non-role top-level field ``name`` (the event gets a new record)."""
        rec = self._own(event, name)
        if name not in rec.fields():
            return
        wrapper = EventWrapper.FromString(rec.wire)
        del _map_of(wrapper, rec.legacy)[name]
        event.record = self._edited(rec, wrapper)

    def _own(self, event: Event, name: str) -> VectorRecord:
        rec = event.record
        if type(rec) is not VectorRecord:
            raise FieldError("unsupported_codec")
        if name in rec.keys:
            raise FieldError("field_is_role")
        return rec

    @staticmethod
    def _edited(rec: VectorRecord, wrapper: EventWrapper) -> VectorRecord:
        return VectorRecord(wrapper, wrapper.SerializeToString(deterministic=True), rec.keys, rec.legacy, rec.orig)

    # ---- the state store ------------------------------------------------------------------------
    def pack_record(self, record: Any) -> Any:
        """The record's wire bytes with its role keys (so a codec built without the schema restores it)."""
        if type(record) is not VectorRecord:
            return None
        packed: bytes = msgpack.packb([_PACK_VERSION, list(record.keys), record.legacy, record.wire])
        return packed

    def unpack_record(self, data: Any) -> Any:
        try:
            version, keys, legacy, wire = msgpack.unpackb(data)
            if version != _PACK_VERSION:
                return None
            wrapper = EventWrapper.FromString(wire)
            keys = tuple(keys)
            orig = tuple(_read(_map_of(wrapper, legacy), key) for key in keys)
        except (ValueError, TypeError, AttributeError, DecodeError, msgpack.UnpackException):
            return None
        return VectorRecord(wrapper, wire, keys, bool(legacy), orig)


# ---- PushEventsRequest framing -------------------------------------------------------------------
_EVENTS_TAG = 0x0A  # field 1 (events), wire type 2 (length-delimited)


def split_request(data: bytes) -> list[bytes]:
    """The wire bytes of each event of a ``PushEventsRequest``, in order (field 1; other fields skipped).

    ValueError when the request's own framing is broken (then no event can be trusted).
    """
    out: list[bytes] = []
    append = out.append
    pos = 0
    end = len(data)
    while pos < end:
        if data[pos] == _EVENTS_TAG:  # the common case: one byte of tag
            size, pos = read_varint(data, pos + 1)
            stop = pos + size
            if stop > end:
                raise ValueError("truncated event")
            append(data[pos:stop])
            pos = stop
            continue
        tag, pos = read_varint(data, pos)
        wire_type = tag & 7
        if tag >> 3 == 0:
            raise ValueError("field number 0")
        if wire_type == 0:
            _, pos = read_varint(data, pos)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 2:
            size, pos = read_varint(data, pos)
            pos += size
        elif wire_type == 5:
            pos += 4
        else:
            raise ValueError("unsupported wire type")
        if pos > end:
            raise ValueError("truncated field")
    return out


def _encoderead_varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def frame(events: Sequence[bytes]) -> bytes:
    """A ``PushEventsRequest`` of ``EventWrapper`` wire bytes (the inverse of :func:`split_request`)."""
    parts: list[bytes] = []
    append = parts.append
    for wire in events:
        n = len(wire)
        if n < 0x80:
            append(bytes((_EVENTS_TAG, n)))
        elif n < 0x4000:
            append(bytes((_EVENTS_TAG, (n & 0x7F) | 0x80, n >> 7)))
        else:
            append(b"\x0a" + _encoderead_varint(n))
        append(wire)
    return b"".join(parts)
