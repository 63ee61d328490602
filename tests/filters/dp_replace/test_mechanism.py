"""The mechanism of dp_replace: class sampler vs brute force, the chi-square of its draws, the e^eps ratio.

All on small taxonomies (tests/filters/dp_replace/taxonomies.py) except the last ratio check, which takes
exact class probabilities in the real WordNet domain. Seeds only here: the filter uses the CSPRNG.
"""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest
from helpers.dp_taxonomies import exponential, random_tree, sim

from filters.dp_replace.domains import Domains
from filters.dp_replace.mechanism import MAX_EPSILON, eta, integer_weights, overrun
from filters.dp_replace.rand import RandomPool
from filters.dp_replace.sampler import Sampler

CRITERIA = ("sqc1", "sqc2", "nsqc")


def _domains(tree, mode: str) -> Domains:  # tree: ConceptTree
    if mode == "single":
        return Domains(tree, "single", "n0.n.01")  # a subtree: concepts outside it have no domain
    if mode == "category":
        return Domains(tree, "category")  # candidate sets that are not subtrees
    return Domains(tree, "topics", topics=[tree.names[1], tree.names[2]], sqc2_topics=["n3.n.01", "n5.n.01"])


def _pool(seed: int) -> RandomPool:
    return RandomPool(random.Random(seed).randbytes)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
@pytest.mark.parametrize("mode", ["single", "category", "topics"])
@pytest.mark.parametrize("criterion", CRITERIA)
def test_class_sampler_equals_brute_force(seed: int, mode: str, criterion: str) -> None:
    """On random taxonomies, for every input concept: the class sampler's exact output distribution equals eq. 2
    computed over every candidate one by one (relative 1e-9), each candidate sits in exactly one class, and the
    sensitivity equals max - min similarity over all pairs of the domain (SQC1) or 1 (SQC2, NSQC)."""
    tree = random_tree(seed)
    d = _domains(tree, mode)
    s = Sampler(d, criterion, _pool(seed))  # a Criterion literal
    topic = [int(t) for t in d.topic]
    checked = 0
    for x in range(len(tree)):
        t = d.of(x)
        if t < 0 or d.size(t) < 2:
            continue
        ms = d.members(t)
        members = [int(m) for m in ms.members]
        want = exponential(tree, criterion, x, members, ms.root, topic, 1.3)
        got = s.output_probabilities(x, 1.3)  # raises when a candidate falls in two classes
        assert set(got) == set(members)
        for o in members:
            assert got[o] == pytest.approx(want[o], rel=1e-9)
        pairs = [sim(tree, u, v, ms.root) for u in members for v in members if u != v]
        expected_delta = 1.0 - min(pairs) if criterion == "sqc1" else 1.0
        assert d.delta(t, criterion) == pytest.approx(expected_delta, rel=1e-9)
        assert d.delta(t, criterion) >= expected_delta  # rounded up, never down
        checked += 1
    assert checked > 5


def test_ring_members_are_a_bijection() -> None:
    """Every ring class's j-th member, j over its size, lists exactly the domain members with that subsumer and
    depth, each once: the uniform member draw is uniform over the class."""
    tree = random_tree(11, n=60)
    d = Domains(tree, "single", "root")
    ms = d.members(0)
    for x in [int(m) for m in ms.members]:
        chain = ms.chain(x)
        rings = ms.rings(chain)
        seen: set[int] = set()
        for a, h in zip(*np.nonzero(rings)):
            got = [ms.ring_member(chain, int(a), int(h), j) for j in range(int(rings[a, h]))]
            assert len(set(got)) == len(got)
            for o in got:
                assert int(tree.depth[o]) == h
                lcs = max(set(tree.ancestors(o)) & set(chain), key=lambda n: int(tree.depth[n]))
                assert lcs == chain[a]
            seen |= set(got)
        assert seen == {int(m) for m in ms.members}


def _chi_square_p(stat: float, df: int) -> float:
    """P(X >= stat) for chi-square with ``df`` degrees of freedom (regularised upper incomplete gamma)."""
    a, x = df / 2.0, stat / 2.0
    if x < a + 1.0:  # series for the lower part
        term = total = 1.0 / a
        n = a
        for _ in range(10_000):
            n += 1.0
            term *= x / n
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return 1.0 - total * math.exp(-x + a * math.log(x) - math.lgamma(a))
    b, c, dd = x + 1.0 - a, 1e300, 1.0 / (x + 1.0 - a)  # continued fraction (Lentz)
    h = dd
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2.0
        dd = an * dd + b
        dd = 1.0 / (dd if abs(dd) > 1e-300 else 1e-300)
        c = b + an / c
        c = c if abs(c) > 1e-300 else 1e-300
        delta = dd * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return math.exp(-x + a * math.log(x) - math.lgamma(a)) * h


def test_chi_square_helper() -> None:
    """The chi-square tail used below matches known quantiles (df 10: 18.307 at 0.05; df 3: 7.815 at 0.05)."""
    assert _chi_square_p(18.307, 10) == pytest.approx(0.05, abs=1e-3)
    assert _chi_square_p(7.815, 3) == pytest.approx(0.05, abs=1e-3)
    assert _chi_square_p(2.0, 30) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("criterion", CRITERIA)
