"""The subject of a user's partition: ``<prefix>.<p>`` with ``p`` from the keyed user hash of ``replay --workers``.

:func:`adapters.file.scale.partition.owner` is the one function that routes by user (the replay's split,
``send --route-by-user``, and here the NATS publisher), with the same key (``QUERYLOG_PARTITION_KEY`` or the
documented default salt), so a user's events all land on one partition and its consumer holds the user's
state. :func:`publish_partitioned` is the publisher-side helper for producers that are no sidecar.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from adapters.file.scale.partition import owner, partition_key

if TYPE_CHECKING:
    from nats.js import JetStreamContext

__all__ = ["owner", "partition_key", "publish_partitioned", "subject_for"]


def subject_for(user: Any, prefix: str, n: int, key: bytes) -> str:
    """``<prefix>.<p>``, p the partition (0..n-1) of ``user``."""
    return f"{prefix}.{owner(user, n, key)}"


async def publish_partitioned(
    js: JetStreamContext, records: Iterable[tuple[Any, bytes]], prefix: str, n: int, key: bytes | None = None
) -> int:
    """Publish ``(user, record line)`` pairs to their partitions' subjects, waiting for every JetStream ack;
    returns how many were stored. ``key``: the partition key (default: the environment's, as the replay)."""
    key = partition_key() if key is None else key
    futures = [await js.publish_async(subject_for(user, prefix, n, key), data) for user, data in records]
    for future in futures:
        await future
    return len(futures)
