"""Fluentd Forward Protocol v1 on the wire, without I/O (the source and the sink drive it).

* **Framing** and msgpack as the protocol uses it are in :mod:`adapters.forward.wire` (:class:`FrameDecoder`,
  :class:`EventTime`, :func:`packer`...); the **handshake** (HELO/PING/PONG) and the UDP **heartbeat** in
  :mod:`adapters.forward.handshake`. Both are re-exported here: import the protocol from this module.
* **Modes** (told apart by the type of the second element), parsed by :func:`parse_message` into a
  :class:`Message` of :class:`Entry` objects:

  - Message: ``[tag, time, record]`` or ``[tag, time, record, option]``
  - Forward: ``[tag, [[time, record], ...], option?]``
  - PackedForward: ``[tag, <msgpack stream of [time, record]> as bin or str, option?]``
  - CompressedPackedForward: the same stream gzip-compressed, with ``{"compressed": "gzip"}``
    (several gzip members back to back are accepted, as Fluentd appends them).

* **Values are kept as they came**: str stays str and bin stays bytes (strings are decoded with
  ``surrogateescape``, so even invalid UTF-8 is re-emitted byte for byte by :func:`packer`), an
  integer time stays an integer, and an EventTime (ext type 0, fixext8 ``d7 00`` or ext8
  ``c7 08 00``) becomes :class:`EventTime`, which packs back to the same 8 bytes (as fixext8).
* **Options**: ``size`` (checked against the entries; a mismatch is counted, the entries are kept),
  ``chunk`` (echoed by :func:`make_ack` as ``{"ack": chunk}``), ``compressed``.

A bad entry inside a good message (not ``[time, record]``, a time that is neither an integer, a float
nor an EventTime, a record that is not a map, packed bytes cut short) does not take the message's
other entries with it: it is listed in :attr:`Message.bad` by reason. **One message's cost is bounded**:
after ``max_bad_entries`` bad entries the rest of the message is not read (:attr:`Message.cut` says how
many bad entries and how much was left, once: one dead letter, not one per entry), and a compressed
stream expands to ``max_decompressed_bytes`` at most. Reasons are slugs; no error here ever carries a
tag, a record value or a key.
"""

from __future__ import annotations

import base64
import gzip
import os
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from adapters.forward.handshake import (
    HEARTBEAT,
    Helo,
    Ping,
    check_ping,
    check_pong,
    heartbeat_reply,
    make_helo,
    make_ping,
    make_pong,
    parse_helo,
    parse_ping,
    password_digest,
    shared_key_digest,
)
from adapters.forward.wire import (
    EVENT_TIME_EXT,
    EventTime,
    FrameBudget,
    FrameDecoder,
    Framing,
    ProtocolError,
    packb,
    packer,
    unpackb,
    unpacker,
)

__all__ = [
    "EVENT_TIME_EXT",
    "HEARTBEAT",
    "MAX_BAD_ENTRIES",
    "MAX_DECOMPRESSED_BYTES",
    "MODES",
    "TOO_MANY_BAD_ENTRIES",
    "Entry",
    "EventTime",
    "FrameBudget",
    "FrameDecoder",
    "Framing",
    "Helo",
    "Message",
    "Ping",
    "ProtocolError",
    "RawEntry",
    "ack_of",
    "check_ping",
    "check_pong",
    "gunzip",
    "heartbeat_reply",
    "make_ack",
    "make_helo",
    "make_ping",
    "make_pong",
    "message_chunks",
    "new_chunk_id",
    "pack_entries",
    "packb",
    "packed_forward",
    "packer",
    "parse_helo",
    "parse_message",
    "parse_ping",
    "parse_weight",
    "password_digest",
    "shared_key_digest",
    "unpackb",
    "unpacker",
]

MODES = ("message", "forward", "packed_forward", "compressed_packed_forward")
#: Defaults of :func:`parse_message`'s bounds (the source's options of the same names).
MAX_DECOMPRESSED_BYTES = 16 * 1024 * 1024
MAX_BAD_ENTRIES = 100
#: The reason of the one dead letter of a message cut after ``max_bad_entries`` bad entries.
TOO_MANY_BAD_ENTRIES = "too_many_bad_entries"
_tuple_new = tuple.__new__  # a NamedTuple's own __new__ runs Python code per call: too slow per entry


