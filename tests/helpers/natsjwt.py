"""NATS decentralised auth for tests: operator, account and user NKeys and JWTs made and signed here (Ed25519 of
``cryptography``), a ``nats-server`` config in operator mode (memory resolver, JetStream enabled for the
account) and ``.creds`` files in the ``nsc`` layout.

Encodings as in github.com/nats-io/nkeys and nats-io/jwt v2: a public key is base32 (no padding) of its type's
prefix byte, the 32-byte key and a CRC-16/XMODEM (little-endian); a seed has the seed prefix bytes first; a JWT
is ``{"typ": "JWT", "alg": "ed25519-nkey"}``, the claims and an Ed25519 signature, base64url without padding.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

PREFIX = {"operator": 14 << 3, "account": 0, "user": 20 << 3}
SEED = 18 << 3


def _b32(raw: bytes) -> str:
    return base64.b32encode(raw + binascii.crc_hqx(raw, 0).to_bytes(2, "little")).decode().rstrip("=")


def _b64url(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@dataclass
class NKey:
    """An Ed25519 key pair of one NATS type (operator, account, user)."""

    kind: str
    key: Ed25519PrivateKey = field(default_factory=Ed25519PrivateKey.generate)

    @property
    def public(self) -> str:
        raw = self.key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return _b32(bytes([PREFIX[self.kind]]) + raw)

    @property
    def seed(self) -> str:
        raw = self.key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
        kind = PREFIX[self.kind]
        return _b32(bytes([SEED | kind >> 5, (kind & 31) << 3]) + raw)


def jwt(issuer: NKey, subject: NKey, nats: dict[str, Any], name: str) -> str:
    """A JWT of ``subject`` signed by ``issuer`` (jti: the claims' SHA-256, as nats-io/jwt computes it)."""
    claims: dict[str, Any] = {"jti": "", "iat": int(time.time()), "iss": issuer.public, "name": name}
    claims.update({"sub": subject.public, "nats": {**nats, "version": 2}})
    claims["jti"] = base64.b32encode(hashlib.sha256(json.dumps(claims).encode()).digest()).decode().rstrip("=")
    head = _b64url(json.dumps({"typ": "JWT", "alg": "ed25519-nkey"}).encode())
    body = _b64url(json.dumps(claims).encode())
    signature = _b64url(issuer.key.sign(f"{head}.{body}".encode()))
    return f"{head}.{body}.{signature}"


UNLIMITED = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True, "conn": -1}
JETSTREAM = {"mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}


@dataclass
class Operator:
    """An operator, a system account and an application account with JetStream; users made on demand."""

    operator: NKey = field(default_factory=lambda: NKey("operator"))
    system: NKey = field(default_factory=lambda: NKey("account"))
    account: NKey = field(default_factory=lambda: NKey("account"))

    def server_config(self, path: Path) -> Path:
        """A nats-server config trusting this operator (memory resolver preloaded with both accounts)."""
        op = jwt(self.operator, self.operator, {"type": "operator", "system_account": self.system.public}, "op")
        limits = {**UNLIMITED, "leaf": -1}
        sys_jwt = jwt(self.operator, self.system, {"type": "account", "limits": limits}, "SYS")
        app_jwt = jwt(self.operator, self.account, {"type": "account", "limits": {**limits, **JETSTREAM}}, "APP")
        path.write_text(
            f"operator: {op}\nsystem_account: {self.system.public}\nresolver: MEMORY\n"
            f"resolver_preload: {{\n  {self.system.public}: {sys_jwt}\n  {self.account.public}: {app_jwt}\n}}\n",
            encoding="utf-8",
        )
        return path

    def creds(self, path: Path, signer: NKey | None = None) -> Path:
        """A ``.creds`` file of a new user of the application account (signed by ``signer``: the account)."""
        user = NKey("user")
        claims = {"type": "user", "pub": {}, "sub": {}, "subs": -1, "data": -1, "payload": -1}
        token = jwt(signer or self.account, user, claims, "querylog")
        path.write_text(
            "-----BEGIN NATS USER JWT-----\n"
            f"{token}\n"
            "------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n"
            "NKEY Seed printed below can be used to sign and prove identity.\n\n"
            "-----BEGIN USER NKEY SEED-----\n"
            f"{user.seed}\n"
            "------END USER NKEY SEED------\n",
            encoding="utf-8",
        )
        return path
