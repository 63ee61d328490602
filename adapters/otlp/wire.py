"""OTLP logs on the wire: an ``ExportLogsServiceRequest`` split into its log records and framed back.

A request is ``{1: repeated ResourceLogs}``; ``ResourceLogs`` is ``{1: resource, 2: repeated ScopeLogs,
3: schema_url}`` and ``ScopeLogs`` is ``{1: scope, 2: repeated LogRecord, 3: schema_url}``. :func:`split_request`
walks the wire without parsing the messages and returns one :class:`Piece` per log record: the bytes of its
resource (every field of its ``ResourceLogs`` but the scope logs, in their order), of its scope (every field of
its ``ScopeLogs`` but the records) and of the record itself, each exactly as sent. :func:`frame` is the inverse:
consecutive pieces with the same resource and scope bytes go into one ``ResourceLogs``/``ScopeLogs``, so a
request split and framed again carries the same records, resources and scopes in the same order.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import NamedTuple

from sidecar.protowire import read_varint

__all__ = ["Piece", "TooMany", "frame", "message_fields", "split_request", "varint"]


class Piece(NamedTuple):
    """One log record as sent: its resource part, its scope part and its ``LogRecord`` bytes."""

    resource: bytes
    scope: bytes
    log: bytes


_new = tuple.__new__


class TooMany(ValueError):
    """The request holds more log records than allowed (counted before any is taken)."""


def _skip(data: bytes, pos: int) -> tuple[int, int, int]:
    """The field whose tag starts at ``pos``: ``(field number, wire type, end of the field)``; ValueError when its
    framing is broken."""
    tag, pos = read_varint(data, pos)
    number, wire_type = tag >> 3, tag & 7
    if number == 0:
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
    if pos > len(data):
        raise ValueError("truncated field")
    return number, wire_type, pos


def _fields(data: bytes) -> Iterable[tuple[int, int, int, int]]:
    """``(field number, wire type, start of the field's tag, end of the field)`` of each top-level field, with the
    payload of a length-delimited field at ``end - size``; ValueError when the framing is broken."""
    pos, end = 0, len(data)
    while pos < end:
        number, wire_type, stop = _skip(data, pos)
        yield number, wire_type, pos, stop
        pos = stop


def message_fields(data: bytes) -> Iterator[tuple[int, int | bytes]]:
    """``(field number, value)`` of each top-level field of a message: an int for a varint or fixed-width field
    (unsigned, as on the wire), the payload bytes of a length-delimited one; ValueError when the framing is
    broken."""
    for number, wire_type, start, stop in _fields(data):
        if wire_type == 2:
            yield number, _payload(data, start, stop)
        elif wire_type == 0:
            _, pos = read_varint(data, start)
            yield number, read_varint(data, pos)[0]
        else:
            yield number, int.from_bytes(data[stop - (8 if wire_type == 1 else 4) : stop], "little")


def _payload(data: bytes, start: int, stop: int) -> bytes:
    """The payload of the length-delimited field whose tag starts at ``start`` and which ends at ``stop``."""
    _, pos = read_varint(data, start)
    _, pos = read_varint(data, pos)
    return data[pos:stop]


def _split(data: bytes) -> tuple[bytes, list[bytes]]:
    """A ``ResourceLogs`` or ``ScopeLogs`` message cut into its own fields (every field but field 2, in their
    order, as bytes) and the payloads of its field 2 (scope logs, or log records), in order. ValueError when the
    framing is broken. The common case (one-byte tag 0x12, a length under 128) takes no call."""
    head: list[bytes] = []
    items: list[bytes] = []
    append = items.append
    pos, end = 0, len(data)
    while pos < end:
        if data[pos] == 0x12:  # field 2, length-delimited
            size = data[pos + 1] if pos + 1 < end else 0x80
            if size < 0x80:
                start = pos + 2
            else:
                size, start = read_varint(data, pos + 1)
            stop = start + size
            if stop > end:
                raise ValueError("truncated field")
            append(data[start:stop])
            pos = stop
            continue
        start = pos
        number, _, pos = _skip(data, pos)
        if number == 2:
            raise ValueError("field 2 is not length-delimited")
        head.append(data[start:pos])
    return b"".join(head), items


def split_request(data: bytes, max_records: int) -> list[Piece]:
    """The log records of an ``ExportLogsServiceRequest``, in order (see the module); ValueError when the framing
    is broken (no record can be trusted then), :class:`TooMany` past ``max_records``."""
    out: list[Piece] = []
    for number, wire_type, start, stop in _fields(data):
        if number != 1:
            continue  # a field a later OTLP version may add: not a record
        if wire_type != 2:
            raise ValueError("resource_logs is not a message")
        resource, scopes = _split(_payload(data, start, stop))
        for scope_logs in scopes:
            scope, logs = _split(scope_logs)
            if len(out) + len(logs) > max_records:
                raise TooMany(f"more than {max_records} log records")
            out.extend([_new(Piece, (resource, scope, log)) for log in logs])  # no Python-level __new__
    return out


def varint(n: int) -> bytes:
    """``n`` as a protobuf varint."""
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _field(tag: bytes, payload: bytes) -> bytes:
    return tag + varint(len(payload)) + payload


_RESOURCE_LOGS = b"\x0a"  # field 1, length-delimited
_SCOPE_LOGS = b"\x12"  # field 2, length-delimited
_LOG_RECORDS = b"\x12"  # field 2, length-delimited


def frame(pieces: Iterable[Piece]) -> bytes:
    """An ``ExportLogsServiceRequest`` of ``pieces`` (the inverse of :func:`split_request`)."""
    out: list[bytes] = []
    resource: bytes | None = None
    scope: bytes | None = None
    scopes: list[bytes] = []  # the framed ScopeLogs of the current resource
    logs: list[bytes] = []  # the framed records of the current scope

    def close_scope() -> None:
        if scope is not None:
            scopes.append(_field(_SCOPE_LOGS, scope + b"".join(logs)))
            logs.clear()

    def close_resource() -> None:
        if resource is not None:
            out.append(_field(_RESOURCE_LOGS, resource + b"".join(scopes)))
            scopes.clear()

    for piece in pieces:
        if piece.resource != resource:
            close_scope()
            close_resource()
            resource, scope = piece.resource, piece.scope
        elif piece.scope != scope:
            close_scope()
            scope = piece.scope
        logs.append(_field(_LOG_RECORDS, piece.log))
    close_scope()
    close_resource()
    return b"".join(out)
