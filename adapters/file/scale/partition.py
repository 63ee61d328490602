"""Which partition (or serving replica) owns a user: a keyed 64-bit hash of the user role, cut into ranges.

``owner(user, n)`` is ``floor(h * n / 2**64)`` with ``h = BLAKE2b-64(str(user), key)``: partition ``i`` owns the
hashes in ``[i * 2**64 / n, (i + 1) * 2**64 / n)``. Every place that routes by user (the replay's split, the
``send --route-by-user`` client, a shipper or front in a deployment) uses this function with the same key, so a
user lives in exactly one partition. The key is ``QUERYLOG_PARTITION_KEY`` (at least 16 bytes) when that
variable is set, else the fixed, documented salt :data:`DEFAULT_KEY`: the hash is keyed so that an operator
can make the assignment unpredictable to users (no one can pick user ids that pile onto one partition); it
protects nothing else, and changing the key (or ``n``) moves users between partitions.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

DEFAULT_KEY = b"querylog-partition-v1"
"""The salt used when ``QUERYLOG_PARTITION_KEY`` is not set (documented, so any router can reproduce it)."""

KEY_ENV = "QUERYLOG_PARTITION_KEY"
"""Environment variable holding the partition key (at least 16 bytes)."""

_SPACE = 1 << 64


class PartitionKeyError(ValueError):
    """The partition key in the environment is unusable."""


def partition_key(environ: dict[str, str] | None = None) -> bytes:
    """The key from ``QUERYLOG_PARTITION_KEY``, else :data:`DEFAULT_KEY`. BLAKE2b takes up to 64 bytes."""
    env = os.environ if environ is None else environ
    value = env.get(KEY_ENV)
    if value is None:
        return DEFAULT_KEY
    key = value.encode("utf-8")
    if not 16 <= len(key) <= 64:
        raise PartitionKeyError(f"{KEY_ENV}: needs 16 to 64 bytes, got {len(key)}")
    return key


def user_hash(user: Any, key: bytes) -> int:
    """The keyed 64-bit hash of a user value (``None`` hashes as the empty string, others as ``str``)."""
    text = "" if user is None else user if isinstance(user, str) else str(user)
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8, key=key).digest()
    return int.from_bytes(digest, "big")


def owner(user: Any, n: int, key: bytes) -> int:
    """The partition (0..n-1) whose hash range holds ``user``."""
    return (user_hash(user, key) * n) >> 64


def hash_range(index: int, n: int) -> tuple[int, int]:
    """The half-open range of 64-bit hashes partition ``index`` of ``n`` owns."""
    lo = -(-index * _SPACE // n)  # ceil: the smallest h with h * n >> 64 == index
    hi = -(-(index + 1) * _SPACE // n)
    return lo, hi
