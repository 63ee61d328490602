"""The class sampler's structures: candidates grouped so that a query never walks its domain.

On a tree, paper 004's similarity (eq. 5) between the input concept ``c`` and a
candidate ``o`` depends only on three depths, all relative to the domain's root:
``d`` (of ``c``), ``h`` (of ``o``) and ``a`` (of their least common subsumer).
With ``S(x)`` the ancestors of ``x`` in the domain's taxonomy, itself included,
``|S(c)| = d+1``, ``|S(o)| = h+1``, ``|S(c) n S(o)| = a+1`` and
``|S(c) u S(o)| = d+h-a+1``, so::

    sim = 1 - log2(1 + (d + h - 2a) / (d + h - a + 1))

The candidates whose least common subsumer with ``c`` is its ancestor ``A_a``
are the **ring** ``subtree(A_a) - subtree(A_a+1)`` (``subtree(c)`` itself for
``a = d``); within a ring, those at depth ``h`` form one **class**: same
similarity, hence same probability. A query has at most (depth + 1) x (tree
height) classes (a few hundred in WordNet) whatever the domain's size.

:class:`MemberSet` holds, for one candidate set (a domain, or a domain's
concepts of one topic), the number of members at each depth below every node
that has members below it (rows of ``hist``, precomputed once), and the members
of each depth sorted by pre-order id. A ring's size at a depth is a difference
of two ``hist`` rows; its ``j``-th member is found with two binary searches
(node ids are pre-order positions, so a subtree is an id range).
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from knowledge.concepts import ConceptTree

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def similarity(d: int | IntArray, h: int | IntArray, a: int | IntArray) -> FloatArray:
    """Paper 004 eq. 5 on a tree: depths of the input, the candidate and their subsumer, relative to the root.

    Computed the same way everywhere (vectorised numpy), so the sensitivity and
    the sampler see the very same floating-point values.
    """
    d_ = np.asarray(d, dtype=np.float64)
    h_ = np.asarray(h, dtype=np.float64)
    a_ = np.asarray(a, dtype=np.float64)
    out: FloatArray = 1.0 - np.log2(1.0 + (d_ + h_ - 2.0 * a_) / (d_ + h_ - a_ + 1.0))
    return out


class MemberSet:
    """One candidate set over a tree: counts per (node, depth) and members per depth. Built once, read only."""

    def __init__(self, tree: ConceptTree, mask: npt.NDArray[np.bool_]) -> None:
        parent, depth = tree.parent, tree.depth
        self.tree = tree
        self.height = int(depth.max()) + 1
        members = np.flatnonzero(mask).astype(np.int64)
        self.members = members  # sorted node ids
        self.n = len(members)
        if self.n == 0:
            raise ValueError("an empty candidate set")
        mdepth = depth[members]
        order = np.argsort(mdepth, kind="stable")  # ids stay sorted within a depth
        bounds = np.searchsorted(mdepth[order], np.arange(self.height + 1))
        by = members[order]
        self.by_depth: list[IntArray] = [by[bounds[h] : bounds[h + 1]] for h in range(self.height)]
        #: every member sorted by (depth, id), with that sort key: a class's members are one or two runs of it
        self.flat: IntArray = by
        self.flat_key: IntArray = mdepth[order].astype(np.int64) * len(parent) + by
        self._flat_list: list[int] | None = None
        self._flat_key_list: list[int] | None = None
        self._runs: dict[tuple[int, int], tuple[list[int], int, int, int]] = {}
        self._members_list: list[int] | None = None
        # closure: the members and all their ancestors; one hist row each
        marked = np.zeros(len(parent), dtype=bool)
        marked[members] = True
        cur = members
        while cur.size:
            cur = parent[cur].astype(np.int64)
            cur = cur[cur >= 0]
            cur = np.unique(cur[~marked[cur]])
            marked[cur] = True
        closure = np.flatnonzero(marked)
        row = np.full(len(parent), -1, dtype=np.int64)
        row[closure] = np.arange(len(closure))
        hist = np.zeros((len(closure), self.height), dtype=np.int32)
        np.add.at(hist, (row[members], mdepth), 1)
        cdepth = depth[closure]
        for level in range(self.height - 1, 0, -1):
            nodes = closure[cdepth == level]
            if nodes.size:
                np.add.at(hist, row[parent[nodes]], hist[row[nodes]])
        self.row = row
        self.hist = hist
        self.closure = closure
        # the least common subsumer: the deepest closure node whose subtree holds every member
        total = hist.sum(axis=1)
        full = closure[total == self.n]
        self.root = int(full[np.argmax(depth[full])])
        self.base = int(depth[self.root])

    # --- classes ---------------------------------------------------------------------

    def chain(self, node: int) -> list[int]:
        """Ancestors of ``node`` from this set's root down to ``node``."""
        path = self.tree.ancestors(node)
        return path[self.base :]

    def rings(self, chain: list[int]) -> npt.NDArray[np.int32]:
        """``R[a, h]``: members whose subsumer with ``chain[-1]`` is ``chain[a]`` and whose absolute depth is ``h``."""
        m = self.hist[self.row[np.asarray(chain, dtype=np.int64)]]
        r = m.copy()
        r[:-1] -= m[1:]
        return r

    def count_in(self, node: int) -> int:
        """Members in ``subtree(node)``."""
        r = self.row[node]
        return int(self.hist[r].sum()) if r >= 0 else 0

    # --- members -----------------------------------------------------------------------

    def ring_bounds(self, chain: list[int], a: int, h: int) -> tuple[IntArray, int, int, int]:
        """Where ring ``a``'s members at absolute depth ``h`` are: (members of depth ``h``, start, number before
        the inner subtree's hole, end of the hole). The ``j``-th member is ``arr[start + j]`` for ``j`` below the
        number, else ``arr[end + j - number]``."""
        arr = self.by_depth[h]
        size = self.tree.size
        outer = chain[a]
        lo = int(arr.searchsorted(outer))
        hi = int(arr.searchsorted(outer + int(size[outer])))
        if a + 1 < len(chain):
            inner = chain[a + 1]
            lo2 = int(arr.searchsorted(inner))
            hi2 = int(arr.searchsorted(inner + int(size[inner])))
        else:
            lo2 = hi2 = hi
        return arr, lo, lo2 - lo, hi2

    def flat_list(self) -> list[int]:
        """:attr:`flat` as Python ints (built on first use; indexing it is what a draw does)."""
        if self._flat_list is None:
            self._flat_list = self.flat.tolist()
        return self._flat_list

    def members_list(self) -> list[int]:
        """:attr:`members` as Python ints (built on first use)."""
        if self._members_list is None:
            self._members_list = self.members.tolist()
        return self._members_list

    def ring_run(self, chain: list[int], a: int, h: int) -> tuple[list[int], int, int, int]:
        """Ring ``a``'s members at absolute depth ``h`` as a run of :meth:`flat_list`: (the list, start, number
        before the inner subtree's hole, end of the hole); four bisections of the (depth, id) keys, cached: a
        ring is ``subtree(chain[a]) - subtree(chain[a+1])``, shared by every input below ``chain[a+1]``."""
        key = (chain[a + 1], h) if a + 1 < len(chain) else (-1 - chain[a], h)
        hit = self._runs.get(key)
        if hit is not None:
            return hit
        if len(self._runs) >= 500_000:
            self._runs.clear()
        hit = self._runs[key] = self._ring_run(chain, a, h)
        return hit

    def _ring_run(self, chain: list[int], a: int, h: int) -> tuple[list[int], int, int, int]:
        keys = self.flat_key_list()
        size = self.tree.size
        at = h * len(self.tree.parent)
        outer = chain[a]
        lo = bisect_left(keys, at + outer)
        hi = bisect_left(keys, at + outer + int(size[outer]))
        if a + 1 < len(chain):
            inner = chain[a + 1]
            lo2 = bisect_left(keys, at + inner)
            hi2 = bisect_left(keys, at + inner + int(size[inner]))
        else:
            lo2 = hi2 = hi
        return self.flat_list(), lo, lo2 - lo, hi2

    def flat_key_list(self) -> list[int]:
        """:attr:`flat_key` as Python ints (built on first use)."""
        if self._flat_key_list is None:
            self._flat_key_list = self.flat_key.tolist()
        return self._flat_key_list

    def ring_member(self, chain: list[int], a: int, h: int, j: int) -> int:
        """The ``j``-th member (in id order) of ring ``a`` at absolute depth ``h``."""
        arr, lo, left, hi2 = self.ring_bounds(chain, a, h)
        idx = lo + j if j < left else hi2 + (j - left)
        return int(arr[idx])

    # --- sensitivity -------------------------------------------------------------------

    def min_similarity(self) -> float:
        """The least eq. 5 similarity between two distinct members (1.0 for a single member).

        For a fixed subsumer depth ``a`` the similarity falls as ``d + h`` grows, so
        for each possible subsumer ``A`` only its deepest pair matters: ``A`` itself
        with its deepest member below (when ``A`` is a member), or the deepest
        members of its two deepest child subtrees.
        """
        if self.n < 2:
            return 1.0
        tree = self.tree
        depth, parent = tree.depth, tree.parent
        hist = self.hist
        levels = np.arange(self.height)
        # deepest member depth in each closure node's subtree (absolute)
        deepest = np.where(hist > 0, levels[None, :], -1).max(axis=1)
        closure = self.closure
        inside = (closure >= self.root) & (closure < self.root + int(tree.size[self.root]))
        is_member = np.zeros(len(parent), dtype=bool)
        is_member[self.members] = True
        nodes, deep = closure[inside], deepest[inside]
        own = is_member[nodes] & (deep > depth[nodes])  # a member with a deeper member below it
        own_a = depth[nodes[own]].astype(np.int64) - self.base
        cands_a: list[int] = own_a.tolist()
        cands_s: list[int] = (own_a + deep[own] - self.base).tolist()
        # pairs across two child subtrees: the two deepest children of each closure node
        kids = closure[inside & (closure != self.root)]
        par = parent[kids].astype(np.int64)
        deep_k = deepest[self.row[kids]]
        order = np.lexsort((-deep_k, par))
        par_s, deep_s = par[order], deep_k[order]
        first = np.flatnonzero(np.r_[True, par_s[1:] != par_s[:-1]])
        for i in first:
            if i + 1 < len(par_s) and par_s[i + 1] == par_s[i]:
                a = int(depth[par_s[i]]) - self.base
                cands_a.append(a)
                cands_s.append(int(deep_s[i]) + int(deep_s[i + 1]) - 2 * self.base)
        s = np.asarray(cands_s, dtype=np.int64)
        a_ = np.asarray(cands_a, dtype=np.int64)
        # sim(d, h, a) depends on d + h only: split s as d = s - a', h = a' (any split gives the same value)
        sims = similarity(s - a_, a_, a_)
        return float(sims.min())