def test_draws_follow_the_exponential_mechanism(criterion: str) -> None:
    """60,000 draws for one input on a 41-concept taxonomy: the empirical output distribution matches
    exp(eps * q / (2 * Delta)) normalised (chi-square over outputs with expected count >= 5, p > 0.001)."""
    tree = random_tree(5)
    d = Domains(tree, "single", "root")
    s = Sampler(d, criterion, _pool(99))
    ms = d.members(0)
    members = [int(m) for m in ms.members]
    x = members[len(members) // 2]
    eps = 3.0
    want = exponential(tree, criterion, x, members, ms.root, [int(t) for t in d.topic], eps)
    n = 60_000
    seen = Counter(s.draw(x, eps).node for _ in range(n))
    assert set(seen) <= set(members)
    big = [o for o in members if want[o] * n >= 5]
    small = [o for o in members if want[o] * n < 5]
    observed = [seen[o] for o in big] + ([sum(seen[o] for o in small)] if small else [])
    expected = [want[o] * n for o in big] + ([sum(want[o] for o in small) * n] if small else [])
    stat = sum((ob - ex) ** 2 / ex for ob, ex in zip(observed, expected))
    assert _chi_square_p(stat, len(observed) - 1) > 0.001, stat


@pytest.mark.parametrize("criterion", CRITERIA)
@pytest.mark.parametrize("eps", [0.1, 1.0, 7.5])
def test_neighbouring_inputs_stay_within_e_eps(criterion: str, eps: float) -> None:
    """For every pair of inputs of a domain and every output, the exact probabilities of the implemented sampler
    (integer weights) differ by at most e^eps x (1 + the documented float overrun); and the worst pair uses most
    of the budget (the bound is not vacuous)."""
    tree = random_tree(8, n=30)
    for mode in ("single", "category"):
        d = Domains(tree, mode) if mode == "category" else Domains(tree, "single", "root")
        s = Sampler(d, criterion, _pool(1))
        for t in range(len(d.names)):
            if d.size(t) < 2:
                continue
            members = [int(m) for m in d.members(t).members]
            dist = {x: s.output_probabilities(x, eps) for x in members}
            worst = max(math.log(dist[x][o] / dist[y][o]) for x in members for y in members for o in members)
            assert worst <= eps + overrun(eps) + 1e-12
            assert worst >= 0.3 * eps


def test_neighbouring_inputs_in_wordnet(kb_tree) -> None:  # fixture
    """In the real abstraction.n.06 domain (~40,000 concepts): for 30 random input pairs and 300 random outputs,
    the exact probability ratio stays within e^eps (plus the float overrun); the class of an output is found from
    its depth and its subsumer with each input."""
    tree = kb_tree
    d = Domains(tree, "single", "abstraction.n.06")
    ms = d.members(0)
    rng = random.Random(4)
    members = [int(m) for m in ms.members]
    eps = 2.0
    for criterion in CRITERIA:
        s = Sampler(d, criterion, _pool(2))

        def prob(x: int, o: int, s: Sampler = s, criterion: str = criterion) -> float:
            p = s.prepared(x)
            assert p is not None
            cls = p.classes
            w = np.diff(p.cum(eps), prepend=0)
            if criterion == "nsqc":
                k = 0 if o == x else len(cls.counts) - 1
            else:
                anc = set(tree.ancestors(o))
                a = max(i for i, n in enumerate(cls.chain) if n in anc)
                same = criterion == "sqc1" or d.topic[o] == d.topic[x]
                if same:
                    k = int(np.flatnonzero((cls.a == a) & (cls.h == int(tree.depth[o])) & (cls.kind == 0))[0])
                else:
                    k = int(np.flatnonzero(cls.kind == 3)[0])
            return float(w[k]) / float(p.cum(eps)[-1]) / int(cls.counts[k])

        worst = 0.0
        for _ in range(30):
            x, y = rng.sample(members, 2)
            for o in [*rng.sample(members, 300), x, y]:
                worst = max(worst, abs(math.log(prob(x, o) / prob(y, o))))
        assert worst <= eps + overrun(eps) + 1e-12, criterion


def test_float_bound_and_integer_weights() -> None:
    """The documented bound: overrun ~1e-13 at eps 1, still small at the largest allowed per-query epsilon; every
    integer weight is >= 1 there, so no output has probability zero; bad inputs are refused."""
    assert overrun(1.0) < 1e-13
    assert overrun(10.0) < 1e-11
    assert overrun(MAX_EPSILON) < 1e-2
    assert eta(1.0) > 0
    cum = integer_weights(np.array([1, 5, 1000], dtype=np.int64), np.array([1.0, 0.5, 0.0]), 1.0, MAX_EPSILON)
    assert int(np.diff(cum, prepend=0).min()) >= 1000
    with pytest.raises(ValueError):
        integer_weights(np.array([1]), np.array([1.0]), 1.0, 0.0)
    with pytest.raises(ValueError):
        integer_weights(np.array([1, 1]), np.array([1.0, -0.5]), 1.0, 1.0)  # a quality below max - Delta


def test_random_pool_is_uniform_and_exact() -> None:
    """below(n) never returns n or more, covers [0, n) evenly (rejection, no modulo), handles 1 and 2**64."""
    pool = _pool(3)
    draws = Counter(pool.below(3) for _ in range(30_000))
    assert set(draws) == {0, 1, 2}
    assert all(abs(v - 10_000) < 500 for v in draws.values())
    assert pool.below(1) == 0
    assert 0 <= pool.below(1 << 64) < 1 << 64
    with pytest.raises(ValueError):
        pool.below(0)
