"""Fluentd Forward Protocol v1 on the wire, without I/O (the source and the sink drive it).

* **Framing.** :class:`FrameDecoder` is fed whatever a socket read returned and gives back every
  complete msgpack object; a frame split across reads is completed by later feeds. A frame (one
  top-level object) larger than ``max_frame_bytes`` — complete or still arriving — is a
  :class:`ProtocolError` ``oversized_frame``; bytes that are not msgpack are ``invalid_msgpack``.
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
* **Handshake** (``shared_key``, optional users): :func:`make_helo`, :func:`parse_ping`,
  :func:`check_ping`, :func:`make_pong` for a server; :func:`parse_helo`, :func:`make_ping`,
  :func:`check_pong` for a client. Digests are SHA-512 hex as the specification defines them.
* **Heartbeat**: a UDP datagram ``00`` (or msgpack nil ``c0``) is answered ``00``.

A bad entry inside a good message (not ``[time, record]``, a time that is neither an integer, a float
nor an EventTime, a record that is not a map, packed bytes cut short) does not take the message's
other entries with it: it is listed in :attr:`Message.bad` by reason. Reasons are slugs; no error
here ever carries a tag, a record value or a key.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import hmac
import os
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import msgpack

EVENT_TIME_EXT = 0
"""The msgpack extension type of EventTime."""

MODES = ("message", "forward", "packed_forward", "compressed_packed_forward")
HEARTBEAT = b"\x00"


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


def _packed_entries(tag: str, blob: bytes, bad: list[str], out: list[Entry]) -> None:
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
    except Exception:
        bad.append("bad_packed_entries")  # the entries before the damage are kept
        return
    if start != len(blob):
        bad.append("truncated_packed_entries")


def parse_message(obj: Any, max_decompressed_bytes: int = 256 * 1024 * 1024) -> Message:
    """The :class:`Message` a top-level object carries; :class:`ProtocolError` when it is none."""
    if type(obj) is not list or not 2 <= len(obj) <= 4:
        raise ProtocolError("bad_message")
    tag = obj[0]
    if type(tag) is not str:
        raise ProtocolError("bad_tag")
    second = obj[1]
    bad: list[str] = []
    entries: list[Entry] = []
    if type(second) is list:  # Forward
        if len(obj) > 3:
            raise ProtocolError("bad_message")
        option = _option(obj[2] if len(obj) == 3 else None)
        if option.get("compressed") is not None:
            raise ProtocolError("bad_option")
        for item in second:
            _entry(tag, item, bad, entries)
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
        _packed_entries(tag, blob, bad, entries)
    else:  # Message
        if len(obj) < 3:
            raise ProtocolError("bad_message")
        option = _option(obj[3] if len(obj) == 4 else None)
        _entry(tag, [second, obj[2]], bad, entries)
        mode = "message"
    size = option.get("size")
    return Message(mode, tag, entries, option.get("chunk"), size, bad)


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


# ---- handshake ----------------------------------------------------------------------------------


def _b(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogateescape")


def shared_key_digest(salt: str | bytes, hostname: str, nonce: bytes, shared_key: bytes) -> str:
    """``sha512_hex(shared_key_salt + hostname + nonce + shared_key)``."""
    return hashlib.sha512(_b(salt) + _b(hostname) + nonce + shared_key).hexdigest()


def password_digest(auth_salt: bytes, username: str, password: bytes) -> str:
    """``sha512_hex(auth_salt + username + password)``."""
    return hashlib.sha512(auth_salt + _b(username) + password).hexdigest()


def make_helo(nonce: bytes, auth_salt: bytes | None, keepalive: bool) -> bytes:
    """``["HELO", {"nonce": nonce, "auth": salt or "", "keepalive": bool}]``."""
    return packb(["HELO", {"nonce": nonce, "auth": auth_salt if auth_salt else "", "keepalive": keepalive}])


@dataclass(frozen=True)
class Helo:
    nonce: bytes
    auth: bytes  # empty: no user authentication
    keepalive: bool


def parse_helo(obj: Any) -> Helo:
    """The HELO a server sent; :class:`ProtocolError` ``bad_helo`` otherwise."""
    if type(obj) is not list or len(obj) != 2 or obj[0] != "HELO" or type(obj[1]) is not dict:
        raise ProtocolError("bad_helo")
    opts = obj[1]
    nonce, auth = opts.get("nonce"), opts.get("auth", b"")
    if not isinstance(nonce, bytes | str) or not isinstance(auth, bytes | str):
        raise ProtocolError("bad_helo")
    return Helo(_b(nonce), _b(auth), bool(opts.get("keepalive", True)))


@dataclass(frozen=True)
class Ping:
    hostname: str
    salt: bytes
    digest: str
    username: str
    password_digest: str


def parse_ping(obj: Any) -> Ping:
    """The PING a client sent; :class:`ProtocolError` ``bad_ping`` otherwise."""
    if type(obj) is not list or len(obj) != 6 or obj[0] != "PING":
        raise ProtocolError("bad_ping")
    _, hostname, salt, digest, username, pw = obj
    if not all(type(v) is str for v in (hostname, digest, username, pw)) or not isinstance(salt, str | bytes):
        raise ProtocolError("bad_ping")
    return Ping(hostname, _b(salt), digest, username, pw)


def make_ping(
    hostname: str,
    salt: str,
    helo: Helo,
    shared_key: bytes,
    username: str = "",
    password: bytes = b"",
) -> bytes:
    """The client's PING for ``helo`` (user and password digest only when the server asked for them)."""
    digest = shared_key_digest(salt, hostname, helo.nonce, shared_key)
    if helo.auth:
        pw = password_digest(helo.auth, username, password)
    else:
        username, pw = "", ""
    return packb(["PING", hostname, salt, digest, username, pw])


