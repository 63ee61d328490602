"""The subject of a user's partition: ``<prefix>.<p>`` with ``p`` from the keyed user hash of ``replay --workers``.

:func:`adapters.file.scale.partition.owner` is the one function that routes by user (the replay's split,
``send --route-by-user``, and here the NATS publisher), with the same key (``QUERYLOG_PARTITION_KEY`` or the
documented default salt), so a user's events all land on one partition and its consumer holds the user's
state. :func:`publish_partitioned` is the publisher-side helper for producers that are no sidecar.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from adapters.file.scale.partition import PartitionKeyError, owner, partition_key

if TYPE_CHECKING:
    from nats.aio.client import Client

    from adapters.nats.jetstream import Publisher

__all__ = ["PartitionKeyError", "owner", "partition_key", "publish_partitioned", "subject_for"]


def subject_for(user: Any, prefix: str, n: int, key: bytes) -> str:
    """``<prefix>.<p>``, p the partition (0..n-1) of ``user``."""
    return f"{prefix}.{owner(user, n, key)}"


async def publish_partitioned(
    nc: Client,
    records: Iterable[tuple[Any, bytes]],
    prefix: str,
    n: int,
    key: bytes | None = None,
    *,
    chunk: int = 4000,
) -> int:
    """Publish ``(user, record line)`` pairs to their partitions' subjects with JetStream, ``chunk`` at a time,
    waiting for every acknowledgement; returns how many were stored. ``key``: the partition key (default: the
    environment's, as ``replay --workers``). A message JetStream did not store raises RuntimeError."""
    from adapters.nats.jetstream import Publisher

    key = partition_key() if key is None else key
    publisher = Publisher(nc)
    await publisher.start()
    stored = 0
    batch: list[tuple[str, str, bytes]] = []
    prefix_id = nc.new_inbox().rpartition(".")[2]
    for i, (user, data) in enumerate(records):
        batch.append((subject_for(user, prefix, n, key), f"{prefix_id}-{i}", data))
        if len(batch) >= chunk:
            stored += await _send(publisher, batch)
            batch = []
    if batch:
        stored += await _send(publisher, batch)
    await publisher.stop()
    return stored


async def _send(publisher: Publisher, batch: list[tuple[str, str, bytes]]) -> int:
    stored, duplicates, refused = await publisher.publish(batch, None, 60.0)
    if refused:
        raise RuntimeError(f"{refused} messages not stored (no stream for the subjects?)")
    return stored + duplicates
