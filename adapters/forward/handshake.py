"""Fluentd forward protocol: the handshake and the heartbeat (no I/O).

* **Handshake** (``shared_key``, optional users): :func:`make_helo`, :func:`parse_ping`,
  :func:`check_ping`, :func:`make_pong` for a server; :func:`parse_helo`, :func:`make_ping`,
  :func:`check_pong` for a client. Digests are SHA-512 hex as the specification defines them.
* **Heartbeat**: a UDP datagram ``00`` (or msgpack nil ``c0``) is answered ``00``.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from adapters.forward.wire import ProtocolError, packb

HEARTBEAT = b"\x00"


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