class Entry(NamedTuple):
    """One forward event: its tag, its time as given (int, float or EventTime) and its record map."""

    tag: str
    time: Any
    record: Any


class RawEntry(Entry):
    """An entry read from a PackedForward stream, with ``packed``: the bytes of its ``[time, record]`` there
    (an unchanged event is sent on as these very bytes)."""

    packed: bytes


@dataclass
class Message:
    """One decoded forward message."""

    mode: str
    tag: str
    entries: list[Entry]
    chunk: str | None = None
    #: ``size`` from the options (None: not given).
    size: int | None = None
    #: Reasons of the entries that could not be taken (in order; dead-lettered by the source).
    bad: list[str] = field(default_factory=list)
    #: When the message had more than ``max_bad_entries`` bad entries: what was not read, as one line of counts
    #: (dead-lettered once as ``too_many_bad_entries``); its entries after that bad entry are not taken.
    cut: str | None = None


# ---- messages -----------------------------------------------------------------------------------


def _is_time(value: Any) -> bool:
    t = type(value)
    return t is EventTime or ((t is int or t is float) and value >= 0)


def _entry(tag: str, item: Any, bad: list[str], out: list[Entry]) -> None:
    if type(item) is not list or len(item) != 2:
        bad.append("bad_entry")
    elif not _is_time(item[0]):
        bad.append("bad_time")
    elif type(item[1]) is not dict:
        bad.append("record_not_map")
    else:
        out.append(Entry(tag, item[0], item[1]))


def gunzip(data: bytes, limit: int) -> bytes:
    """Decompress one or more gzip members; at most ``limit`` bytes out (else ``decompressed_too_large``)."""
    out = bytearray()
    rest = data
    while rest:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            out += d.decompress(rest, limit - len(out) + 1)
        except zlib.error:
            raise ProtocolError("bad_gzip") from None
        if len(out) > limit or d.unconsumed_tail:
            raise ProtocolError("decompressed_too_large")
        if not d.eof:
            raise ProtocolError("bad_gzip")
        rest = d.unused_data
    return bytes(out)


def _cut(bad: list[str], rest: int, total: int, unit: str) -> str:
    """The line of counts of a message cut after too many bad entries (its last reason is dropped from ``bad``)."""
    bad.pop()
    return f"{len(bad) + 1} bad entries, then {rest} of the message's {total} {unit} not read"


def _packed_entries(tag: str, blob: bytes, bad: list[str], out: list[Entry], max_bad: int) -> str | None:
    u = unpacker()
    u.feed(blob)
    tell = u.tell
    append = out.append
    new = _tuple_new
    start = 0
    try:
        for item in u:
            end = tell()
            if type(item) is list and len(item) == 2 and type(item[1]) is dict:
                t = item[0]
                tt = type(t)
                if tt is EventTime or ((tt is int or tt is float) and t >= 0):
                    e = new(RawEntry, (tag, t, item[1]))
                    e.packed = blob[start:end]
                    append(e)
                    start = end
                    continue
            _entry(tag, item, bad, out)
            start = end
            if len(bad) > max_bad:
                return _cut(bad, len(blob) - end, len(blob), "bytes")
    except Exception:
        bad.append("bad_packed_entries")  # the entries before the damage are kept
        return None
    if start != len(blob):
        bad.append("truncated_packed_entries")
    return None