def check_ping(
    ping: Ping,
    *,
    nonce: bytes,
    shared_key: bytes,
    self_hostname: str,
    auth_salt: bytes | None,
    users: Mapping[str, bytes],
) -> str | None:
    """None when the PING authenticates; else the reason (a slug, sent back in the PONG)."""
    if ping.hostname == self_hostname:
        return "same_hostname_as_server"
    expected = shared_key_digest(ping.salt, ping.hostname, nonce, shared_key)
    if not hmac.compare_digest(expected.encode(), ping.digest.encode("utf-8", "surrogateescape")):
        return "shared_key_mismatch"
    if auth_salt:
        password = users.get(ping.username)
        want = password_digest(auth_salt, ping.username, password if password is not None else b"")
        got = ping.password_digest.encode("utf-8", "surrogateescape")
        if not hmac.compare_digest(want.encode(), got) or password is None:
            return "username_password_mismatch"
    return None


def make_pong(ok: bool, reason: str, self_hostname: str, salt: bytes, nonce: bytes, shared_key: bytes) -> bytes:
    """``["PONG", ok, reason, self_hostname, sha512_hex(salt + self_hostname + nonce + key)]`` ("" when not ok)."""
    digest = shared_key_digest(salt, self_hostname, nonce, shared_key) if ok else ""
    return packb(["PONG", ok, reason, self_hostname, digest])


def check_pong(obj: Any, *, hostname: str, salt: str, nonce: bytes, shared_key: bytes) -> None:
    """Raise :class:`ProtocolError` unless ``obj`` is a PONG that accepts us and proves the server knows the key."""
    if type(obj) is not list or len(obj) != 5 or obj[0] != "PONG":
        raise ProtocolError("bad_pong")
    _, ok, _reason, server_hostname, digest = obj
    if ok is not True:
        raise ProtocolError("authentication_refused")
    if type(server_hostname) is not str or type(digest) is not str:
        raise ProtocolError("bad_pong")
    if server_hostname == hostname:
        raise ProtocolError("same_hostname_as_server")
    expected = shared_key_digest(salt, server_hostname, nonce, shared_key)
    if not hmac.compare_digest(expected.encode(), digest.encode("utf-8", "surrogateescape")):
        raise ProtocolError("server_shared_key_mismatch")


def heartbeat_reply(datagram: bytes) -> bytes | None:
    """The answer to a UDP heartbeat (``00``, or msgpack nil ``c0``); None for anything else."""
    return HEARTBEAT if datagram in (b"\x00", b"\xc0") else None
