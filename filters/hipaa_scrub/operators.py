"""What a policy writes in place of a finding: the operators of ``policies``.

* ``remove``: nothing (the finding's residue, such as a state after a town, stays);
* ``replace``: the type token, ``[SSN]``;
* ``generalize``: what Safe Harbor allows (a date to its year, a ZIP to its first three digits or ``000``, an age
  to ``90+``, a town to its state, a URL to its host);
* ``mask``: every letter and digit but the last four becomes ``*`` (``***-**-6789``; a value of four or fewer
  characters is masked whole);
* ``hash``: ``<SSN#1f0c6a9e2b7d4c13>``, HMAC-SHA256 of the type and the value under the configured key (the
  same value gives the same token: a log keeps its links, and without the key nothing is reversed or checked);
* ``encrypt``: ``<SSN:keyid:…>``, AES-SIV (RFC 5297, ``cryptography``) of the value with the type as associated
  data: key holders can read the value back (``querylog scrub --decrypt``) for an abuse investigation. It is
  deterministic *on purpose*: the same identifier gives the same token, so an investigator follows one account
  across the log; the price is that equal values are visibly equal to everyone (as with ``hash``);
* ``keep``: the text stays (counted).

Both keyed operators derive their own keys from the one configured secret (HKDF-SHA256, distinct ``info``); the
key id written into encrypted tokens names which secret decrypts them.
"""

from __future__ import annotations

import base64
import hmac
import re
from dataclasses import dataclass

POLICIES: tuple[str, ...] = ("remove", "replace", "generalize", "mask", "hash", "encrypt", "keep")
KEYED: frozenset[str] = frozenset({"hash", "encrypt"})
MIN_SECRET_BYTES = 16
"""Shortest secret accepted: a shorter one can be guessed, and with it every hash checked."""
MASK_KEEP = 4
"""Characters a mask leaves visible at the end (as card receipts print them)."""
TOKEN = re.compile(r"<[a-z][a-z0-9_]*(?:#[0-9a-f]{16}|:[a-z0-9._-]{1,64}:[a-z0-9_-]+)>", re.IGNORECASE)
"""A hash or encryption token: never scanned again (scrubbing stays idempotent)."""
_INFO = b"querylog-sidecar hipaa_scrub "


def _hkdf(secret: bytes, info: bytes, length: int) -> bytes:
    """HKDF-SHA256 (RFC 5869) without salt: ``length`` bytes keyed to ``info``."""
    prk = hmac.digest(bytes(32), secret, "sha256")
    out, block = b"", b""
    counter = 1
    while len(out) < length:
        block = hmac.digest(prk, block + info + bytes([counter]), "sha256")
        out += block
        counter += 1
    return out[:length]


@dataclass(frozen=True)
class OperatorKeys:
    """The keys of ``hash`` and ``encrypt``, derived from one secret, and the secret's id."""

    key_id: str
    hash_key: bytes
    siv_key: bytes

    @classmethod
    def derive(cls, secret: bytes, key_id: str) -> OperatorKeys:
        """The two keys of one secret (at least ``MIN_SECRET_BYTES``: ValueError otherwise)."""
        if len(secret) < MIN_SECRET_BYTES:
            raise ValueError(f"the secret has fewer than {MIN_SECRET_BYTES} bytes")
        return cls(key_id, _hkdf(secret, _INFO + b"hash", 32), _hkdf(secret, _INFO + b"encrypt", 64))


def mask(value: str) -> str:
    """Every letter and digit but the last ``MASK_KEEP`` as ``*``; separators stay."""
    alnum = sum(map(str.isalnum, value))
    keep_from = alnum - MASK_KEEP if alnum > MASK_KEEP else alnum
    out: list[str] = []
    seen = 0
    for ch in value:
        if ch.isalnum():
            out.append("*" if seen < keep_from else ch)
            seen += 1
        else:
            out.append(ch)
    return "".join(out)


def hash_token(keys: OperatorKeys, kind: str, value: str) -> str:
    """``<TYPE#16 hex>``: a keyed hash of the type and the value."""
    digest = hmac.digest(keys.hash_key, kind.encode() + b"\0" + value.encode("utf-8", "surrogatepass"), "sha256")
    return f"<{kind.upper()}#{digest[:8].hex()}>"


def encrypt_token(keys: OperatorKeys, kind: str, value: str) -> str:
    """``<TYPE:keyid:ciphertext>``: the value under AES-SIV, base64url without padding."""
    from cryptography.hazmat.primitives.ciphers.aead import AESSIV

    sealed = AESSIV(keys.siv_key).encrypt(value.encode("utf-8", "surrogatepass"), [kind.encode()])
    return f"<{kind.upper()}:{keys.key_id}:{base64.urlsafe_b64encode(sealed).rstrip(b'=').decode()}>"


def decrypt_tokens(keys: OperatorKeys, text: str) -> tuple[str, int]:
    """``text`` with every encryption token of ``keys``'s id replaced by its value; (text, tokens opened).
    Tokens of another key id, or that fail authentication, stay as they are."""
    from cryptography.exceptions import InvalidTag
    from cryptography.hazmat.primitives.ciphers.aead import AESSIV

    siv = AESSIV(keys.siv_key)
    opened = 0

    def one(m: re.Match[str]) -> str:
        nonlocal opened
        parts = m.group()[1:-1].split(":")
        if len(parts) != 3 or parts[1] != keys.key_id:
            return m.group()
        data = parts[2]
        try:
            value = siv.decrypt(base64.urlsafe_b64decode(data + "=" * (-len(data) % 4)), [parts[0].lower().encode()])
        except (InvalidTag, ValueError):
            return m.group()
        opened += 1
        return value.decode("utf-8", "surrogatepass")

    return TOKEN.sub(one, text), opened


def protected(lower: str) -> list[tuple[int, int]]:
    """Spans of hash and encryption tokens in ``lower`` (no detector may rewrite inside one)."""
    return [m.span() for m in TOKEN.finditer(lower)] if "<" in lower else []
