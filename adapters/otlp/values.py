"""OTLP values and role names: ``AnyValue`` <-> Python, where a role lives in a log record, OTLP/JSON ids.

**Role names** (``schema.roles``): ``body`` (the record's body), ``attributes.<key>`` (a record attribute: the rest
of the name is the key, dots included), ``resource.<key>`` (an attribute of the record's resource),
``time_unix_nano`` / ``observed_time_unix_nano`` (the timestamps, integers of nanoseconds). Any other name is an
attribute key, so the AOL defaults and Python logging's ``extra={...}`` names work as they are; write
``attributes.body`` for an attribute named ``body``.

**Values.** A string, bool, integer, double or bytes value is that Python value; an array a list, a key-value
list a dict (arrays and lists become text in other formats). A value written back keeps its kind where it fits
(an integer into an int attribute...), else takes the kind of the Python value; None removes the attribute.
"""

from __future__ import annotations

import base64
import json
import math
from json.encoder import encode_basestring as _quote  # a JSON string, non-ASCII kept (the C encoder)
from typing import Any, NamedTuple

from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from sidecar.api import BadRecord

__all__ = [
    "BODY",
    "RoleKey",
    "any_json",
    "from_hex_ids",
    "plain",
    "read_attribute_roles",
    "record_text",
    "role_key",
    "set_value",
    "to_python",
]

BODY = "body"
TIMES = ("time_unix_nano", "observed_time_unix_nano")
_ATTRIBUTES = "attributes."
_RESOURCE = "resource."
_INT64 = (-(2**63), 2**63 - 1)


class RoleKey(NamedTuple):
    """Where a role lives: ``kind`` is ``body``, ``time`` (``name`` the field), ``attr`` or ``resource`` (``name``
    the attribute key)."""

    kind: str
    name: str


def role_key(text: str) -> RoleKey:
    """The place of a role named ``text`` (see the module)."""
    if text == BODY:
        return RoleKey("body", BODY)
    if text in TIMES:
        return RoleKey("time", text)
    if text.startswith(_ATTRIBUTES) and len(text) > len(_ATTRIBUTES):
        return RoleKey("attr", text[len(_ATTRIBUTES) :])
    if text.startswith(_RESOURCE) and len(text) > len(_RESOURCE):
        return RoleKey("resource", text[len(_RESOURCE) :])
    return RoleKey("attr", text)


def to_python(v: AnyValue) -> Any:
    """The Python value of an ``AnyValue`` (None: no value)."""
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [to_python(x) for x in v.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: to_python(kv.value) for kv in v.kvlist_value.values}
    return getattr(v, kind)


def read_attribute_roles(attrs: Any, slot_of: Any, wanted: int, values: list[Any]) -> None:
    """The roles played by a parsed record's attributes into ``values`` (``slot_of``: a key's slot, or None; the
    first of a repeated key counts); stops once the ``wanted`` roles are found."""
    left = wanted
    for kv in attrs:
        slot = slot_of(kv.key)
        if slot is not None and values[slot] is None:
            v = kv.value
            value = v.string_value  # a non-empty string is a string value: one call, not two
            if not value and v.WhichOneof("value") != "string_value":
                value = to_python(v)
            values[slot] = value
            if value is not None:
                left -= 1
                if not left:  # every role found: the other attributes are not read
                    return


def plain(value: Any) -> Any:
    """A value as JSON can carry it (bytes as base64 text, nested values as they are)."""
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    return value


def set_value(v: AnyValue, value: Any, like: str | None = None) -> None:
    """Write ``value`` into ``v``, keeping the kind ``like`` where the value fits it; :class:`BadRecord` for a value
    OTLP cannot carry (an integer beyond int64, a lone surrogate). None leaves ``v`` empty: an ``AnyValue`` with no
    value is OTLP's null (a null inside a map or a list stays a null, never the text ``None``)."""
    if value is None:
        return
    if like == "string_value" and not isinstance(value, str | bytes | dict | list):
        value = str(value)
    if isinstance(value, bool):
        v.bool_value = value
    elif isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise BadRecord("int_out_of_range")
        if like == "double_value":
            v.double_value = float(value)
        else:
            v.int_value = value
    elif isinstance(value, float):
        v.double_value = value
    elif isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise BadRecord("string_not_utf8") from None
        v.string_value = value
    elif isinstance(value, bytes):
        v.bytes_value = value
    elif isinstance(value, list | tuple):
        v.array_value.SetInParent()
        for item in value:
            set_value(v.array_value.values.add(), item)
    elif isinstance(value, dict):
        v.kvlist_value.SetInParent()
        for key, item in value.items():
            kv = v.kvlist_value.values.add()
            kv.key = str(key)
            set_value(kv.value, item)
    else:
        v.string_value = str(value)


