"""The candidate representatives of a cluster (method ``mdav``, paper 003 §3.2.3 and what it leaves open).

§3.2.3 gives each member a share of the representative in proportion to their queries, keeping their query
frequencies "≃"; it leaves open which strings a share keeps when it is too small for all of them. :func:`options`
offers candidates, all with the same size and quotas: each share a threshold sample of the user's strings (Duffield,
Lund and Thorup's threshold sampling, with systematic points; :meth:`Member.share`) for each ``T`` of
:data:`THRESHOLDS` (0 is the printed rounding), and the same within each of the user's taxonomy categories
(:meth:`Member.share_by_category`). A string expected to get ``e`` copies keeps them if ``e >= T``; the rarer ones
are kept with probability about ``e / T``, each then weighing about ``T``: in every candidate each string keeps its
expected count (unbiased), the frequent ones exactly, and a larger ``T`` keeps fewer distinct strings (the released
candidate is chosen by its score, so the release itself is not an unbiased sample). The systematic sample runs over
the strings ordered by category, so it is stratified by category. :mod:`~adapters.microaggregate.srp_floor` then
picks each cluster's candidate: the least information loss (paper 003's ILR) keeping the block's mean SRP (paper
002) above ``1/k`` at L1..L5. Method ``mdav-paper`` releases the printed rounding (``T = 0``).
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import numpy.typing as npt

from adapters.microaggregate.information import entropy_bits

Ints = npt.NDArray[np.intp]


#: The thresholds ``T`` (copies) ``mdav``'s candidates use; 0 is the printed rounding. Capped at 16 so that
#: one user's string is never inflated beyond 16 copies of a share.
THRESHOLDS = (0.0, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 13.0, 16.0)


def apportion(total: int, weights: Sequence[float], rng: random.Random) -> list[int]:
    """Split ``total`` in proportion to ``weights`` by largest remainders (ties in random order)."""
    return apportion_keyed(total, weights, [rng.random() for _ in weights])


def apportion_keyed(total: int, weights: Sequence[float], ties: Sequence[float]) -> list[int]:
    """:func:`apportion` with the tie-breaking keys given (the same ties for several trials)."""
    whole = sum(weights)
    shares = [total * w / whole for w in weights]
    out = [math.floor(s) for s in shares]
    keys = [(-(s - f), t) for s, f, t in zip(shares, out, ties)]
    for i in sorted(range(len(weights)), key=keys.__getitem__)[: total - sum(out)]:
        out[i] += 1
    return out


def round_systematic(total: int, weights: Sequence[float], start: float) -> list[int]:
    """Integers summing to ``total`` in proportion to ``weights``, each the floor or the ceiling of its exact share
    with the ceiling's probability equal to the fractional part (systematic rounding from ``start`` in [0, 1))."""
    whole = sum(weights)
    out, position, taken = [], 0.0, 0
    for w in weights:
        position += total * w / whole
        upto = min(total, max(taken, math.ceil(position - start - 1e-9)))  # points start + j below position
        out.append(upto - taken)
        taken = upto
    out[-1] += total - taken
    return out


