"""OTLP log records <-> events: the ``otlp`` codec.

A record (:class:`OtlpRecord`) is one ``LogRecord`` as it came, with its resource and scope: the three wire parts
of :class:`~adapters.otlp.wire.Piece` and the parsed ``LogRecord``. The roles are named by ``schema.roles`` (see
:mod:`adapters.otlp.values`: ``body``, ``attributes.<key>``, ``resource.<key>``, ``time_unix_nano``), e.g.::

    schema:
      roles: {user: attributes.enduser.id, query: body, time: time_unix_nano, rank: null, url: null}

**The identity rule.** An event whose role values are those decoded is encoded as its original pieces: the
``LogRecord`` bytes as sent (attributes in their order, timestamps, severity, trace and span ids, flags, unknown
fields), with the bytes of its resource and scope. A changed event is its record with only the changed role
values rewritten in place (an attribute keeps its position and, where the value fits, its kind); a changed
``resource.<key>`` gives that record its own copy of the resource. Events of other formats become fresh log
records: the query role's key and the others as the roles name them, the other fields as attributes.

**Bad records** (dead-lettered by reason): ``invalid_log_record`` (bytes that are no ``LogRecord``),
``invalid_resource`` (a resource part that does not parse while a resource role is read), ``missing_query`` (no
such body or attribute), ``query_not_string`` (a query of another kind), ``missing_user``. An empty query is a
valid event.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import msgpack
from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs, ScopeLogs

from adapters.otlp import scan as scanning
from adapters.otlp.scan import Scanned, scanned_role, scanned_text
from adapters.otlp.values import RoleKey, plain, read_attribute_roles, record_text, role_key, set_value, to_python
from adapters.otlp.wire import Piece
from sidecar.api import ROLES, BadRecord, Codec, Event, FieldError, SchemaConfig
from sidecar.records import escape_breaks, foreign_record

__all__ = ["OtlpCodec", "OtlpRecord"]

_PACK_VERSION = 1
_SLOT = "\x00record\x00"  # where a record goes in the cached OTLP/JSON of its resource and scope
_FRAMES = 256  # resource/scope pairs whose OTLP/JSON is cached


class OtlpRecord:
    """One log record: its :class:`Piece` (wire parts), the parsed ``LogRecord`` and the role values decoded."""

    __slots__ = ("_msg", "keys", "orig", "piece", "scanned")

    def __init__(
        self,
        piece: Piece,
        msg: LogRecord | None,
        keys: tuple[str | None, ...],
        orig: tuple[Any, ...],
        scanned: Scanned | None = None,
    ) -> None:
        """``msg`` None: parsed when first read (a record of the common shape comes ``scanned``)."""
        self.piece = piece
        self._msg = msg
        #: the role names this record was decoded with (``ROLES`` order; None: no such role)
        self.keys = keys
        #: the role values as decoded
        self.orig = orig
        #: ``piece.log`` read by :func:`~adapters.otlp.scan.scan` (None: not of the common shape)
        self.scanned = scanned

    @property
    def msg(self) -> LogRecord:
        """The parsed ``LogRecord`` of ``piece.log``: read only."""
        msg = self._msg
        if msg is None:
            msg = self._msg = LogRecord.FromString(self.piece.log)
        return msg

    def __repr__(self) -> str:  # never show values
        return f"<OtlpRecord bytes={len(self.piece.log)}>"


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    return type(a) is type(b) and a == b


def _resource_attrs(resource: bytes) -> Any:
    """The attributes of a resource part (a ``ResourceLogs`` without its scope logs)."""
    return ResourceLogs.FromString(resource).resource.attributes


def _find(attrs: Any, key: str) -> Any:
    for kv in attrs:
        if kv.key == key:
            return kv
    return None


def _read(msg: LogRecord, resource: bytes, key: RoleKey | None) -> Any:
    """A role's value in a record (None: absent)."""
    if key is None:
        return None
    if key.kind == "body":
        return to_python(msg.body) if msg.HasField("body") else None
    if key.kind == "time":
        return getattr(msg, key.name) or None
    attrs = msg.attributes if key.kind == "attr" else _resource_attrs(resource)
    kv = _find(attrs, key.name)
    return None if kv is None else to_python(kv.value)


