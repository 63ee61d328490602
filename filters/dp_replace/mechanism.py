"""The exponential mechanism over classes: integer weights, an exact draw, and its floating-point bound.

Paper 004 eq. 2: ``Pr(o) ~ exp(eps * u(c, o) / (2 * Delta))``. With the most
similar output the input itself (``u(c, c) = max u = 1`` for every criterion),
each candidate's weight is ``m(o) = exp(-eps * (1 - u(c, o)) / (2 * Delta))``,
a number in ``[exp(-eps/2), 1]`` because ``1 - u <= Delta``.

**How a class is drawn (exact given the weights).** Each class ``k`` (``n_k``
candidates of equal quality ``u_k``, see :mod:`.classes`) gets the integer
weight ``W_k = n_k * w_k`` with ``w_k = floor(2**46 * m_k)``, ``m_k`` evaluated in
float64. One integer ``r`` is drawn uniformly from ``[0, sum W)`` by rejection
from the CSPRNG (:mod:`.rand`); the class is the first whose running integer sum
exceeds ``r``, and the member is ``(r - start_k) // w_k``: each of the class's
``n_k`` members owns exactly ``w_k`` values of ``r``, so the member is exactly
uniform within its class, and every output ``o`` has probability exactly
``w(o) / sum W``. Integer sums, integer comparisons, a rejection-sampled integer:
no floating-point CDF, no floating-point uniform variate, no output whose
probability rounds to zero (every ``w_k >= 1``, enforced by ``eps <=
MAX_EPSILON``). The one approximation is ``floor(2**46 * m_k)`` itself.

**The bound.** Let ``w(o) = floor(2**46 * fl(exp(-fl(x_o))))`` be what the code
uses and ``m(o)`` the exact weight for the same (floating-point) qualities.
Then ``w(o) = 2**46 * m(o) * (1 + e_o)`` with::

    |e_o| <= eta(eps) = 2**-46 * exp(eps/2)      (the floor: at most 1 in 2**46 * m, m >= exp(-eps/2))
                      + (eps/2) * 3 * 2**-53     (the float products giving x <= eps/2, 3 roundings)
                      + 2**-50                   (exp, allowing 4 ulps)

and the realised probabilities ``P(o) = w(o) / sum w`` differ from the ideal
ones by at most a factor ``(1 + eta)/(1 - eta)`` each way in the numerator and
in the normaliser. For neighbouring inputs ``c, c'`` and every output ``o``:
``P_c(o) / P_c'(o) <= exp(eps) * ((1 + eta)/(1 - eta))**2``, i.e. the mechanism
is ``eps + overrun(eps)``-DP with ``overrun = 2 * ln((1 + eta)/(1 - eta))``
(:func:`overrun`): 9.8e-14 at eps = 1, 8.4e-12 at eps = 10 (per query), 4.1e-3 at
the largest allowed per-query epsilon (``MAX_EPSILON`` = 50, where the mechanism
already returns the input almost surely). The budget ledger accounts the nominal
eps; the overrun is reported by ``querylog bench dp`` and in the filter's stats.
The integer sums stay below ``2**63`` because every domain has fewer than
``2**17`` concepts (WordNet: 82,115 nouns).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from filters.dp_replace.classes import Classes, TopicIndex

SCALE_BITS = 46
MAX_EPSILON = 50.0  # per query: keeps every integer weight >= 1 (2**46 * exp(-25) ~ 977)
MAX_CANDIDATES = 1 << 17


def eta(eps: float) -> float:
    """The relative error bound of one integer weight (module docstring)."""
    return 2.0**-SCALE_BITS * math.exp(eps / 2.0) + (eps / 2.0) * 3.0 * 2.0**-53 + 2.0**-50


def overrun(eps: float) -> float:
    """How much more than ``eps`` the implemented mechanism may leak per query (natural log)."""
    e = eta(eps)
    return 2.0 * math.log((1.0 + e) / (1.0 - e))


def integer_weights(
    counts: npt.NDArray[np.int64], quality: npt.NDArray[np.float64], delta: float, eps: float
) -> npt.NDArray[np.int64]:
    """Running sums of ``n_k * floor(2**46 * exp(-eps * (1 - u_k) / (2 * delta)))``."""
    if not 0.0 < eps <= MAX_EPSILON:
        raise ValueError(f"per-query epsilon must be in (0, {MAX_EPSILON}]")
    if delta <= 0.0:
        raise ValueError("the sensitivity must be > 0 (a single-concept domain has no mechanism)")
    x = eps * (1.0 - quality) / (2.0 * delta)
    if float(x.max(initial=0.0)) > eps / 2.0 * (1.0 + 1e-9):
        raise ValueError("a quality below max - Delta: the sensitivity does not cover this domain")
    w = np.floor(np.ldexp(np.exp(-x), SCALE_BITS)).astype(np.int64)
    cum: npt.NDArray[np.int64] = np.cumsum(counts * w)
    return cum


class Prepared:
    """One input's classes, ready to draw from: running integer weights per per-query epsilon (a few kept),
    and, per class, where its members are (a run of a sorted list with at most one hole, found on first use)."""

    __slots__ = ("classes", "cums", "delta", "last", "runs", "sizes", "topic", "topics")

    def __init__(self, classes: Classes, delta: float, topics: TopicIndex | None = None, topic: int = -1) -> None:
        self.classes = classes
        self.delta = delta
        self.topics = topics
        self.topic = topic
        self.sizes: list[int] = classes.counts.tolist()
        self.cums: dict[float, tuple[list[int], list[int]]] = {}
        self.last: tuple[float, tuple[list[int], list[int]]] | None = None
        self.runs: list[tuple[list[int], int, int, int] | None] = [None] * len(self.sizes)

    def cum(self, eps: float) -> list[int]:
        """Running integer weights for per-query ``eps`` (Python ints: exact, and fast to bisect)."""
        return self.tables(eps)[0]

    def tables(self, eps: float) -> tuple[list[int], list[int]]:
        """(running integer weights ``W``, per-member weights ``w``) for per-query ``eps``: class ``k`` holds
        ``W[k] - W[k-1] = sizes[k] * w[k]``."""
        last = self.last
        if last is not None and last[0] == eps:
            return last[1]
        t = self.cums.get(eps)
        if t is None:
            if len(self.cums) >= 8:
                self.cums.clear()
            cum = integer_weights(self.classes.counts, self.classes.quality, self.delta, eps)
            w = np.diff(cum, prepend=0) // self.classes.counts
            t = self.cums[eps] = (cum.tolist(), w.tolist())
        self.last = (eps, t)
        return t

    def draw(self, below: Callable[[int], int], eps: float) -> int:
        """One output: ``r = below(W[-1])``, a uniform integer in ``[0, W[-1])``, gives the class ``k`` with
        ``W[k-1] <= r < W[k]``, then member ``(r - W[k-1]) // w[k]``. Both exact: class ``k`` has
        ``sizes[k] * w[k]`` values of ``r``, each member exactly ``w[k]`` of them, so one uniform integer gives
        the class with probability ``W_k / sum W`` and, within it, a uniform member."""
        cum, w = self.tables(eps)
        r = below(cum[-1])
        k = bisect_right(cum, r)
        return self.member(k, (r - (cum[k - 1] if k else 0)) // w[k])

    def member(self, k: int, j: int) -> int:
        """The ``j``-th member (in id order) of class ``k``."""
        run = self.runs[k]
        if run is None:
            run = self.runs[k] = self._locate(k)
        arr, lo, left, hi2 = run
        return arr[lo + j if j < left else hi2 + j - left]

    def _locate(self, k: int) -> tuple[list[int], int, int, int]:
        """Class ``k``'s run: (sorted member list, start, length before the hole, end of the hole)."""
        cls = self.classes
        kind = int(cls.kind[k])
        if kind == 0:
            return cls.members.ring_run(cls.chain, int(cls.a[k]), int(cls.h[k]))
        if kind == 1:
            return [cls.node], 0, 1, 1
        if kind == 2:
            pos = int(cls.domain.members.searchsorted(cls.node))
            return cls.domain.members_list(), 0, pos, pos + 1
        if self.topics is None:
            raise ValueError("SQC2 needs its topic index")
        lo, hi = self.topics.block(self.topic)
        return self.topics.sorted_list(), 0, lo, hi


def probabilities(prepared: Prepared, eps: float) -> npt.NDArray[np.float64]:
    """The exact probability of each *class* under the implemented sampler (for tests and audits)."""
    cum = prepared.cum(eps)
    w = np.diff(np.array(cum, dtype=np.int64), prepend=0).astype(np.float64)
    out: npt.NDArray[np.float64] = w / float(cum[-1])
    return out


def ideal_probabilities(classes: Classes, delta: float, eps: float) -> npt.NDArray[np.float64]:
    """The ideal (real-arithmetic, here float64) class probabilities of the exponential mechanism."""
    logw = np.log(classes.counts.astype(np.float64)) + eps * classes.quality / (2.0 * delta)
    logw -= logw.max()
    p = np.exp(logw)
    out: npt.NDArray[np.float64] = p / p.sum()
    return out


def float_bound_ok(eps: float) -> bool:
    """The per-query epsilon keeps every integer weight >= 1."""
    return 0.0 < eps <= MAX_EPSILON and math.ldexp(math.exp(-eps / 2.0), SCALE_BITS) >= 1.0
