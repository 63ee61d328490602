"""Rows of a distance matrix too big to hold, computed on demand and kept in a bounded LRU cache."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
Ints = npt.NDArray[np.intp]


class RowCache:
    """Rows ``f(i)`` (``i`` an int id) of ``width`` float32 each, computed in batches by ``compute`` and kept in a
    bounded LRU cache of about ``cache_bytes``. The owner clears it when rows it holds stop being valid."""

    def __init__(self, width: int, cache_bytes: int, compute: Callable[[Ints], F32]) -> None:
        self.width = width
        self.capacity = max(1, cache_bytes // (4 * max(1, width)))
        self.compute = compute
        self.cache: OrderedDict[int, F32] = OrderedDict()

    def rows(self, ids: Ints) -> F32:
        """A ``len(ids) x width`` float32 matrix (an id given twice gives its row twice)."""
        wanted = ids.tolist()
        missing = [i for i in dict.fromkeys(wanted) if i not in self.cache]
        if missing:
            for i, row in zip(missing, self.compute(np.array(missing, dtype=np.intp))):
                self.cache[i] = row.copy()
        out = np.empty((len(wanted), self.width), dtype=np.float32)
        for n, i in enumerate(wanted):
            out[n] = self.cache[i]
            self.cache.move_to_end(i)
        while len(self.cache) > self.capacity:
            self.cache.popitem(last=False)
        return out

    def clear(self) -> None:
        """Drop every cached row."""
        self.cache.clear()
