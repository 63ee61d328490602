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
    records_per_message: int = 1,
) -> int:
    """Publish ``(user, record line)`` pairs to their partitions' subjects with JetStream, ``chunk`` messages at
    a time, waiting for every acknowledgement; returns how many records were stored. ``records_per_message``:
    lines of one partition joined into one message (``\n``-separated, in order; a ``nats`` source reads each
    line as a record). ``key``: the partition key (default: the environment's, as ``replay --workers``).
    A message JetStream did not store raises RuntimeError."""
    from adapters.nats.jetstream import Publisher

    key = partition_key() if key is None else key
    publisher = Publisher(nc)
    await publisher.start()
    stored = 0
    open_lines: dict[str, list[bytes]] = {}  # subject -> lines of its message being filled
    batch: list[tuple[str, str, bytes]] = []
    counts: list[int] = []
    prefix_id = nc.new_inbox().rpartition(".")[2]

    def close(subject: str) -> None:
        lines = open_lines.pop(subject)
        batch.append((subject, f"{prefix_id}-{len(counts)}", b"\n".join(lines)))
        counts.append(len(lines))

    for user, data in records:
        subject = subject_for(user, prefix, n, key)
        lines = open_lines.setdefault(subject, [])
        lines.append(data)
        if len(lines) >= records_per_message:
            close(subject)
        if len(batch) >= chunk:
            stored += await _send(publisher, batch, counts[-len(batch) :])
            batch = []
    for subject in list(open_lines):
        close(subject)
    if batch:
        stored += await _send(publisher, batch, counts[-len(batch) :])
    await publisher.stop()
    return stored


async def _send(publisher: Publisher, batch: list[tuple[str, str, bytes]], records: list[int]) -> int:
    refused = (await publisher.publish(batch, None, 60.0))[2]  # stored or reported a duplicate: stored
    if refused:
        raise RuntimeError(f"{refused} messages not stored (no stream for the subjects?)")
    return sum(records)