@dataclass(frozen=True)
class Classes:
    """The classes of one input concept under one criterion: sizes, qualities and how to pick a member.

    ``kind`` per class: 0 = a ring class of ``members`` (``a``, ``h``), 1 = the input
    concept alone, 2 = every domain member but the input (NSQC), 3 = every domain
    member of another topic (SQC2's quality-0 class).
    """

    node: int
    counts: IntArray
    quality: FloatArray
    kind: npt.NDArray[np.int8]
    a: IntArray
    h: IntArray
    chain: list[int]
    members: MemberSet  # whose rings kind-0 classes are
    domain: MemberSet


def ring_classes(ms: MemberSet, node: int) -> tuple[list[int], IntArray, IntArray, IntArray, FloatArray]:
    """Non-empty ring classes of ``node`` in ``ms``: chain, sizes, ``a`` and ``h`` (absolute), similarity."""
    chain = ms.chain(node)
    rings = ms.rings(chain)
    a_idx, h_idx = np.nonzero(rings)
    counts = rings[a_idx, h_idx]
    d = len(chain) - 1
    quality = similarity(d, h_idx - ms.base, a_idx)
    return chain, counts.astype(np.int64), a_idx.astype(np.int64), h_idx.astype(np.int64), quality


def sqc1_classes(domain: MemberSet, node: int) -> Classes:
    """SQC1 (eq. 5): every domain member, by ring and depth."""
    chain, counts, a, h, q = ring_classes(domain, node)
    return Classes(node, counts, q, np.zeros(len(counts), dtype=np.int8), a, h, chain, domain, domain)


