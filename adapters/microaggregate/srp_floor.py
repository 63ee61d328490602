"""Which representative each ``mdav`` cluster of a block releases: the least information loss (paper 003's ILR)
that keeps the block's mean SRP (paper 002 eq. 4) above the random-partition line ``1/k`` at L1..L5.

Every cluster offers candidate representatives (:func:`~adapters.microaggregate.shares.options`), all with
§3.2.3's size and quotas. A candidate's *cost* is its members' summed ILR, ``Σ |H_u - H| / H_u`` over the members
with ``H_u > 0``; its *remain* at level ``l`` is its members' summed SRP, ``Σ_c min(n_u(c), n'(c)) / χ_u`` over
the members with ``χ_u > 0`` (their queries classified down to level ``l``), the categories being the knowledge
base's, as ``querylog audit`` measures them. The block's floor at level ``l`` is ``(1/k + SRP_MARGIN) N_l``, with
``N_l`` the block's users having a category at that level.

The choice is a multiple-choice knapsack, solved greedily: every cluster starts at its cheapest candidate; while
a level is under its floor, the switch (one cluster to another of its candidates) removing the most shortfall per
unit of added cost is taken. Each switch strictly lowers the shortfall, so the loop ends; when no single switch
lowers it, what is left is reported. Where levels trade off against each other a floor can then still be
reachable by switching two clusters at once (random 5-level inputs: 112 of 1,457 reachable cases missed); on the
logs measured, an exact solver (scipy's ``milp``) found every block the greedy left short truly out of reach.
The log's mean SRP at a level is the block means weighted by their ``N_l``, so a floor met in every block is met
by the whole log.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from adapters.microaggregate.information import entropy_bits

if TYPE_CHECKING:
    from adapters.microaggregate.shares import Member

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.intp]

#: The taxonomy levels the floor holds at: L1..L5, the levels paper 002 evaluates (§4.2.1) and the classifier gives.
SRP_LEVELS = 5
#: How far above ``1/k`` the floor sits (a fraction: 0.01 is one point of SRP).
SRP_MARGIN = 0.01


def summed_ilr(entropies: Sequence[float], chosen: Counter[int]) -> float:
    """``Σ |H_u - H| / H_u`` over the members' entropies ``H_u > 0``, ``H`` the entropy of ``chosen``."""
    h = entropy_bits(list(chosen.values()))
    return sum(abs(e - h) / e for e in entropies if e > 0)


@dataclass
class Scored:
    """One cluster's candidates: their cost, their remain per level, and the members with a category per level."""

    cost: Floats
    remain: Floats
    users: Floats


def score(members: Sequence[Member], candidates: Sequence[Counter[int]], nodes: Ints) -> Scored:
    """The cost and remain of each candidate; ``nodes[s, l]`` is string ``s``'s node at level ``l`` (-1: none,
    node ids distinct across levels)."""
    levels = nodes.shape[1]
    rows = [nodes[np.asarray(s, dtype=np.intp)] for s in [*(m.strings for m in members), *map(list, candidates)]]
    local = np.unique(np.concatenate([r.ravel() for r in rows]))
    local = local[local >= 0]  # every node of the members and the candidates
    level = np.zeros((len(local), levels))
    for lvl in range(levels):
        column = np.concatenate([r[:, lvl] for r in rows])
        level[np.searchsorted(local, np.unique(column[column >= 0])), lvl] = 1.0

    def counts(strings: Sequence[int], copies: Sequence[int]) -> Floats:
        where = nodes[np.asarray(strings, dtype=np.intp)]
        weights = np.repeat(np.asarray(copies, dtype=np.float64), levels)
        flat = where.ravel()
        keep = flat >= 0
        return np.bincount(np.searchsorted(local, flat[keep]), weights[keep], minlength=len(local)).astype(np.float64)

    original = np.array([counts(m.strings, m.counts) for m in members]).reshape(len(members), len(local))
    chi = original @ level
    has = chi > 0
    entropies = [m.entropy for m in members]
    cost = np.empty(len(candidates))
    remain = np.zeros((len(candidates), levels))
    for j, chosen in enumerate(candidates):
        cost[j] = summed_ilr(entropies, chosen)
        shared = np.minimum(original, counts(list(chosen), list(chosen.values()))) @ level
        remain[j] = np.where(has, shared / np.where(has, chi, 1.0), 0.0).sum(axis=0)
    return Scored(cost, remain, has.sum(axis=0).astype(np.float64))


def pick(clusters: Sequence[Scored], k: int, margin: float = SRP_MARGIN) -> tuple[list[int], Floats]:
    """Each cluster's candidate (index) under the block's floor, and the shortfall left per level (all 0 when
    the floor is met), by the greedy of the module docstring."""
    choice = np.array([int(np.argmin(c.cost)) for c in clusters], dtype=np.intp)
    if not clusters:
        return [], np.zeros(SRP_LEVELS)
    floor = (1.0 / k + margin) * sum(c.users for c in clusters)
    owner = np.concatenate([np.full(len(c.cost), i, dtype=np.intp) for i, c in enumerate(clusters)])
    offset = np.concatenate([[0], np.cumsum([len(c.cost) for c in clusters])[:-1]]).astype(np.intp)
    cost = np.concatenate([c.cost for c in clusters])
    remain = np.concatenate([c.remain for c in clusters])
    total = remain[offset + choice].sum(axis=0)
    while True:
        short = np.maximum(floor - total, 0.0)
        if short.sum() <= 1e-9:
            break
        current = offset[owner] + choice[owner]
        after = total + remain - remain[current]
        gain = short.sum() - np.maximum(floor - after, 0.0).sum(axis=1)
        useful = gain > 1e-9
        if not useful.any():
            break
        ratio = np.where(useful, (cost - cost[current]) / np.where(useful, gain, 1.0), np.inf)
        best = int(np.argmin(ratio))
        cluster = int(owner[best])
        total += remain[best] - remain[offset[cluster] + choice[cluster]]
        choice[cluster] = best - offset[cluster]
    short = np.maximum(floor - total, 0.0)
    return choice.tolist(), np.where(short > 1e-9, short, 0.0)
