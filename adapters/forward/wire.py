"""Fluentd forward protocol: msgpack as the protocol uses it, and the framing of a byte stream (no I/O).

* **Values are kept as they came**: str stays str and bin stays bytes (strings are decoded with
  ``surrogateescape``, so even invalid UTF-8 is re-emitted byte for byte by :func:`packer`), and an
  EventTime (ext type 0, fixext8 ``d7 00`` or ext8 ``c7 08 00``) becomes :class:`EventTime`, which packs
  back to the same 8 bytes (as fixext8).
* **Framing.** :class:`FrameDecoder` is fed whatever a socket read returned and gives back every
  complete msgpack object; a frame split across reads is completed by later feeds. A frame (one
  top-level object) larger than ``max_frame_bytes`` — complete or still arriving — is a
  :class:`ProtocolError` ``oversized_frame``; bytes that are not msgpack are ``invalid_msgpack``.
  :class:`FrameBudget` bounds the partial frames of all connections together.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any

import msgpack

EVENT_TIME_EXT = 0
"""The msgpack extension type of EventTime."""


class ProtocolError(Exception):
    """A peer broke the protocol; ``reason`` is a slug (the connection is closed and counted by it)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
        #: Complete objects decoded before the error (FrameDecoder.feed): good messages a caller may still take.
        self.objects: list[Any] = []


