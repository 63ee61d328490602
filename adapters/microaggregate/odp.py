"""``odp``: paper 002's semantic microaggregation of users over the category taxonomy (Algorithms 1-5).

* **Classification matrices** (Algorithm 1): ``M_l[u, c]`` = the number of user ``u``'s queries whose category
  path has node ``c`` at level ``l``, for ``l`` = L1..L5. The paper classifies every *term* with ODP (one or the
  first five ODP categories); here each *query* has one path, the knowledge base classifier's (paper 001
  Algorithm 1 picks the query's most specific unit), so a user's matrices count queries, as the issue asks.
* **Uncategorisable queries** (no path: the classifier found no unit, or the query is empty) add nothing to any
  matrix, as a term without an ODP category adds nothing in the paper; they stay in the user's query list for the
  aggregation and are counted (``queries_uncategorised``). A user whose queries are all uncategorised has
  similarity 0 to everyone: the greedy steps place such users last, among themselves or as leftovers.
* **Similarity** (eq. 1, Algorithm 2): ``sim(u, v) = sum_l sum_c min(M_l[u, c], M_l[v, c])``. Computed exactly
  as a sparse product: ``min(a, b) = sum_{t>=1} [a >= t][b >= t]``, so with one 0/1 column per (node, t) the
  whole incidence matrix is ``X X^T`` (integer-exact; :class:`Incidence` gives rows on demand: a sparse product
  for blocks of rows, one ``bincount`` for a few), in blocks of at most :data:`BLOCK_CELLS` cells: memory never
  holds the users x users matrix (see :func:`greedy_partition`). The paper's ``np.minimum`` sums over every
  pair of users and category would be users^2 x categories; this is the same number from the shared columns.
* **Partition** (Algorithms 3-4): while at least k users remain, the most similar pair (the highest off-diagonal
  cell; a user's similarity to itself is not a candidate) starts a cluster; the cluster then acts as one merged
  user whose row is the sum of its members' rows (Algorithm 4's row/column merge) and takes the remaining user
  most similar to it, until it has k users. Algorithm 3's loop condition ``|U'| <= k`` is read as ``>= k``.
  Ties go to the first user in a random order drawn from ``rng`` (users are shuffled once). The paper would
  leave a last cluster of ``n mod k`` users (``gamma = ceil(n/k)``), under k; here each leftover user joins the
  cluster whose merged user is most similar to it among those with fewer than 2k-1 users (there is always room:
  fewer than k leftovers, each cluster can take k-1 more), so every cluster has k..2k-1 users.
* **Aggregation** (Algorithm 5, eq. 2-3): the cluster's representative has at most about the mean number of
  queries of its users (the paper's target), often fewer: a light user's draws run out before its quota.
  ``Contrib_i = |Q_i| / sum |Q|``, ``Quota_i = |Q_i| / |z|`` (the paper writes k, the cluster size;
  with a leftover joined a cluster has more than k users). Each user's distinct query strings in decreasing
  repetitions (ties in random order) are added while the user's count is under its quota:
  ``floor(Contrib_i * reps)`` copies and one more with probability the fractional part (the paper's 3 * 0.4 = 1.2
  example); a user never adds more than ``ceil(Quota_i)`` (a cap the paper leaves open). When every draw of a
  cluster fails (possible for tiny clusters of unique queries), one copy of the most repeated query of the
  user with most queries is released, so no user vanishes from the output.
* **Released fields**: real query strings of the cluster; time, rank and URL as ``mdav`` does
  (:mod:`~adapters.microaggregate.representative`), paper 002 saying nothing about them.

Randomness only from ``rng`` (a CSPRNG unless the CLI got ``--seed``).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Iterator

import numpy as np
import scipy.sparse as sp  # type: ignore[import-untyped]  # scipy ships no type information

from adapters.microaggregate.aggregate import Progress, Result
from adapters.microaggregate.classified import Classify, Floats, Ints, Queries, prepare
from adapters.microaggregate.log import UserLog
from adapters.microaggregate.representative import Representatives

#: Cells of one dense block of the similarity matrix (rows x users).
BLOCK_CELLS = 1 << 22


def classification_matrix(q: Queries) -> sp.csr_array:
    """All levels' classification matrices side by side (Algorithm 1): users x taxonomy nodes, query counts.

    Node ``c``'s level is ``q.node_level[c]``; ``M_l`` is the column block of the nodes at level ``l``."""
    user = np.repeat(np.arange(q.users, dtype=np.intp), q.counts)
    nodes = q.nodes[q.sid]  # queries x levels
    rows = np.repeat(user, nodes.shape[1]).reshape(nodes.shape)
    keep = nodes >= 0
    data = np.ones(int(keep.sum()), dtype=np.int64)
    m = sp.coo_array((data, (rows[keep], nodes[keep])), shape=(q.users, len(q.node_level)))
    return sp.csr_array(m)  # duplicates summed


