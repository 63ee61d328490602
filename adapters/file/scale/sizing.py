"""Whether ``replay --workers N`` is worth its partitions for an input of this size (issue 28 item 8).

A partition costs a process, a chain and its knowledge base, a split and a merge: about a few seconds whatever
its size. And every partition runs its own buffers: ``category_buffer`` releases a category only when it holds k
events of enough different users *of that partition*, so at the end of an archive each partition still holds
about what one process would hold for the whole input (held events grow about in proportion to the partitions;
docs/SCALE.md has the measured figures). Below :data:`SMALL_PARTITION_BYTES` of input per partition the run is
slower than one process and holds more: :func:`small_partitions` says so.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

#: Input bytes per partition below which ``--workers`` is warned about (about 400,000 AOL lines of ~80 bytes).
SMALL_PARTITION_BYTES = 32 << 20
#: A ``.gz`` file counts as this many times its size (query logs compress about 4 to 6 times).
GZIP_RATIO = 4


@dataclass(frozen=True)
class SmallPartitions:
    """The input's (estimated) bytes, the partitions asked for, and the most partitions it fills (at least 1)."""

    input_bytes: int
    partitions: int
    suggested: int


def input_bytes(files: list[str]) -> int:
    """The input's bytes, a ``.gz`` file counted at :data:`GZIP_RATIO` times its size."""
    return sum(os.path.getsize(f) * (GZIP_RATIO if f.endswith(".gz") else 1) for f in files)


def small_partitions(files: list[str], partitions: int) -> SmallPartitions | None:
    """A :class:`SmallPartitions` when ``partitions > 1`` would each get less than :data:`SMALL_PARTITION_BYTES`."""
    if partitions <= 1:
        return None
    size = input_bytes(files)
    if size >= partitions * SMALL_PARTITION_BYTES:
        return None
    return SmallPartitions(size, partitions, max(1, size // SMALL_PARTITION_BYTES))
