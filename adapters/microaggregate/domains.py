"""``d_u`` of paper 003 (§3.2.1) between clicked domains, a row (one domain against the clicked ones) at a time.

``d_u = 2^m / (2^(m+1) - 1) * sum_i [x_i != y_i] 2^-i`` over the labels right-most first (a label only one domain
has differs; levels both lack are equal). The sum of distinct powers of two is exact in float32 for up to 24
levels, whatever the order of its terms: the levels no row domain has are added as one per-column term, and the
result is the same to the bit as adding them level by level. Rows are cached, and computed only for the *live*
clicked domains (:meth:`DomainSpace.restrict`, as for the strings in :mod:`~adapters.microaggregate.wordsets`).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from adapters.microaggregate.rowcache import RowCache
from adapters.microaggregate.wordsets import run_all

F32 = npt.NDArray[np.float32]
Ints = npt.NDArray[np.intp]
Bools = npt.NDArray[np.bool_]

#: Levels up to which a sum of ``2^-i`` terms is exact in float32 (its 24-bit significand).
EXACT_LEVELS = 24


class DomainSpace:
    """The domains of one log (label tuples, right-most first); ``domains[:hosts]`` are the clicked ones (the
    columns), the others only generalised URLs of average records have (rows only)."""

    def __init__(
        self, domains: list[tuple[str, ...]], hosts: int, cache_bytes: int, block_cells: int, workers: int = 1
    ) -> None:
        """``workers``: threads for the column blocks of a batch of rows."""
        depth = max((len(d) for d in domains), default=0)
        label_ids: dict[str, int] = {}
        self.labels = np.full((len(domains), max(1, depth)), -1, dtype=np.int32)
        for i, d in enumerate(domains):
            self.labels[i, : len(d)] = [label_ids.setdefault(x, len(label_ids)) for x in d]
        self.dsize = np.array([len(d) for d in domains], dtype=np.intp)
        self.hosts = hosts
        self.block_cells = block_cells
        self.workers = workers
        self.rows = RowCache(hosts + 1, cache_bytes, self._rows)
        self.live: Ints = np.arange(hosts, dtype=np.intp)
        self.live_mask: Bools | None = None  # None: every clicked domain

    def restrict(self, mask: Bools) -> None:
        """From now on only the clicked domains of ``mask`` (and "no URL") are read from the rows; cached rows
        of a superset stay, for another set they are dropped."""
        if self.live_mask is not None and np.array_equal(mask, self.live_mask):
            return
        if self.live_mask is not None and bool(np.any(mask & ~self.live_mask)):
            self.rows.clear()
        self.live_mask = mask.copy()
        self.live = np.flatnonzero(mask)

    def _rows(self, doms: Ints) -> F32:
        """``d_u`` of each of ``doms`` (-1: no URL) to the live clicked domains (1 elsewhere), plus a last column
        for "no URL"; one level at a time over ``len(doms) x`` a block of domains (blocks on :attr:`workers`
        threads, each into its own columns)."""
        n = self.hosts
        out = np.ones((len(doms), n + 1), dtype=np.float32)
        out[doms < 0, n] = 0.0
        have = np.nonzero(doms >= 0)[0]
        if not len(have) or not len(self.live):
            return out
        la, sa = self.labels[doms[have]], self.dsize[doms[have]]
        depth = self.labels.shape[1]
        deep = depth if depth > EXACT_LEVELS else int(sa.max())  # beyond: no row domain has a label there
        scale = (2.0 ** np.arange(depth + 1) / (2.0 ** np.arange(1, depth + 2) - 1.0)).astype(np.float32)  # by m
        step = max(1, self.block_cells // len(have))

        def run(lo: int) -> None:
            cols = self.live[lo : lo + step]
            lb, sb = self.labels[cols], self.dsize[cols]
            total = np.zeros((len(have), len(cols)), dtype=np.float32)
            for i in range(deep):
                total += np.not_equal(la[:, i, None], lb[None, :, i]) * np.float32(2.0**-i)
            if deep < depth:
                tail = np.zeros(len(cols), dtype=np.float32)
                for i in range(deep, depth):
                    tail += (sb > i) * np.float32(2.0**-i)
                total += tail[None, :]
            total *= scale[np.maximum(sa[:, None], sb[None, :]) - 1]
            out[have[:, None], cols[None, :]] = total

        run_all(run, range(0, len(self.live), step), self.workers)
        return out
