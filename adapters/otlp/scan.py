"""A ``LogRecord`` of the common shape read straight from its bytes, and its OTLP/JSON (the compiled fast path).

Reaching a field of a parsed message from Python costs a wrapper object per attribute: in ``bench otlp`` the
decoder and the OTLP/JSON writer spent most of a record's time in protobuf accessors. Most records have one shape:
timestamps, a severity, an empty or string body, string attributes, ids, each length in one byte. :func:`scan`
reads such a record in one pass over its bytes; anything else (another value kind, a longer length, an unknown
field, bytes that are no UTF-8, broken framing) gives None and the caller parses the record with protobuf, so what
is accepted and what it means never depend on the path. :func:`scanned_text` writes a scanned record's OTLP/JSON
exactly as :func:`adapters.otlp.values.record_text` writes the parsed one.

Interpreted, this loop is slower than protobuf's C parser plus its accessors; compiled with mypyc (it is listed in
pyproject.toml ``[tool.querylog] compiled``, which every build compiles: the wheel, the image, ``./run setup``) it
is about twice as fast as the parse and reads, and the OTLP/JSON four times (docs/OTLP.md, "Measured"). The codec
uses it only when compiled from this very source (:data:`COMPILED`, :mod:`sidecar.api.compiled`); the tests check it
interpreted against protobuf on every shape.
"""

from __future__ import annotations

from json.encoder import encode_basestring as _quote  # a JSON string, non-ASCII kept (the C encoder)
from typing import NamedTuple

from sidecar.api.compiled import compiled_and_current

__all__ = ["COMPILED", "EMPTY", "Scanned", "scan", "scanned_role", "scanned_text"]

#: the body of a record whose ``body`` is an ``AnyValue`` with no value (OTLP/JSON ``{}``)
EMPTY = ""

#: attribute keys by their bytes: (the key, its OTLP/JSON up to a string value's text); keys repeat
_KEYS: dict[bytes, tuple[str, str]] = {}
_KEYS_MAX = 4096


class Scanned(NamedTuple):
    """A log record's fields (proto3 defaults where absent). ``body``: None (no body), :data:`EMPTY` (a body of no
    value) or ``(text,)`` (a string value); ``attributes``: ``(key, value, the key's OTLP/JSON head)`` each, in
    order (all string values)."""

    time: int
    severity_number: int
    severity_text: str
    body: tuple[str] | str | None
    attributes: list[tuple[str, str, str]]
    dropped: int
    flags: int
    trace_id: bytes
    span_id: bytes
    observed: int
    event_name: str


def _key(raw: bytes) -> tuple[str, str]:
    """The key of ``raw`` and its OTLP/JSON head (UnicodeDecodeError for bytes that are no UTF-8)."""
    key = raw.decode("utf-8")
    if len(_KEYS) >= _KEYS_MAX:
        _KEYS.clear()
    got = _KEYS[raw] = (key, '{"key":' + _quote(key) + ',"value":{"stringValue":')
    return got


