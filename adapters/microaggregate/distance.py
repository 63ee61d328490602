"""Paper 003's user distance (§3.2.1, eq. 1-4), exact, vectorised with numpy and rapidfuzz.

Numeric parts (time, rank, queries per user, words per query) are min-max normalised over the *whole* log (the
paper's ``norm``, shifted to [0, 1]: distances only see differences; a blocked run passes the whole log's
:class:`~adapters.microaggregate.log.Bounds` to every block, so blocking never changes a distance). Readings of
the paper, stated here:

* eq. 1 as printed weighs the word-count term double (``(2 |len1 - len2| + d_H) / 3``) while the prose beside it
  says the opposite: "the Hausdorff distance has more weight than the distance between number of [terms] (double
  weight) ... because we consider more important the similarity of the string itself than the length". We follow
  the prose, ``d_phi = (2 * d_H + |len1 - len2|) / 3``: the prose gives the reason, it agrees with eq. 3 (where
  the string part prevails), and with the printed form two single-word queries ``cat`` and ``zebra`` would be
  closer (1/3) than ``cat`` and ``cat food`` (up to 2/3).
* ``d_u``: the paper calls it a weighted mean with weights ``2^(m-i)``; the weights are divided by their sum
  ``2^(m+1) - 1`` so that it is one (``www.a.com`` vs ``www.b.com``: label ``a`` differs, weight 2/7).
* A missing time, rank or URL is at distance 0 from another missing one and 1 from any value; an empty query
  (no words) likewise for the Hausdorff part.

How it is fast while exact (no term is approximated):

* Eq. 4 between one user ``a`` and many users is, per block of whole users (at most :data:`BLOCK_CELLS` cells),
  one ``|a| x N`` matrix of eq. 3 reduced per user with ``np.minimum.reduceat`` / ``np.maximum.reduceat``:
  memory is bounded by the block, never users x users. Blocks run on a thread per core (numpy computes without
  the GIL; each block writes its own users' slots, so threads never change a result).
* The string and domain part of eq. 3 depends only on the pair (string, domain) of each query: it is gathered once
  per distinct pair of ``a`` and block column, then spread to ``a``'s queries; the rank term is skipped (or is one
  row or column) where a side has no rank at all (most AOL lines), since it then adds exactly 0 (or 1).
* Eq. 1-2 (:mod:`~adapters.microaggregate.wordsets`) and ``d_u`` (:mod:`~adapters.microaggregate.domains`) are rows
  per distinct string or domain, cached, and computed only against the strings and domains of the users still
  measured (MDAV's remaining users only shrink, so a cached row stays valid; another set drops the cache).
* Missing values are encoded as :data:`MISSING` (outside [0, 1]) so that ``min(|x - y|, 1)`` gives the rule above
  in two array passes; everything is float32 (sums of at most 6 terms: ~1e-6 relative error) and every cell is
  the same float32 sum in the same order as a plain reading would compute (``(3 d_phi + d_u) + d_t + d_r``), so a
  change of blocks or caches never changes a result; the constant ``1/6`` of eq. 3 is applied after the min/max
  reductions, which it commutes with.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from adapters.microaggregate.domains import DomainSpace
from adapters.microaggregate.normalised import MISSING, normalise
from adapters.microaggregate.wordsets import StringSpace, run_all

__all__ = ["MISSING", "LogSpace", "QuerySet", "domain_distance", "host_labels", "normalise", "word_hausdorff"]

Floats = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]
Ints = npt.NDArray[np.intp]

#: Upper bound on the cells of one working matrix (float32: 1 MiB, so that the few of them a block uses stay in
#: the CPU's cache; bigger blocks spend their time waiting for memory).
BLOCK_CELLS = 1 << 20
#: Memory for cached word-distance rows (one row: a word against the whole vocabulary), and as much again for
#: domain-distance rows (a domain against all domains).
WORD_CACHE_BYTES = 64 << 20
#: Memory for cached query-string distance rows (eq. 1: a string against all the strings of the log or block).
STRING_CACHE_BYTES = 192 << 20
#: rapidfuzz threads for the word distances (-1: all cores); a parallel run sets 1 in each worker process.
THREADS = -1


def host_labels(url: str) -> tuple[str, ...]:
    """The domain labels of a clicked URL, right-most first, lower case (``http://www.a.com/x`` -> com, a, www)."""
    text = url.strip().lower()
    if "://" in text:
        text = text.split("://", 1)[1]
    for cut in "/?#":
        text = text.split(cut, 1)[0]
    text = text.rsplit("@", 1)[-1].split(":", 1)[0]
    return tuple(reversed([label for label in text.split(".") if label]))


def domain_distance(x: tuple[str, ...], y: tuple[str, ...]) -> float:
    """``d_u`` of two label tuples (right-most first); see the module note on the weights. One pair, for checks."""
    if not x and not y:
        return 0.0
    if not x or not y:
        return 1.0
    m = max(len(x), len(y)) - 1
    total = 0.0
    for i in range(m + 1):
        same = i < len(x) and i < len(y) and x[i] == y[i]
        total += 0.0 if same else 2.0 ** (m - i)
    return total / (2.0 ** (m + 1) - 1.0)


def word_hausdorff(a: list[str], b: list[str]) -> float:
    """``d_H`` of two word sets under the normalised Levenshtein distance (eq. 2); one pair, for checks."""
    if not a and not b:
        return 0.0
    if not a or not b:
        return 1.0
    d = process.cdist(a, b, scorer=Levenshtein.normalized_distance, dtype=np.float64)
    return float(max(d.min(axis=1).max(), d.min(axis=0).max()))


@dataclass
class QuerySet:
    """Queries as parallel arrays: string id, normalised time and rank (:data:`MISSING`: none), domain id (-1)."""

    sid: Ints
    time: F32
    rank: F32
    dom: Ints


@dataclass
class Prepared:
    """What eq. 3 needs of one side ``a`` whatever the other: ``3 d_phi`` rows of its distinct strings and ``d_u``
    rows of its distinct domains, the string and domain row of each distinct (string, domain) pair of its queries,
    each query's pair (None: one pair per query, in order), and which queries have a rank."""

    three: F32
    dom: F32
    pair_string: Ints
    pair_dom: Ints
    pair: Ints | None
    ranked: npt.NDArray[np.bool_]


class LogSpace:
    """The distinct strings and domains of one log (or block): eq. 1-4 between query sets and users."""

    def __init__(
        self,
        strings: list[str],
        domains: list[tuple[str, ...]],
        words_bounds: tuple[float, float],
        threads: int | None = None,
        hosts: int | None = None,
    ) -> None:
        """``domains[:hosts]`` are the ones queries click (the columns of :meth:`domain_rows`, default: all); the
        others only generalised URLs of average records have (rows only). ``threads``: default :data:`THREADS`
        (-1: one per core), for the word distances and the blocks of eq. 3-4 (numpy computes without the GIL)."""
        threads = THREADS if threads is None else threads
        self.text = StringSpace(strings, words_bounds, threads, WORD_CACHE_BYTES, STRING_CACHE_BYTES, BLOCK_CELLS)
        self.workers = self.text.workers
        self.hosts = len(domains) if hosts is None else hosts
        self.ndomains = len(domains)
        self.domains = DomainSpace(domains, self.hosts, WORD_CACHE_BYTES, BLOCK_CELLS, self.workers)

    def clear(self) -> None:
        """Drop the cached rows (a finished block's memory is freed at once)."""
        self.text.clear()
        self.domains.rows.clear()

    def _columns(self, b: QuerySet) -> None:
        """Make the strings and clicked domains of ``b`` the live columns of the rows (see the module note)."""
        strings = np.zeros(len(self.text.nwords), dtype=bool)
        strings[b.sid] = True
        self.text.restrict(strings)
        hosts = np.zeros(self.hosts, dtype=bool)
        hosts[b.dom[b.dom >= 0]] = True
        self.domains.restrict(hosts)

    # --- eq. 1-2 and d_u, for checks ---

    def string_distance(self, a: Ints, b: Ints) -> F32:
        """``d_phi`` (eq. 1) between the strings ``a`` and ``b``: a ``len(a) x len(b)`` float32 matrix."""
        mask = np.zeros(len(self.text.nwords), dtype=bool)
        mask[b] = True
        self.text.restrict(mask)
        return np.take(self.text.rows.rows(a), b, axis=1)

    def domain_rows(self, doms: Ints) -> F32:
        """``d_u`` of each of ``doms`` (-1: no URL) to every clicked domain, plus a last column for "no URL"."""
        self.domains.restrict(np.ones(self.hosts, dtype=bool))
        return self.domains.rows.rows(doms)

    # --- eq. 3-4 ---

    def query_distance(self, a: QuerySet, b: QuerySet) -> Floats:
        """``d_varphi`` (eq. 3) between every query of ``a`` and every query of ``b`` (for checks: unblocked)."""
        self._columns(b)
        return self._six_times_eq3(self._prepare(a), a, b).astype(np.float64) / 6.0

    def _prepare(self, a: QuerySet) -> Prepared:
        """:class:`Prepared` for ``a`` (rows of the live columns: call :meth:`_columns` first)."""
        width = self.ndomains + 1
        key = a.sid.astype(np.int64) * width + (a.dom + 1)
        pairs, inverse = np.unique(key, return_inverse=True)
        inverse = inverse.reshape(-1).astype(np.intp)
        same = len(pairs) == len(key) and not np.any(inverse[1:] < inverse[:-1])
        strings, pair_string = np.unique(pairs // width, return_inverse=True)
        doms, pair_dom = np.unique(pairs % width - 1, return_inverse=True)
        three = self.text.rows.rows(strings.astype(np.intp))
        three *= 3.0
        dom = self.domains.rows.rows(doms.astype(np.intp))
        return Prepared(
            three,
            dom,
            pair_string.reshape(-1).astype(np.intp),
            pair_dom.reshape(-1).astype(np.intp),
            None if same else inverse,
            a.rank != MISSING,
        )

    @staticmethod
    def work_cells(prep: Prepared, m: int) -> int:
        """The cells of ``work`` :meth:`_six_times_eq3` needs per column of ``b`` (``m``: queries of ``a``)."""
        return len(prep.three) + len(prep.dom) + 2 * len(prep.pair_string) + 2 * m

    def _six_times_eq3(self, prep: Prepared, a: QuerySet, b: QuerySet, work: F32 | None = None) -> F32:
        """``6 * d_varphi``: ``len(a) x len(b)``, float32 (``prep``: :meth:`_prepare` ``a``). ``work``: at least
        :meth:`work_cells` ``x len(b)`` cells to compute in.

        Each cell is ``((3 d_phi + d_u) + d_t) + d_r`` as in eq. 3: the first two are gathered per distinct string
        and domain of ``a`` (a gather across columns: the slow kind), then per distinct pair (whole rows)."""
        m, n = len(a.sid), len(b.sid)
        ns, nd, p = len(prep.three), len(prep.dom), len(prep.pair_string)
        if work is None:
            work = np.empty(self.work_cells(prep, m) * n, dtype=np.float32)
        views, at = [], 0
        for rows in (ns, nd, p, p, m, m):
            views.append(work[at : at + rows * n].reshape(rows, n))
            at += rows * n
        strings, doms, pairs, pairs_dom, d, tmp = views
        np.take(prep.three, b.sid, axis=1, out=strings, mode="clip")
        np.take(prep.dom, np.where(b.dom < 0, self.hosts, b.dom), axis=1, out=doms, mode="clip")
        np.take(strings, prep.pair_string, axis=0, out=pairs, mode="clip")
        np.take(doms, prep.pair_dom, axis=0, out=pairs_dom, mode="clip")
        pairs += pairs_dom  # 3 d_phi + d_u, per distinct pair of a
        if prep.pair is None:
            d = pairs
        else:
            np.take(pairs, prep.pair, axis=0, out=d, mode="clip")
        np.subtract(a.time[:, None], b.time[None, :], out=tmp)
        np.abs(tmp, out=tmp)
        if m and n and max(a.time.max(), b.time.max()) > 1.0:  # a missing value: the distance caps at 1
            np.minimum(tmp, 1.0, out=tmp)
        d += tmp
        ranked_b = b.rank != MISSING
        if not prep.ranked.any():  # min(|MISSING - y|, 1): 1 for a rank, 0 for none
            if ranked_b.any():
                d += ranked_b.astype(np.float32)[None, :]
        elif not ranked_b.any():
            d += prep.ranked.astype(np.float32)[:, None]
        else:
            np.subtract(a.rank[:, None], b.rank[None, :], out=tmp)
            np.abs(tmp, out=tmp)
            if not (prep.ranked.all() and ranked_b.all()):
                np.minimum(tmp, 1.0, out=tmp)
            d += tmp
        return d

    def user_distances(self, a: QuerySet, a_count: float, b: QuerySet, starts: Ints, counts: F32) -> Floats:
        """Eq. 4 between one user ``a`` (normalised query count ``a_count``) and the users whose queries are
        concatenated in ``b`` (user j's start at ``starts[j]``, normalised counts ``counts``), in blocks of users
        (on :attr:`workers` threads, each block's result in its own slots: the same whatever the threads)."""
        self._columns(b)
        users = len(starts)
        ends = np.append(starts[1:], len(b.sid))
        hausdorff = np.empty(users, dtype=np.float64)
        per_block = max(1, BLOCK_CELLS // max(1, len(a.sid)))
        widest = min(len(b.sid), per_block + (int((ends - starts).max()) if users else 0))  # a block's queries
        spans = []
        lo = 0
        while lo < users:
            hi = int(np.searchsorted(ends, starts[lo] + per_block, side="right"))
            spans.append((lo, min(users, max(hi, lo + 1))))
            lo = spans[-1][1]
        prep = self._prepare(a)
        buffers = threading.local()

        def run(span: tuple[int, int]) -> None:
            lo, hi = span
            work = getattr(buffers, "work", None)
            if work is None:
                work = buffers.work = np.empty(self.work_cells(prep, len(a.sid)) * widest, dtype=np.float32)
            q = slice(int(starts[lo]), int(ends[hi - 1]))
            d = self._six_times_eq3(prep, a, QuerySet(b.sid[q], b.time[q], b.rank[q], b.dom[q]), work)
            local = starts[lo:hi] - starts[lo]
            i_ab = np.minimum.reduceat(d, local, axis=1).max(axis=0)
            i_ba = np.maximum.reduceat(d.min(axis=0), local)
            hausdorff[lo:hi] = np.maximum(i_ab, i_ba)

        run_all(run, spans, self.workers)
        result: Floats = 0.5 * (np.abs(a_count - counts.astype(np.float64)) + hausdorff / 6.0)
        return result