def parse_message(
    obj: Any, max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES, max_bad_entries: int = MAX_BAD_ENTRIES
) -> Message:
    """The :class:`Message` a top-level object carries; :class:`ProtocolError` when it is none. Past
    ``max_bad_entries`` bad entries the rest is not read (:attr:`Message.cut`); a compressed stream expanding
    past ``max_decompressed_bytes`` is ``decompressed_too_large``."""
    if type(obj) is not list or not 2 <= len(obj) <= 4:
        raise ProtocolError("bad_message")
    tag = obj[0]
    if type(tag) is not str:
        raise ProtocolError("bad_tag")
    second = obj[1]
    bad: list[str] = []
    entries: list[Entry] = []
    cut: str | None = None
    if type(second) is list:  # Forward
        if len(obj) > 3:
            raise ProtocolError("bad_message")
        option = _option(obj[2] if len(obj) == 3 else None)
        if option.get("compressed") is not None:
            raise ProtocolError("bad_option")
        for i, item in enumerate(second):
            _entry(tag, item, bad, entries)
            if len(bad) > max_bad_entries:
                cut = _cut(bad, len(second) - i - 1, len(second), "entries")
                break
        mode = "forward"
    elif type(second) is bytes or type(second) is str:  # PackedForward, bin or (Fluentd's out_forward) str
        if len(obj) > 3:
            raise ProtocolError("bad_message")
        option = _option(obj[2] if len(obj) == 3 else None)
        blob = second if isinstance(second, bytes) else second.encode("utf-8", "surrogateescape")
        compressed = option.get("compressed")
        if compressed is None or compressed == "text":
            mode = "packed_forward"
        elif compressed == "gzip":
            blob = gunzip(blob, max_decompressed_bytes)
            mode = "compressed_packed_forward"
        else:
            raise ProtocolError("unsupported_compression")
        cut = _packed_entries(tag, blob, bad, entries, max_bad_entries)
    else:  # Message
        if len(obj) < 3:
            raise ProtocolError("bad_message")
        option = _option(obj[3] if len(obj) == 4 else None)
        _entry(tag, [second, obj[2]], bad, entries)
        mode = "message"
    size = option.get("size")
    return Message(mode, tag, entries, option.get("chunk"), size, bad, cut)


def parse_weight(obj: Any) -> int:
    """What :func:`parse_message` of ``obj`` may cost, in bytes of entries (a Forward message: 16 per entry; a
    compressed one: as much as ``max_decompressed_bytes``, unknown before it is read)."""
    if type(obj) is not list or len(obj) < 2:
        return 0
    second = obj[1]
    if type(second) is list:
        return 16 * len(second)
    if type(second) is bytes or type(second) is str:
        option = obj[2] if len(obj) == 3 else None
        if type(option) is dict and option.get("compressed") not in (None, "text"):
            return MAX_DECOMPRESSED_BYTES
        return len(second)
    return 0


def _option(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if type(value) is not dict:
        raise ProtocolError("bad_option")
    chunk = value.get("chunk")
    if chunk is not None and type(chunk) is not str:
        raise ProtocolError("bad_chunk")
    size = value.get("size")
    if size is not None and (type(size) is not int or size < 0):
        raise ProtocolError("bad_option")
    compressed = value.get("compressed")
    if compressed is not None and type(compressed) is not str:
        raise ProtocolError("bad_option")
    return value


def make_ack(chunk: str) -> bytes:
    """The server's answer to a message whose options carry ``chunk``."""
    return packb({"ack": chunk})


def ack_of(obj: Any) -> str | None:
    """The chunk id a server's ``{"ack": chunk}`` answers, or None when ``obj`` is no ack."""
    if type(obj) is dict:
        ack = obj.get("ack")
        if type(ack) is str:
            return ack
    return None


def new_chunk_id() -> str:
    """A fresh chunk id: base64 of 16 random bytes."""
    return base64.b64encode(os.urandom(16)).decode("ascii")


def pack_entries(entries: Iterable[tuple[Any, Any]]) -> bytes:
    """The msgpack stream of ``[time, record]`` pairs (the body of a PackedForward message)."""
    p = packer()
    return b"".join(p.pack([t, r]) for t, r in entries)


def packed_forward(tag: str, blob: bytes, size: int, chunk: str | None = None, compress: bool = False) -> bytes:
    """A PackedForward (or, with ``compress``, CompressedPackedForward) message of a packed entry stream."""
    option: dict[str, Any] = {"size": size}
    if chunk is not None:
        option["chunk"] = chunk
    if compress:
        blob = gzip.compress(blob, compresslevel=6, mtime=0)
        option["compressed"] = "gzip"
    return packb([tag, blob, option])


def message_chunks(payload: bytes) -> list[str]:
    """The chunk ids of the messages in ``payload`` (a stream of forward messages), in order."""
    u = unpacker()
    u.feed(payload)
    chunks = []
    for obj in u:
        if type(obj) is list and len(obj) >= 3 and type(obj[-1]) is dict:
            chunk = obj[-1].get("chunk")
            if type(chunk) is str:
                chunks.append(chunk)
    return chunks