def scan(data: bytes) -> Scanned | None:  # one pass, no call per field: that is the point
    """The record in ``data`` when it has the common shape (see the module), else None."""
    time = observed = number = dropped = flags = 0
    text = event = ""
    trace = span = b""
    body: tuple[str] | str | None = None
    attrs: list[tuple[str, str, str]] = []
    keys = _KEYS
    pos, end = 0, len(data)
    try:
        while pos < end:
            tag = data[pos]
            if tag == 0x32:  # attributes: KeyValue{1: key, 2: AnyValue{1: string_value}}
                size = data[pos + 1]
                stop = pos + 2 + size
                if size >= 0x80 or data[pos + 2] != 0x0A:
                    return None
                length = data[pos + 3]
                q = pos + 4 + length
                if length >= 0x80 or data[q] != 0x12 or data[q + 2] != 0x0A or data[q + 3] >= 0x80:
                    return None
                if data[q + 1] != data[q + 3] + 2 or q + 4 + data[q + 3] != stop:
                    return None
                raw = data[pos + 4 : q]
                got = keys.get(raw)
                if got is None:
                    got = _key(raw)
                attrs.append((got[0], data[q + 4 : stop].decode("utf-8"), got[1]))
                pos = stop
            elif tag == 0x09 or tag == 0x59:  # time_unix_nano, observed_time_unix_nano (fixed64)
                pos += 9
                if pos > end:
                    return None
                if tag == 0x09:
                    time = int.from_bytes(data[pos - 8 : pos], "little")
                else:
                    observed = int.from_bytes(data[pos - 8 : pos], "little")
            elif tag == 0x10 or tag == 0x38:  # severity_number, dropped_attributes_count (one-byte varints)
                value = data[pos + 1]
                if value >= 0x80:
                    return None
                if tag == 0x10:
                    number = value
                else:
                    dropped = value
                pos += 2
            elif tag == 0x2A:  # body: AnyValue{} or AnyValue{1: string_value}
                size = data[pos + 1]
                stop = pos + 2 + size
                if size == 0:
                    body = body if body is not None else EMPTY  # an empty message merges into what was there
                elif size >= 0x80 or data[pos + 2] != 0x0A or data[pos + 3] != size - 2 or stop > end:
                    return None
                else:
                    body = (data[pos + 4 : stop].decode("utf-8"),)
                pos = stop
            elif tag == 0x1A or tag == 0x4A or tag == 0x52 or tag == 0x62:  # severity_text, ids, event_name
                size = data[pos + 1]
                stop = pos + 2 + size
                if size >= 0x80 or stop > end:
                    return None
                raw = data[pos + 2 : stop]
                if tag == 0x1A:
                    text = raw.decode("utf-8")
                elif tag == 0x4A:
                    trace = raw
                elif tag == 0x52:
                    span = raw
                else:
                    event = raw.decode("utf-8")
                pos = stop
            elif tag == 0x45:  # flags (fixed32)
                pos += 5
                if pos > end:
                    return None
                flags = int.from_bytes(data[pos - 4 : pos], "little")
            else:
                return None
    except (IndexError, UnicodeDecodeError):
        return None
    if pos != end:
        return None
    return Scanned(time, number, text, body, attrs, dropped, flags, trace, span, observed, event)


def scanned_role(r: Scanned, body: bool, name: str) -> object:
    """The value of the ``body`` role (``body``) or of timestamp ``name`` in a scanned record (None: absent)."""
    if body:
        return r.body[0] if isinstance(r.body, tuple) else None  # EMPTY: a body of no value
    return (r.time if name == "time_unix_nano" else r.observed) or None


def scanned_text(r: Scanned) -> str:
    """A scanned record in the OTLP/JSON mapping, as JSON text (as :func:`~adapters.otlp.values.record_text`)."""
    parts: list[str] = []
    if r.time:
        parts.append(f'"timeUnixNano":"{r.time}"')
    if r.severity_number:
        parts.append(f'"severityNumber":{r.severity_number}')
    if r.severity_text:
        parts.append('"severityText":' + _quote(r.severity_text))
    body = r.body
    if body is not None:
        parts.append('"body":{"stringValue":' + _quote(body[0]) + "}" if isinstance(body, tuple) else '"body":{}')
    if r.attributes:
        items = ",".join([head + _quote(value) + "}}" for _, value, head in r.attributes])
        parts.append('"attributes":[' + items + "]")
    if r.dropped:
        parts.append(f'"droppedAttributesCount":{r.dropped}')
    if r.flags:
        parts.append(f'"flags":{r.flags}')
    if r.trace_id:
        parts.append('"traceId":"' + r.trace_id.hex() + '"')
    if r.span_id:
        parts.append('"spanId":"' + r.span_id.hex() + '"')
    if r.observed:
        parts.append(f'"observedTimeUnixNano":"{r.observed}"')
    if r.event_name:
        parts.append('"eventName":' + _quote(r.event_name))
    return "{" + ",".join(parts) + "}"


#: True when this module runs compiled (mypyc) and current: only then is it faster than protobuf's parser
COMPILED = compiled_and_current(__file__)
