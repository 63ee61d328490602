"""Request parsing that never raises: garbage becomes a counted dead letter (or INVALID_ARGUMENT), never a dead
stream. A batch whose events do not all parse is salvaged event by event from the wire format."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from google.protobuf.message import DecodeError, Message

from adapters.grpc.codec import EventBatch, QueryEvent
from sidecar.protowire import read_varint

M = TypeVar("M", bound=Message)


@dataclass
class Incoming:
    """A request as received: the parsed batch (None when unparseable) and its size in bytes."""

    batch: EventBatch | None
    size: int
    data: bytes | None = None  # kept only when unparseable, for the dead-letter file
    #: wire bytes of events that could not be parsed while the rest of their batch could (salvaged)
    bad_events: tuple[bytes, ...] = ()


class Unparseable:
    """What a request deserializer returns for bytes that are no message (gRPC treats None as its own failure)."""


UNPARSEABLE = Unparseable()


def parse_or_mark(cls: type[M]) -> Callable[[bytes], M | Unparseable]:
    """A request deserializer that never raises: garbage becomes UNPARSEABLE (the handler says INVALID_ARGUMENT)."""

    def parse(data: bytes) -> M | Unparseable:
        try:
            return cls.FromString(data)
        except (DecodeError, ValueError):  # ValueError: invalid UTF-8 in a string field
            return UNPARSEABLE

    return parse


def parse_batch(data: bytes) -> Incoming:
    """Request deserializer that never raises: garbage becomes a dead letter, not a dead stream.

    When the batch does not parse as a whole (one event with invalid UTF-8 in a string field, say), its
    events are parsed one by one: the good ones go on, each bad one is dead-lettered with its bytes.
    """
    try:
        return Incoming(EventBatch.FromString(data), len(data))
    except (DecodeError, ValueError):  # ValueError: invalid UTF-8 in a string field
        salvaged = _salvage(data)
        if salvaged is None:
            return Incoming(None, len(data), data)
        batch, bad = salvaged
        return Incoming(batch, len(data), None, tuple(bad))


def _salvage(data: bytes) -> tuple[EventBatch, list[bytes]] | None:
    """The EventBatch's events parsed one by one from the wire (field 1), with the ones that fail apart;
    None when the batch's own framing is broken (then the whole message is garbage)."""
    batch = EventBatch()
    bad: list[bytes] = []
    pos = 0
    try:
        while pos < len(data):
            key, pos = read_varint(data, pos)
            number, wire = key >> 3, key & 7
            if number == 0:  # no protobuf field has number 0: the message is garbage
                return None
            if wire == 3:  # an unknown group: skipped, as protobuf does
                pos = _skip_group(data, pos, number)
            elif wire == 2:
                size, pos = read_varint(data, pos)
                if pos + size > len(data):
                    return None
                chunk = data[pos : pos + size]
                pos += size
                if number == 1:
                    try:
                        batch.events.append(QueryEvent.FromString(chunk))
                    except (DecodeError, ValueError):
                        bad.append(chunk)
                elif number == 2:
                    batch.batch_id = chunk.decode("utf-8", "replace")
            elif wire == 0:
                _, pos = read_varint(data, pos)
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                return None
    except ValueError:
        return None
    return (batch, bad) if pos == len(data) else None


def _skip_group(data: bytes, pos: int, number: int, depth: int = 0) -> int:
    """The position after the end of the group ``number`` whose start tag ended at ``pos`` (nested groups
    skipped too); ValueError when it never ends or is malformed."""
    if depth > 64:
        raise ValueError("groups nested too deep")
    while pos < len(data):
        key, pos = read_varint(data, pos)
        inner, wire = key >> 3, key & 7
        if inner == 0:
            raise ValueError("field number 0")
        if wire == 4:
            if inner != number:
                raise ValueError("unmatched end group")
            return pos
        if wire == 3:
            pos = _skip_group(data, pos, inner, depth + 1)
        elif wire == 2:
            size, pos = read_varint(data, pos)
            pos += size
        elif wire == 0:
            _, pos = read_varint(data, pos)
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError("bad wire type")
        if pos > len(data):
            raise ValueError("truncated")
    raise ValueError("group without end")
