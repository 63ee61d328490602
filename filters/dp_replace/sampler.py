"""The class-based sampler: one replacement concept per input concept, never walking the domain.

Per input concept (cached): its classes (:mod:`.classes`) and their integer
weights per per-query epsilon (:mod:`.mechanism`). Per draw: one exact CSPRNG
integer, which gives both the class and the member (:meth:`.mechanism.Prepared.draw`),
one bisection of the running weights, and four bisections to find the member
the first time its class is drawn.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from filters.dp_replace.domains import Criterion, Domains
from filters.dp_replace.mechanism import Prepared, probabilities
from filters.dp_replace.rand import RandomPool


@dataclass(frozen=True)
class Draw:
    node: int
    single: bool  # the domain holds the input alone: the mechanism could only return it


class Sampler:
    """``draw(node, eps)``: a replacement for ``node`` from its domain under one criterion (CSPRNG pool)."""

    def __init__(self, domains: Domains, criterion: Criterion, pool: RandomPool, cache_size: int = 100_000) -> None:
        self.domains = domains
        self.criterion = criterion
        self.pool = pool
        self.cache_size = max(cache_size, 1)
        self._prepared: dict[int, Prepared | None] = {}

    def prepared(self, node: int) -> Prepared | None:
        """The input's classes and weights (built on first use, cached); None for a single-concept domain."""
        if node in self._prepared:
            return self._prepared[node]
        d = self.domains
        t = d.of(node)
        if t < 0:
            raise ValueError("concept outside every domain")
        p: Prepared | None = None
        if d.size(t) >= 2:
            topics = d.topic_index(t) if self.criterion == "sqc2" else None
            classes = d.classes(t, self.criterion, node)
            p = Prepared(classes, d.delta(t, self.criterion), topics, int(d.topic[node]))
        if len(self._prepared) >= self.cache_size:
            self._prepared.clear()
        self._prepared[node] = p
        return p

    def draw(self, node: int, eps: float) -> Draw:
        """One exact draw: the class by integer weights, then a member uniformly."""
        out = self.draw_node(node, eps)
        return Draw(node, True) if out < 0 else Draw(out, False)

    def draw_node(self, node: int, eps: float) -> int:
        """:meth:`draw` without the wrapper (the filter's hot path): the replacement, or -1 when the input's
        domain holds it alone (the mechanism could only return it)."""
        p = self._prepared.get(node)
        if p is None:
            p = self.prepared(node)
            if p is None:
                return -1
        return p.draw(self.pool.below, eps)

    def class_probabilities(self, node: int, eps: float) -> npt.NDArray[np.float64]:
        """Exact class probabilities of the implemented sampler for input ``node``."""
        p = self.prepared(node)
        return np.ones(1) if p is None else probabilities(p, eps)

    def output_probabilities(self, node: int, eps: float) -> dict[int, float]:
        """Exact probability of every output concept under the implemented sampler, through the very member
        lookup ``draw`` uses (expands every class: for tests on small taxonomies)."""
        p = self.prepared(node)
        if p is None:
            return {node: 1.0}
        probs = probabilities(p, eps)
        out: dict[int, float] = {}
        for k, n in enumerate(p.sizes):
            for j in range(n):
                o = p.member(k, j)
                if o in out:
                    raise AssertionError("a concept in two classes")
                out[o] = float(probs[k]) / n
        return out