def any_json(v: AnyValue) -> dict[str, Any]:
    """An ``AnyValue`` in the OTLP/JSON mapping (64-bit integers as strings, bytes as base64)."""
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return {"stringValue": v.string_value}
    if kind == "int_value":
        return {"intValue": str(v.int_value)}
    if kind == "bool_value":
        return {"boolValue": v.bool_value}
    if kind == "double_value":
        return {"doubleValue": v.double_value}
    if kind == "bytes_value":
        return {"bytesValue": base64.b64encode(v.bytes_value).decode("ascii")}
    if kind == "array_value":
        items = [any_json(x) for x in v.array_value.values]
        return {"arrayValue": {"values": items} if items else {}}
    if kind == "kvlist_value":
        pairs = [{"key": kv.key, "value": any_json(kv.value)} for kv in v.kvlist_value.values]
        return {"kvlistValue": {"values": pairs} if pairs else {}}
    return {}


def _double(x: float) -> str:
    if math.isfinite(x):
        return repr(x)
    return '"NaN"' if math.isnan(x) else ('"Infinity"' if x > 0 else '"-Infinity"')


def any_text(v: AnyValue) -> str:
    """:func:`any_json` as JSON text (the scalar kinds written directly: the hot path of a file of OTLP/JSON)."""
    kind = v.WhichOneof("value")
    if kind == "string_value":
        return '{"stringValue":' + _quote(v.string_value) + "}"
    if kind == "int_value":
        return f'{{"intValue":"{v.int_value}"}}'
    if kind == "bool_value":
        return '{"boolValue":true}' if v.bool_value else '{"boolValue":false}'
    if kind == "double_value":
        return '{"doubleValue":' + _double(v.double_value) + "}"
    if kind is None:
        return "{}"
    return json.dumps(any_json(v), separators=(",", ":"), ensure_ascii=False)


#: the OTLP/JSON of an attribute up to its value (``{"key":"<key>","value":``), and up to a string value's text
#: (``...{"stringValue":``), by key: keys repeat from record to record
_HEADS: dict[str, str] = {}
_STRING_HEADS: dict[str, str] = {}
_HEADS_MAX = 4096


def _head(key: str, string: bool) -> str:
    heads = _STRING_HEADS if string else _HEADS
    if len(heads) >= _HEADS_MAX:
        heads.clear()
    head = heads[key] = '{"key":' + _quote(key) + ',"value":' + ('{"stringValue":' if string else "")
    return head


def attributes_text(attrs: Any) -> str:
    """A repeated ``KeyValue`` in the OTLP/JSON mapping, as JSON text (the common kind, a string, written here)."""
    items: list[str] = []
    add = items.append
    heads = _STRING_HEADS
    for kv in attrs:
        v = kv.value
        s = v.string_value  # a non-empty string is a string value: one call instead of two
        if s or v.WhichOneof("value") == "string_value":
            key = kv.key
            add((heads.get(key) or _head(key, True)) + _quote(s) + "}}")
        else:
            key = kv.key
            add((_HEADS.get(key) or _head(key, False)) + any_text(v) + "}")
    return "[" + ",".join(items) + "]"


def record_text(r: Any) -> str:
    """A ``LogRecord`` in the OTLP/JSON mapping, as JSON text (fields in field-number order, defaults left out,
    64-bit integers as strings, ids as hex). Unknown fields, which JSON cannot name, are left out."""
    parts: list[str] = []
    add = parts.append
    if t := r.time_unix_nano:
        add(f'"timeUnixNano":"{t}"')
    if n := r.severity_number:
        add(f'"severityNumber":{n}')
    if s := r.severity_text:
        add('"severityText":' + _quote(s))
    if r.HasField("body"):
        add('"body":' + any_text(r.body))
    if a := r.attributes:
        add('"attributes":' + attributes_text(a))
    if n := r.dropped_attributes_count:
        add(f'"droppedAttributesCount":{n}')
    if n := r.flags:
        add(f'"flags":{n}')
    if b := r.trace_id:
        add('"traceId":"' + b.hex() + '"')
    if b := r.span_id:
        add('"spanId":"' + b.hex() + '"')
    if t := r.observed_time_unix_nano:
        add(f'"observedTimeUnixNano":"{t}"')
    if s := r.event_name:
        add('"eventName":' + _quote(s))
    return "{" + ",".join(parts) + "}"


_ID_KEYS = ("traceId", "spanId", "trace_id", "span_id")


def _each_record(request: Any) -> Any:
    for resource_logs in request.get("resourceLogs", request.get("resource_logs", ())) or ():
        for scope_logs in resource_logs.get("scopeLogs", resource_logs.get("scope_logs", ())) or ():
            yield from scope_logs.get("logRecords", scope_logs.get("log_records", ())) or ()


def from_hex_ids(request: Any) -> None:
    """OTLP/JSON writes trace and span ids as hex; protobuf's JSON mapping reads bytes as base64: convert in
    place. ValueError for an id that is not hex."""
    for record in _each_record(request):
        if not isinstance(record, dict):
            raise ValueError("a log record is not an object")
        for key in _ID_KEYS:
            value = record.get(key)
            if isinstance(value, str):
                record[key] = base64.b64encode(bytes.fromhex(value)).decode("ascii")