def threshold_matrix(counts: sp.csr_array) -> sp.csr_array:
    """One 0/1 column per (node, t): ``[M[u, c] >= t]``, so that ``X X^T`` is Algorithm 2's incidence matrix."""
    m = sp.coo_array(counts)
    m.sum_duplicates()
    reps = m.data.astype(np.intp)
    width = np.zeros(counts.shape[1], dtype=np.intp)
    np.maximum.at(width, m.col.astype(np.intp), reps)
    offset = np.cumsum(width) - width
    total = int(reps.sum())
    starts = np.cumsum(reps) - reps
    t = np.arange(total, dtype=np.intp) - np.repeat(starts, reps)
    rows = np.repeat(m.row.astype(np.intp), reps)
    cols = np.repeat(offset[m.col.astype(np.intp)], reps) + t
    x = sp.coo_array((np.ones(total, dtype=np.float64), (rows, cols)), shape=(counts.shape[0], int(width.sum())))
    return sp.csr_array(x)


def _ranges(starts: Ints, lengths: Ints) -> Ints:
    """The concatenated ranges ``starts[i] : starts[i] + lengths[i]``."""
    total = int(lengths.sum())
    shift = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    out: Ints = (shift + np.arange(total, dtype=np.intp)).astype(np.intp)
    return out


class Incidence:
    """Rows of the incidence matrix ``M_UxU = X X^T`` (ODPsim, eq. 1) on demand, never the whole matrix."""

    def __init__(self, x: sp.csr_array) -> None:
        self.x = sp.csr_array(x)
        self.xt = sp.csr_array(self.x.T)  # row-major both sides: no conversion per product
        self.n = int(self.x.shape[0])
        self.column_users = np.diff(self.xt.indptr).astype(np.intp)

    def rows(self, rows: Ints) -> Floats:
        """ODPsim of users ``rows`` to every user: a len(rows) x n block. A few rows are counted with one
        ``bincount`` over the users sharing each of their columns; larger blocks use the sparse product."""
        x, xt, n = self.x, self.xt, self.n
        starts = x.indptr[rows].astype(np.intp)
        lengths = (x.indptr[rows + 1] - x.indptr[rows]).astype(np.intp)
        columns = x.indices[_ranges(starts, lengths)].astype(np.intp)
        shared = self.column_users[columns]
        if int(shared.sum()) > BLOCK_CELLS // 4 or len(rows) * n > BLOCK_CELLS:
            block: Floats = np.asarray((x[rows] @ xt).toarray(), dtype=np.float64)
            return block
        owner = np.repeat(np.repeat(np.arange(len(rows), dtype=np.intp), lengths), shared)
        users = xt.indices[_ranges(xt.indptr[columns].astype(np.intp), shared)]
        counts = np.bincount(owner * n + users, minlength=len(rows) * n)
        out: Floats = counts.reshape(len(rows), n).astype(np.float64)
        return out