def _write(attrs: Any, key: str, value: Any) -> None:
    """Set attribute ``key`` (in its place, keeping its kind where it fits), add it at the end, or remove it (None).

    A key the record repeats (OTLP forbids it; a sender may do it anyway) keeps only its first place: the later
    copies are removed, so an old value (a query before scrubbing) never stays behind in one of them."""
    found = [kv for kv in attrs if kv.key == key]
    for extra in found[1:]:
        attrs.remove(extra)
    kv = found[0] if found else None
    if value is None:
        if kv is not None:
            attrs.remove(kv)
        return
    if kv is None:
        kv = attrs.add()
        kv.key = key
    like = kv.value.WhichOneof("value")
    kv.value.Clear()
    set_value(kv.value, value, like)


class OtlpCodec(Codec):
    """OTLP ``LogRecord`` records (with resource and scope) <-> events; roles by ``schema.roles``."""

    format = "otlp"

    def __init__(self, schema: SchemaConfig | None = None) -> None:
        """``schema``: the configured record schema (None: the defaults, as when a held event is restored)."""
        self.schema = schema or SchemaConfig()
        mapping = self.schema.roles.mapping()
        self.names: tuple[str | None, ...] = tuple(mapping[r] for r in ROLES)
        self.pairs = tuple((role, key) for role, key in mapping.items() if key is not None)
        #: reads a record of the common shape from its bytes (:mod:`adapters.otlp.scan`), when compiled: None, the
        #: protobuf parse (interpreted, the scan is the slower of the two)
        self.scan: Callable[[bytes], Scanned | None] | None = scanning.scan if scanning.COMPILED else None
        #: the OTLP/JSON around a record, by (resource, scope) parts
        self._frames: dict[tuple[bytes, bytes], tuple[str, str]] = {}

    # ---- decoding -------------------------------------------------------------------------------
    def decode_many(self, records: Sequence[Any], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        """Events for :class:`Piece` records, in order; bad ones go to ``bad`` by reason."""
        names = self.names
        keys = tuple(role_key(n) if n is not None else None for n in names)
        on_record = [(j, k) for j, k in enumerate(keys) if k is not None and k.kind in ("body", "time")]
        on_resource = [(j, k.name) for j, k in enumerate(keys) if k is not None and k.kind == "resource"]
        attr_keys: dict[str, int] = {}  # an attribute key -> the role it plays
        copies: list[tuple[int, int]] = []  # (from, to): a key that plays two roles
        for j, k in enumerate(keys):
            if k is not None and k.kind == "attr":
                if k.name in attr_keys:
                    copies.append((attr_keys[k.name], j))
                else:
                    attr_keys[k.name] = j
        attr_get = attr_keys.get
        wanted = len(attr_keys)
        resources: dict[bytes, Any] = {}  # the resource attributes of this batch's resources, parsed once each
        out: list[Event] = []
        append = out.append
        from_string = LogRecord.FromString
        scan = self.scan
        for i, piece in enumerate(records):
            values: list[Any] = [None, None, None, None, None]
            msg: LogRecord | None = None
            scanned = scan(piece.log) if scan is not None else None
            if scanned is not None:  # the common shape, read from the bytes: no protobuf accessor
                if attr_keys:
                    for name, value, _ in scanned.attributes:
                        slot = attr_get(name)
                        if slot is not None and values[slot] is None:  # the first of a repeated key
                            values[slot] = value
                for j, key in on_record:
                    values[j] = scanned_role(scanned, key.kind == "body", key.name)
            else:
                try:
                    msg = from_string(piece.log)
                except (DecodeError, ValueError, TypeError):
                    bad.append((i, "invalid_log_record"))
                    continue
                if attr_keys:
                    read_attribute_roles(msg.attributes, attr_get, wanted, values)
                for j, key in on_record:
                    values[j] = _read(msg, b"", key)
            for a, b in copies:
                values[b] = values[a]
            if on_resource:
                attrs = resources.get(piece.resource)
                if attrs is None:
                    try:
                        attrs = resources[piece.resource] = _resource_attrs(piece.resource)
                    except (DecodeError, ValueError):
                        bad.append((i, "invalid_resource"))
                        continue
                for j, name in on_resource:
                    kv = _find(attrs, name)
                    values[j] = None if kv is None else to_python(kv.value)
            user, query, time, rank, url = values
            if type(query) is not str:
                bad.append((i, "missing_query" if query is None else "query_not_string"))
                continue
            if user is None:
                bad.append((i, "missing_user"))
                continue
            record = OtlpRecord(piece, msg, names, (user, query, time, rank, url), scanned)
            append(Event(user, query, time, rank, url, record, None, self, eol))
        return out

    # ---- encoding -------------------------------------------------------------------------------
    def encode(self, event: Event) -> Piece:
        """The event as a :class:`Piece` (see the identity rule); :class:`BadRecord` for a value OTLP cannot carry."""
        rec = event.record
        if type(rec) is not OtlpRecord:
            return self.fresh(event)
        o = rec.orig
        user, query, time, rank, url = o
        if (  # the same objects (an event no filter touched: no call), else equal values of the same types
            event.query is query
            and event.user is user
            and event.time is time
            and event.rank is rank
            and event.url is url
        ) or (
            _same(event.query, query)
            and _same(event.user, user)
            and _same(event.time, time)
            and _same(event.rank, rank)
            and _same(event.url, url)
        ):
            return rec.piece
        msg = LogRecord.FromString(rec.piece.log)
        resource = rec.piece.resource
        resource_logs: ResourceLogs | None = None
        for i, (role, name) in enumerate(zip(ROLES, rec.keys, strict=True)):
            value = getattr(event, role)
            if name is None or _same(value, o[i]):
                continue
            key = role_key(name)
            if key.kind == "body":
                like = msg.body.WhichOneof("value")
                msg.body.Clear()
                if value is not None:
                    set_value(msg.body, value, like)
                else:
                    msg.ClearField("body")
            elif key.kind == "time":
                try:
                    setattr(msg, key.name, int(value or 0))
                except (TypeError, ValueError):
                    raise BadRecord("time_not_integer") from None
            elif key.kind == "attr":
                _write(msg.attributes, key.name, value)
            else:
                if resource_logs is None:
                    resource_logs = ResourceLogs.FromString(resource)
                _write(resource_logs.resource.attributes, key.name, value)
        if resource_logs is not None:
            resource = resource_logs.SerializeToString()
        return Piece(resource, rec.piece.scope, msg.SerializeToString())

    def fresh(self, event: Event) -> Piece:
        """A new log record from an event of another format: its record's keys in their order (roles where the
        schema names them, the other fields as attributes). A UBI record (``json_records``) is the body, a map."""
        msg = LogRecord()
        other = event.codec
        if other is not None and getattr(other, "json_records", False):  # what adapters.otlp.objects reads back
            set_value(msg.body, json.loads(other.encode(event)))
            return Piece(b"", b"", msg.SerializeToString())
        resource_logs = ResourceLogs()
        for name, value in foreign_record(event, self.pairs).items():
            key = role_key(str(name))
            if key.kind == "body":
                if value is not None:
                    set_value(msg.body, value)
            elif key.kind == "time":
                if isinstance(value, int) and not isinstance(value, bool):
                    setattr(msg, key.name, value)
                elif value is not None:
                    _write(msg.attributes, key.name, value)
            elif key.kind == "attr":
                _write(msg.attributes, key.name, value)
            else:
                _write(resource_logs.resource.attributes, key.name, value)
        return Piece(resource_logs.SerializeToString(), b"", msg.SerializeToString())

    def json_line(self, event: Event) -> str:
        """The event as one line of OTLP/JSON: an ``ExportLogsServiceRequest`` of its one record, with its resource
        and scope (ids as hex, enums as numbers, 64-bit integers as strings), as the OpenTelemetry Collector's
        file exporter writes."""
        piece = self.encode(event)
        head, tail = self._frames.get((piece.resource, piece.scope)) or self._frame_json(piece)
        rec = event.record
        if type(rec) is OtlpRecord and rec.piece is piece:
            text = scanned_text(rec.scanned) if rec.scanned is not None else record_text(rec.msg)
        else:
            text = record_text(LogRecord.FromString(piece.log))
        return head + escape_breaks(text) + tail

    def _frame_json(self, piece: Piece) -> tuple[str, str]:
        """The OTLP/JSON around a record of ``piece``'s resource and scope (cached: a batch shares a few)."""
        resource = json_format.MessageToDict(ResourceLogs.FromString(piece.resource))
        scope = json_format.MessageToDict(ScopeLogs.FromString(piece.scope))
        text = json.dumps(
            {"resourceLogs": [{**resource, "scopeLogs": [{**scope, "logRecords": [_SLOT]}]}]},
            separators=(",", ":"),
            ensure_ascii=False,
        )
        head, _, tail = escape_breaks(text).partition(json.dumps(_SLOT))
        if len(self._frames) >= _FRAMES:
            self._frames.clear()
        self._frames[(piece.resource, piece.scope)] = (head, tail)
        return head, tail

    # ---- fields ---------------------------------------------------------------------------------
    def fields(self, event: Event) -> Mapping[str, Any]:
        """The record's non-role attributes as ``attributes.<key>``, in their order (bytes as base64 text)."""
        rec = event.record
        if type(rec) is not OtlpRecord:
            return {}
        roles = {role_key(n) for n in rec.keys if n is not None}
        return {
            f"attributes.{kv.key}": plain(to_python(kv.value))
            for kv in rec.msg.attributes
            if RoleKey("attr", kv.key) not in roles
        }

    def get_field(self, event: Event, name: str) -> Any:
        """The value of ``body``, ``attributes.<key>``, ``resource.<key>`` or a timestamp."""
        rec = event.record
        if type(rec) is not OtlpRecord:
            raise FieldError("no_such_field")
        value = _read(rec.msg, rec.piece.resource, role_key(name))
        if value is None:
            raise FieldError("no_such_field")
        return value

    def set_field(self, event: Event, name: str, value: Any) -> None:
        """Set a non-role attribute (``attributes.<key>``) or resource attribute (the event gets a new record)."""
        self._edit(event, name, value)

    def remove_field(self, event: Event, name: str) -> None:
        """Remove a non-role attribute or resource attribute (the event gets a new record)."""
        self._edit(event, name, None)

    def _edit(self, event: Event, name: str, value: Any) -> None:
        rec = event.record
        if type(rec) is not OtlpRecord:
            raise FieldError("unsupported_codec")
        key = role_key(name)
        if key in {role_key(n) for n in rec.keys if n is not None}:
            raise FieldError("field_is_role")
        if key.kind not in ("attr", "resource"):
            raise FieldError("unsupported_field")
        try:
            if key.kind == "attr":
                msg = LogRecord.FromString(rec.piece.log)
                _write(msg.attributes, key.name, value)
                piece = Piece(rec.piece.resource, rec.piece.scope, msg.SerializeToString())
            else:
                msg = rec.msg
                resource_logs = ResourceLogs.FromString(rec.piece.resource)
                _write(resource_logs.resource.attributes, key.name, value)
                piece = Piece(resource_logs.SerializeToString(), rec.piece.scope, rec.piece.log)
        except BadRecord as exc:
            raise FieldError(exc.reason) from None
        event.record = OtlpRecord(piece, msg, rec.keys, rec.orig)

    # ---- the state store ------------------------------------------------------------------------
    def pack_record(self, record: Any) -> Any:
        """The record's wire parts with its role names (so a codec built without the schema restores it)."""
        if type(record) is not OtlpRecord:
            return None
        p = record.piece
        packed: bytes = msgpack.packb([_PACK_VERSION, list(record.keys), p.resource, p.scope, p.log])
        return packed

    def unpack_record(self, data: Any) -> Any:
        try:
            version, keys, resource, scope, log = msgpack.unpackb(data)
            if version != _PACK_VERSION:
                return None
            msg = LogRecord.FromString(log)
            names = tuple(keys)
            orig = tuple(_read(msg, resource, role_key(n) if n is not None else None) for n in names)
        except (ValueError, TypeError, AttributeError, DecodeError, msgpack.UnpackException):
            return None
        return OtlpRecord(Piece(resource, scope, log), msg, names, orig)
