"""``semantic-mdav``: paper 000's semantic microaggregation, MDAV over users as category distributions.

Paper 000 maps each query to a category of a taxonomy, represents a user's log by those categories "with their
corresponding taxonomical generalizations", clusters users with MDAV (its Algorithm 1, the 3k / 2k end rules:
:func:`~adapters.microaggregate.mdav.mdav`) under "a measure that computes the semantic distance between
categories, according to their taxonomical trees", and replaces each cluster by "a synthetic set of queries that
represent both their meaning and their distribution", "selecting randomly queries inside the same cluster". It
gives no formula for either; the choices made here:

* **Conceptual mapping**: the knowledge base classifier (stop words, stemming-like normalisation, progressive
  left-trimming of noun phrases are its steps) gives each distinct query string one path L1..L5.
* **A user** is the distribution of their queries over the taxonomy: at every node (all levels L1..L5, each a
  generalisation of the ones below), the share of the user's queries whose path passes through it. A query with
  no category (uncategorisable or empty) sits at the taxonomy's root: it is the most general concept, at the
  same distance from every category of level 1.
* **Distance between categories**: the taxonomy as a weighted tree, the edge into a level-``l`` node weighing
  ``2^(1-l)`` (1, 1/2, 1/4, ...): two categories are as far apart as the path between them, dominated by the
  level where their paths part (sibling L1 categories 2, sibling L2 nodes 1, ...).
* **Distance between users**: the Earth Mover's distance of their distributions under that ground distance. On
  a tree it has the closed form ``sum_nodes w_l |P(node) - Q(node)|`` (a weighted L1 distance of the node shares),
  so it is a metric, 0 exactly for users with the same distribution, and MDAV's average record is the mean of the
  members' distributions. It is computed over sparse rows: ``|a - b|_1 = |a|_1 + |b|_1 - 2 sum min(a, b)``.
* **Aggregation**: the cluster's representative has ``round(mean queries per member)`` queries (at least one),
  drawn at random without replacement from the pooled queries of the cluster, stratified by category (each
  query's full path, uncategorised queries one stratum): strata get seats in proportion to their size by
  largest remainders (ties random), so the representative keeps the cluster's category distribution up to
  rounding — paper 000's "meaning and distribution" — where plain random sampling would only keep it on average.
  Time, rank and URL as ``mdav`` does (:mod:`~adapters.microaggregate.representative`).

Randomness only from ``rng`` (a CSPRNG unless the CLI got ``--seed``); MDAV itself is deterministic (ties to the
lower user index).
"""

from __future__ import annotations

import random
from collections import Counter

import numpy as np
import scipy.sparse as sp  # type: ignore[import-untyped]  # scipy ships no type information

from adapters.microaggregate.aggregate import Progress, Result
from adapters.microaggregate.classified import Classify, Floats, Ints, Queries, prepare
from adapters.microaggregate.log import UserLog
from adapters.microaggregate.mdav import mdav
from adapters.microaggregate.odp import classification_matrix
from adapters.microaggregate.representative import Representatives
from adapters.microaggregate.shares import apportion


def level_weights(q: Queries) -> Floats:
    """The weight ``2^(1-l)`` of the edge into each node (levels 1-based)."""
    weights: Floats = np.power(0.5, q.node_level.astype(np.float64))
    return weights


class CategorySpace:
    """Users as weighted node shares (sparse rows); the tree Earth Mover's distance; MDAV's :class:`Space`.

    ``progress`` (if any) hears the number of users placed before each new MDAV cluster."""

    def __init__(self, q: Queries, progress: Progress | None = None) -> None:
        counts = classification_matrix(q).astype(np.float64)
        scale = sp.diags(1.0 / q.counts.astype(np.float64))
        self.x = sp.csr_array(scale @ counts @ sp.diags(level_weights(q)))
        self.x.sort_indices()
        self.norm = np.asarray(self.x.sum(axis=1), dtype=np.float64).reshape(-1)
        self.n = q.users
        self.progress = progress

    def _distances(self, centre: Floats, centre_norm: float, members: Ints) -> Floats:
        rows = self.x[members]
        lengths = np.diff(rows.indptr)
        owner = np.repeat(np.arange(len(members), dtype=np.intp), lengths)
        common = np.bincount(owner, weights=np.minimum(rows.data, centre[rows.indices]), minlength=len(members))
        out: Floats = np.maximum(self.norm[members] + centre_norm - 2.0 * common, 0.0)
        return out

    def vector(self, members: Ints) -> Floats:
        """The mean weighted node shares of ``members`` (one user: their own), dense."""
        mean: Floats = np.asarray(self.x[members].mean(axis=0), dtype=np.float64).reshape(-1)
        return mean

    def to_record(self, record: int, members: Ints) -> Floats:
        if self.progress is not None:
            self.progress(self.n - len(members))
        return self._distances(self.vector(np.array([record], dtype=np.intp)), float(self.norm[record]), members)

    def to_average(self, members: Ints) -> Floats:
        centre = self.vector(members)
        return self._distances(centre, float(centre.sum()), members)


def sample_cluster(q: Queries, members: Ints, rng: random.Random) -> Counter[int]:
    """The strings (and copies) cluster ``members`` releases: a category-stratified random sample of its queries."""
    pool = q.of(members)
    size = max(1, round(len(pool) / len(members)))
    paths = q.nodes[q.sid[pool]]
    depth = (paths >= 0).sum(axis=1)
    leaf = np.where(depth > 0, paths[np.arange(len(pool)), np.maximum(depth - 1, 0)], -1)
    strata, inverse = np.unique(leaf, return_inverse=True)
    order = np.argsort(inverse.reshape(-1), kind="stable")
    bounds = np.searchsorted(inverse.reshape(-1)[order], np.arange(len(strata) + 1))
    sizes = np.diff(bounds).tolist()
    chosen: Counter[int] = Counter()
    for g, seats in enumerate(apportion(size, sizes, rng)):
        if seats:
            stratum = pool[order[bounds[g] : bounds[g + 1]]].tolist()
            chosen.update(int(q.sid[i]) for i in rng.sample(stratum, seats))
    return chosen


def microaggregate_semantic_mdav(
    log: UserLog, k: int, rng: random.Random, progress: Progress | None = None, classify: Classify | None = None
) -> Result:
    """Paper 000's semantic MDAV of ``log``'s users into clusters of k..2k-1 (see the module note).

    ``classify`` maps distinct query strings to category paths; default: the knowledge base's classifier."""
    q = prepare(log, k, "semantic-mdav", classify)
    clusters = mdav(CategorySpace(q, progress), q.users, k)
    if progress is not None:
        progress(q.users)
    reps = Representatives(q)
    return Result(clusters, [reps.build(c, sample_cluster(q, c, rng)) for c in clusters], q.strings)