@dataclass
class Member:
    """One cluster member for the string choice: their distinct strings and counts, the tie keys of the
    largest-remainder rounding, the random order and start of the systematic sample, the start of the systematic
    rounding; their number of queries and its entropy follow from the counts."""

    strings: list[int]
    counts: list[int]
    ties: list[float]
    keys: list[float]
    start: float
    round_start: float
    #: The member's strings cut by category (:meth:`stratify`); empty until then.
    parts: list[Member] = field(default_factory=list)

    @cached_property
    def total(self) -> int:
        """The member's number of queries."""
        return sum(self.counts)

    @cached_property
    def entropy(self) -> float:
        """The entropy of the member's queries (only ``mdav``'s choice of candidate needs it)."""
        return entropy_bits(self.counts)

    @classmethod
    def of(cls, sids: Sequence[int], rng: random.Random, strata: Ints | None = None) -> Member:
        """The member whose queries have the string ids ``sids``; with ``strata`` (a row of category nodes per
        string id), stratified by category (:meth:`stratify`)."""
        freq = Counter(sids)
        strings = sorted(freq)
        counts = [freq[s] for s in strings]
        ties = [rng.random() for _ in strings]
        keys = [rng.random() for _ in strings]
        member = cls(strings, counts, ties, keys, rng.random(), rng.random())
        if strata is not None:
            member.stratify(strata, rng)
        return member

    def stratify(self, strata: Ints, rng: random.Random) -> None:
        """Order the strings by their category row ``strata[s]`` (random within a category) for the systematic
        sample, so it is stratified by category at every level; and cut them into :attr:`parts`, one per row."""
        rows = [tuple(strata[s].tolist()) for s in self.strings]
        order = sorted(range(len(self.strings)), key=lambda i: (rows[i], self.keys[i]))
        for rank, i in enumerate(order):
            self.keys[i] = float(rank)
        groups: dict[tuple[int, ...], list[int]] = {}
        for i in order:
            groups.setdefault(rows[i], []).append(i)
        self.parts = [
            Member(
                [self.strings[i] for i in idx],
                [self.counts[i] for i in idx],
                [self.ties[i] for i in idx],
                [self.keys[i] for i in idx],
                rng.random(),
                rng.random(),
            )
            for idx in groups.values()
        ]

    def share_by_category(self, quota: int, threshold: float, into: Counter[int]) -> None:
        """:meth:`share` within each category: the quota split over :attr:`parts` in proportion to their queries
        (systematic rounding: each category keeps its expected copies, floor or ceiling), then each part's copies
        spread over its strings with ``threshold``. A category keeps its share as with ``T = 0``; only the number
        of distinct strings inside it goes down."""
        copies = round_systematic(quota, [p.total for p in self.parts], self.round_start)
        for part, n in zip(self.parts, copies):
            if n:
                part.share(n, threshold, into)

    def share(self, quota: int, threshold: float, into: Counter[int]) -> None:
        """Add a share of ``quota`` queries, a string of count ``c`` expected to get ``e = quota c / n`` copies.

        ``threshold`` 0: every string, by weight ``e``, copies by largest remainders. Else the strings with
        ``e >= T`` keep weight ``e``; the rarer ones (total ``R``) get ``m = max(1, round(R / T))`` systematic
        points spaced ``R / m`` apart over their masses in the random order of :attr:`keys`, each point worth
        ``R / m``; weights become copies by systematic rounding. Every string's expected copies are exactly
        ``e``, and about ``R / T`` rare strings are kept."""
        n = self.total
        expect = [quota * c / n for c in self.counts]
        if threshold <= 0:
            copies = apportion_keyed(quota, expect, self.ties)
            for s, c in zip(self.strings, copies):
                if c:
                    into[s] += c
            return
        kept = [i for i, e in enumerate(expect) if e >= threshold]
        weights = [expect[i] for i in kept]
        rare = sorted((i for i, e in enumerate(expect) if e < threshold), key=self.keys.__getitem__)
        rest = sum(expect[i] for i in rare)
        if rare and rest > 0:
            points = max(1, round(rest / threshold))
            spacing = rest / points
            position = 0.0
            for i in rare:  # the points start x spacing + j x spacing falling in [position, position + e)
                end = position + expect[i]
                hits = math.ceil(end / spacing - self.start - 1e-12) - math.ceil(
                    position / spacing - self.start - 1e-12
                )
                if hits > 0:
                    kept.append(i)
                    weights.append(hits * spacing)
                position = end
        for i, c in zip(kept, round_systematic(quota, weights, self.round_start)):
            if c:
                into[self.strings[i]] += c


def options(
    members: Sequence[Member], total: int, rng: random.Random, thresholds: Sequence[float] = THRESHOLDS
) -> list[Counter[int]]:
    """The candidate representatives of ``total`` queries (§3.2.3: each member's quota in proportion to their
    number of queries, one draw of quotas for all): a share of every member by each of ``thresholds`` (0, the
    printed rounding, first), then (members stratified by category) by each positive one within each category
    (:meth:`Member.share_by_category`)."""
    quotas = apportion(total, [m.total for m in members], rng)

    def build(threshold: float, by_category: bool) -> Counter[int]:
        chosen: Counter[int] = Counter()
        for m, quota in zip(members, quotas):
            if quota:
                if by_category:
                    m.share_by_category(quota, threshold, chosen)
                else:
                    m.share(quota, threshold, chosen)
        return chosen

    out = [build(threshold, False) for threshold in thresholds]
    if all(m.parts for m in members):
        out += [build(threshold, True) for threshold in thresholds if threshold > 0]
    return out