class EventTime(msgpack.ExtType):  # type: ignore[misc]  # msgpack is untyped
    """Fluentd's EventTime: ext type 0, 4 bytes of seconds and 4 of nanoseconds (big-endian)."""

    __slots__ = ()

    def __new__(cls, seconds: int, nanoseconds: int = 0) -> EventTime:
        return msgpack.ExtType.__new__(cls, EVENT_TIME_EXT, struct.pack(">II", seconds, nanoseconds))  # type: ignore[no-any-return]

    @classmethod
    def from_bytes(cls, data: bytes) -> EventTime:
        """The EventTime of an ext body (8 bytes)."""
        return _tuple_new(cls, (EVENT_TIME_EXT, bytes(data)))

    @classmethod
    def from_ns(cls, ns: int) -> EventTime:
        return cls(ns // 1_000_000_000, ns % 1_000_000_000)

    @property
    def seconds(self) -> int:
        return int(struct.unpack(">I", self.data[:4])[0])

    @property
    def nanoseconds(self) -> int:
        return int(struct.unpack(">I", self.data[4:])[0])

    def __float__(self) -> float:
        return self.seconds + self.nanoseconds / 1e9

    def __repr__(self) -> str:
        return f"EventTime({self.seconds}, {self.nanoseconds})"


_tuple_new = tuple.__new__  # ExtType's own __new__ checks its arguments in Python: too slow per entry


def _ext_hook(code: int, data: bytes) -> Any:
    if code == EVENT_TIME_EXT and len(data) == 8:
        return _tuple_new(EventTime, (EVENT_TIME_EXT, data))
    return msgpack.ExtType(code, data)


def unpacker(max_buffer_size: int = 0) -> msgpack.Unpacker:
    """An Unpacker that keeps values as they came (str/bin, EventTime, other ext types, non-str map keys)."""
    return msgpack.Unpacker(
        raw=False,
        unicode_errors="surrogateescape",
        strict_map_key=False,
        ext_hook=_ext_hook,
        max_buffer_size=max_buffer_size,
    )


def unpackb(data: bytes) -> Any:
    """One msgpack object, decoded as :func:`unpacker` does."""
    return msgpack.unpackb(data, raw=False, unicode_errors="surrogateescape", strict_map_key=False, ext_hook=_ext_hook)


def packer() -> msgpack.Packer:
    """A Packer that writes back what :func:`unpacker` read (str as str, bytes as bin, surrogates as their bytes)."""
    return msgpack.Packer(use_bin_type=True, unicode_errors="surrogateescape", autoreset=True)


def packb(obj: Any) -> bytes:
    return bytes(packer().pack(obj))


# ---- framing ------------------------------------------------------------------------------------


class FrameDecoder:
    """Incremental msgpack framing of a byte stream with a bound on each top-level object."""

    def __init__(self, max_frame_bytes: int) -> None:
        if max_frame_bytes < 16:
            raise ValueError("max_frame_bytes must be >= 16")
        self.max_frame_bytes = max_frame_bytes
        self._unpacker = unpacker(max_buffer_size=2 * max_frame_bytes)
        self._fed = 0  # bytes fed so far
        self._boundary = 0  # stream offset where the frame in progress starts

    @property
    def buffered(self) -> int:
        """Bytes of the frame in progress (0 between frames)."""
        return self._fed - self._boundary

    def feed(self, data: bytes) -> list[Any]:
        """The complete top-level objects ``data`` finishes, in order; :class:`ProtocolError` on a bad stream
        (its ``objects`` are the complete objects before the damage)."""
        out: list[Any] = []
        try:
            self._feed(data, out)
        except ProtocolError as exc:
            exc.objects = out
            raise
        return out

    def _feed(self, data: bytes, out: list[Any]) -> None:
        view = memoryview(data)
        step = self.max_frame_bytes
        while view:
            piece, view = view[:step], view[step:]
            try:
                self._unpacker.feed(piece)
            except msgpack.BufferFull:
                raise ProtocolError("oversized_frame") from None
            self._fed += len(piece)
            try:
                for obj in self._unpacker:
                    end = self._unpacker.tell()
                    if end - self._boundary > self.max_frame_bytes:
                        raise ProtocolError("oversized_frame")
                    self._boundary = end
                    out.append(obj)
            except ProtocolError:
                raise
            except Exception:  # FormatError, StackError, unhashable map keys...: not a msgpack stream we take
                raise ProtocolError("invalid_msgpack") from None
            if self._fed - self._boundary > self.max_frame_bytes:
                raise ProtocolError("oversized_frame")


# ---- partial frames of all connections ----------------------------------------------------------


class Framing:
    """One connection's :class:`FrameDecoder` and its share of a :class:`FrameBudget`; ``close`` ends the
    connection (called when the budget evicts it; :attr:`evicted` says so afterwards)."""

    __slots__ = ("close", "decoder", "evicted", "last_read", "partial")

    def __init__(self, decoder: FrameDecoder, close: Callable[[], None]) -> None:
        self.decoder = decoder
        self.close = close
        self.partial = 0  # bytes of its frame in progress, as counted in the budget
        self.last_read = 0.0
        self.evicted = False


class FrameBudget:
    """A bound on the bytes of partial frames (frames still arriving) held across connections: past it, the
    connection whose partial frame has been idle longest is closed (the one that just read last)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self.total = 0
        self.evictions = 0
        self._parked: set[Framing] = set()  # connections with a partial frame

    def feed(self, framing: Framing, data: bytes, now: float) -> list[Any]:
        """``framing``'s decoder fed ``data`` (read at ``now``): what it completes; its partial frame is counted
        and connections are evicted while the total is over the bound (``framing`` too, when it is the last)."""
        try:
            return framing.decoder.feed(data)
        finally:
            self.forget(framing)
            framing.partial = framing.decoder.buffered
            framing.last_read = now
            if framing.partial:
                self._parked.add(framing)
                self.total += framing.partial
            while self.total > self.max_bytes and self._parked:
                victim = min(self._parked, key=lambda f: f.last_read)
                self.forget(victim)
                victim.evicted = True
                self.evictions += 1
                victim.close()

    def forget(self, framing: Framing) -> None:
        """``framing`` holds no partial frame any more (its connection ended, or it is recounted)."""
        if framing in self._parked:
            self._parked.discard(framing)
            self.total -= framing.partial
        framing.partial = 0
