"""MDAV (Maximum Distance to Average Vector), paper 003 Algorithm 1, over any record distance.

The algorithm only needs two operations on the remaining records: the distances of all of them to their own
average record, and the distances of all of them to one of them. Both come from a :class:`Space`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

import numpy as np
import numpy.typing as npt

Indices = npt.NDArray[np.intp]
Floats = npt.NDArray[np.float64]


class Space(Protocol):
    """Distances between the records ``0..n-1``."""

    def to_average(self, members: Indices) -> Floats:
        """The distance of each of ``members`` to the average record of ``members``."""
        ...

    def to_record(self, record: int, members: Indices) -> Floats:
        """The distance of each of ``members`` to record ``record``."""
        ...


def _cluster_around(space: Space, center: int, rest: Indices, k: int) -> tuple[Indices, Floats]:
    """``center`` with its k-1 closest records of ``rest`` (center included), and the distances of ``rest`` to it."""
    dist = space.to_record(center, rest)
    dist[rest == center] = -1.0  # the center first, whatever its distance to itself
    order = np.argsort(dist, kind="stable")
    return rest[order[:k]], dist


def mdav(space: Space, n: int, k: int, progress: Callable[[int], None] | None = None) -> list[Indices]:
    """Partition records ``0..n-1`` into clusters of k..2k-1 records (Algorithm 1). Needs ``n >= k >= 1``.
    ``progress`` is called with the number of records placed after each cluster."""
    if k < 1 or n < k:
        raise ValueError("MDAV needs at least k records and k >= 1")
    rest: Indices = np.arange(n, dtype=np.intp)
    clusters: list[Indices] = []

    def take(cluster: Indices) -> None:
        nonlocal rest
        clusters.append(cluster)
        rest = rest[~np.isin(rest, cluster)]
        if progress is not None:
            progress(n - len(rest))

    while len(rest) >= 3 * k:
        r = int(rest[int(np.argmax(space.to_average(rest)))])
        cluster, dist_r = _cluster_around(space, r, rest, k)
        remaining = ~np.isin(rest, cluster)
        s = int(rest[remaining][int(np.argmax(dist_r[remaining]))])
        take(cluster)
        take(_cluster_around(space, s, rest, k)[0])
    if len(rest) >= 2 * k:
        r = int(rest[int(np.argmax(space.to_average(rest)))])
        take(_cluster_around(space, r, rest, k)[0])
    if len(rest):
        take(rest)
    return clusters
