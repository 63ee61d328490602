"""A NATS ``.creds`` file (decentralised auth): the user JWT sent at connect and the user's NKey seed signing the
server's nonce, with the Ed25519 of ``cryptography`` (a base dependency).

nats-py signs with the ``nkeys`` package, which is not installed with the sidecar; this module gives nats-py
the two callbacks it accepts instead (``user_jwt_cb``, ``signature_cb``). The file is read again at each
connection (a rotated file is picked up on the next reconnect) and checked when the config is built, so a
broken file is an error at ``creds_file``; no part of it is ever logged.

An NKey seed is base32 (RFC 4648, no padding) of two prefix bytes (the seed marker and the key type: ``SU`` is a
user's), the 32-byte Ed25519 seed, and a CRC-16/XMODEM of those, little-endian (github.com/nats-io/nkeys).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

#: The first five bits of a seed's first byte (``S``) and a user key's type (``U``): prefix bytes of nkeys.
PREFIX_SEED = 18 << 3
PREFIX_USER = 20 << 3
JWT_BEGIN, SEED_BEGIN = "BEGIN NATS USER JWT", "BEGIN USER NKEY SEED"


class CredsError(ValueError):
    """The file is no usable ``.creds`` file (the message names what is wrong, never a part of the file)."""


def _block(text: str, marker: str) -> str:
    """The first non-empty line after the line holding ``marker`` (the ``nsc`` layout)."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if marker in line:
            for value in lines[i + 1 :]:
                if value.strip():
                    return value.strip()
    raise CredsError(f"no '{marker}' block")


def user_seed(seed: str) -> bytes:
    """The 32-byte Ed25519 seed of an NKey user seed (``SU...``); CredsError when it is not one."""
    try:
        raw = base64.b32decode(seed + "=" * (-len(seed) % 8))
    except (binascii.Error, ValueError):
        raise CredsError("the NKey seed is not base32") from None
    if len(raw) != 36:
        raise CredsError("the NKey seed has the wrong length")
    body, crc = raw[:-2], int.from_bytes(raw[-2:], "little")
    if binascii.crc_hqx(body, 0) != crc:
        raise CredsError("the NKey seed's checksum does not match")
    if body[0] & 0xF8 != PREFIX_SEED:
        raise CredsError("not an NKey seed")
    kind = ((body[0] & 0x07) << 5) | (body[1] >> 3)
    if kind != PREFIX_USER:
        raise CredsError("the NKey seed is not a user's (SU...)")
    return bytes(body[2:])


def read(path: Path) -> tuple[bytes, Ed25519PrivateKey]:
    """The user JWT and the user's signing key of a ``.creds`` file; CredsError (or OSError) when unusable."""
    text = path.read_text(encoding="ascii", errors="replace")
    jwt = _block(text, JWT_BEGIN)
    if jwt.count(".") != 2:
        raise CredsError("the user JWT is not a JWT")
    key = Ed25519PrivateKey.from_private_bytes(user_seed(_block(text, SEED_BEGIN)))
    return jwt.encode("ascii"), key


def callbacks(path: Path) -> tuple[Callable[[], bytes], Callable[[str], bytes]]:
    """nats-py's ``user_jwt_cb`` and ``signature_cb`` for ``path`` (read again at every connection)."""
    read(path)  # a broken file is reported now, at the config's key

    def user_jwt() -> bytes:
        return read(path)[0]

    def signature(nonce: str) -> bytes:
        return base64.b64encode(read(path)[1].sign(nonce.encode("utf-8")))

    return user_jwt, signature