def _blocks(rows: Ints, n: int) -> Iterator[Ints]:
    step = max(1, BLOCK_CELLS // max(1, n))
    for lo in range(0, len(rows), step):
        yield rows[lo : lo + step]


def greedy_partition(x: sp.csr_array, k: int, progress: Progress | None = None) -> list[Ints]:
    """Algorithms 3-4 over the users (rows) of ``x``; ties go to the lowest index. Clusters of k..2k-1 users.

    Instead of the full users x users matrix, each user's best partner (highest similarity, lowest index) among
    the unplaced users is kept, and only users whose best partner was just placed are recomputed: the same
    choices as the full-matrix algorithm with memory linear in the users (plus one block)."""
    n = x.shape[0]
    if k < 2:
        raise ValueError("odp needs k >= 2")
    if n < k:
        raise ValueError("odp needs at least k users")
    incidence = Incidence(x)
    alive = np.ones(n, dtype=bool)
    best_val = np.full(n, -np.inf)
    best_j = np.full(n, -1, dtype=np.intp)

    def refresh(rows: Ints) -> None:
        for block in _blocks(rows, n):
            s = incidence.rows(block)
            s[:, ~alive] = -np.inf
            s[np.arange(len(block)), block] = -np.inf
            j = np.argmax(s, axis=1)
            best_j[block] = j
            best_val[block] = s[np.arange(len(block)), j]

    def row(u: int) -> Floats:
        out: Floats = incidence.rows(np.array([u], dtype=np.intp))[0]
        return out

    refresh(np.arange(n, dtype=np.intp))
    clusters: list[Ints] = []
    placed = 0
    while int(alive.sum()) >= k:
        i = int(np.argmax(np.where(alive, best_val, -np.inf)))
        j = int(best_j[i])
        members = [i, j]
        alive[[i, j]] = False
        if k > 2:
            merged = row(i) + row(j)  # the merged user u' of Algorithm 4
            while len(members) < k:
                u = int(np.argmax(np.where(alive, merged, -np.inf)))
                members.append(u)
                alive[u] = False
                merged += row(u)
        cluster = np.array(members, dtype=np.intp)
        clusters.append(cluster)
        placed += k
        if progress is not None:
            progress(placed)
        stale = np.nonzero(alive & np.isin(best_j, cluster))[0].astype(np.intp)
        if len(stale) and int(alive.sum()) >= 2:
            refresh(stale)
    leftovers = np.nonzero(alive)[0]
    if len(leftovers):
        owner = np.empty(n, dtype=np.intp)
        for c, members_c in enumerate(clusters):
            owner[members_c] = c
        sizes = np.array([len(c) for c in clusters], dtype=np.intp)
        grown: dict[int, list[int]] = {}
        for u in leftovers.tolist():
            sims = row(u)
            placed_users = ~alive
            score = np.bincount(owner[placed_users], weights=sims[placed_users], minlength=len(clusters))
            c = int(np.argmax(np.where(sizes < 2 * k - 1, score, -np.inf)))
            grown.setdefault(c, []).append(u)
            sizes[c] += 1
            owner[u] = c
            alive[u] = False  # now placed: later leftovers count it in its cluster's merged user
        for c, extra in grown.items():
            clusters[c] = np.concatenate([clusters[c], np.array(extra, dtype=np.intp)])
        if progress is not None:
            progress(n)
    return clusters


def algorithm5(q: Queries, members: Ints, rng: random.Random) -> Counter[int]:
    """The strings (and copies) cluster ``members`` releases: Algorithm 5 with eq. 2-3 (see the module note)."""
    sizes = [int(q.counts[u]) for u in members.tolist()]
    total = sum(sizes)
    chosen: Counter[int] = Counter()
    firsts: list[tuple[int, int]] = []  # (size, most repeated string) per user, for the empty-cluster rule
    for u, size in zip(members.tolist(), sizes):
        start = int(q.starts[u])
        freq = Counter(q.sid[start : start + size].tolist())
        ties = {s: rng.random() for s in freq}
        order = sorted(freq, key=lambda s: (-freq[s], ties[s]))
        firsts.append((size, order[0]))
        contrib = size / total  # eq. 2
        quota = size / len(sizes)  # eq. 3
        cap = math.ceil(quota)
        added = 0
        for s in order:
            if added >= quota:
                break
            share = contrib * freq[s]
            copies = math.floor(share) + (1 if rng.random() < share - math.floor(share) else 0)
            copies = min(copies, cap - added)
            if copies > 0:
                chosen[s] += copies
                added += copies
    if not chosen:
        most = max(size for size, _ in firsts)
        chosen[rng.choice([s for size, s in firsts if size == most])] = 1
    return chosen


def microaggregate_odp(
    log: UserLog, k: int, rng: random.Random, progress: Progress | None = None, classify: Classify | None = None
) -> Result:
    """Paper 002's ODP microaggregation of ``log``'s users into clusters of k..2k-1 (see the module note).

    ``classify`` maps distinct query strings to category paths; default: the knowledge base's classifier."""
    q = prepare(log, k, "odp", classify)
    x = threshold_matrix(classification_matrix(q))
    order = np.array(rng.sample(range(q.users), q.users), dtype=np.intp)  # random tie-breaking
    clusters = [order[c] for c in greedy_partition(sp.csr_array(x[order]), k, progress)]
    reps = Representatives(q)
    return Result(clusters, [reps.build(c, algorithm5(q, c, rng)) for c in clusters], q.strings)