def sqc2_classes(domain: MemberSet, same: MemberSet, node: int) -> Classes:
    """SQC2 (eq. 6): the domain's members of the input's topic by ring and depth; all others in one class at 0.

    The rings are taken along the input's chain from the *domain's* root: similarity is
    measured in the domain's taxonomy (eq. 6 restricts eq. 5, it does not re-root it).
    """
    chain = domain.chain(node)
    rings = same.rings(chain)
    a_idx, h_idx = np.nonzero(rings)
    counts = rings[a_idx, h_idx].astype(np.int64)
    a, h = a_idx.astype(np.int64), h_idx.astype(np.int64)
    q = similarity(len(chain) - 1, h - domain.base, a)
    kind = np.zeros(len(counts), dtype=np.int8)
    others = domain.n - same.n
    if others:
        counts = np.append(counts, others)
        q = np.append(q, 0.0)
        kind = np.append(kind, np.int8(3))
        a = np.append(a, -1)
        h = np.append(h, -1)
    return Classes(node, counts, q, kind, a, h, chain, same, domain)


def nsqc_classes(domain: MemberSet, node: int) -> Classes:
    """NSQC (eq. 12): the input (quality 1) and every other member (quality 0)."""
    counts = np.array([1, domain.n - 1], dtype=np.int64)
    return Classes(
        node,
        counts[counts > 0],
        np.array([1.0, 0.0])[counts > 0],
        np.array([1, 2], dtype=np.int8)[counts > 0],
        np.array([-1, -1], dtype=np.int64)[counts > 0],
        np.array([-1, -1], dtype=np.int64)[counts > 0],
        [node],
        domain,
        domain,
    )


class TopicIndex:
    """The domain's members grouped by topic (for SQC2's quality-0 class): id-sorted within each topic."""

    def __init__(self, domain: MemberSet, topic: npt.NDArray[np.int32]) -> None:
        t = topic[domain.members]
        order = np.lexsort((domain.members, t))
        self.sorted = domain.members[order]
        self.topics = t[order]
        self._sorted_list: list[int] | None = None

    def sorted_list(self) -> list[int]:
        """:attr:`sorted` as Python ints (built on first use)."""
        if self._sorted_list is None:
            self._sorted_list = self.sorted.tolist()
        return self._sorted_list

    def block(self, topic: int) -> tuple[int, int]:
        return int(np.searchsorted(self.topics, topic)), int(np.searchsorted(self.topics, topic, side="right"))
