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

* Eq. 4 between one user ``a`` and many users is one ``|a| x N`` matrix of eq. 3 (N: the queries of the others,
  in column blocks of at most :data:`BLOCK_CELLS` cells), reduced per user with ``np.minimum.reduceat`` /
  ``np.maximum.reduceat``: memory is bounded by the block, never users x users.
* Eq. 1-2 are computed once per pair of *distinct* strings (a query's string part is gathered from them). The
  word distances (normalised Levenshtein, rapidfuzz ``cdist`` on all cores) are rows "one word x the vocabulary",
  kept in a bounded LRU cache (:data:`WORD_CACHE_BYTES`): MDAV's average records reuse the log's frequent words.
  Both Hausdorff directions are then segment min/max over the words of each string.
* Missing values are encoded as :data:`MISSING` (outside [0, 1]) so that ``min(|x - y|, 1)`` gives the rule above
  in two array passes; everything is float32 (sums of at most 6 terms: ~1e-6 relative error), and the constant
  ``1/6`` of eq. 3 is applied after the min/max reductions, which it commutes with.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

Floats = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]
Ints = npt.NDArray[np.intp]

#: Upper bound on the cells of one working matrix (float32: 16 MiB); a few of them live at once.
BLOCK_CELLS = 1 << 22
#: Memory for cached word-distance rows (one row: a word against the whole vocabulary), and as much again for
#: domain-distance rows (a domain against all domains).
WORD_CACHE_BYTES = 64 << 20
#: Memory for cached query-string distance rows (eq. 1: a string against all the strings of the log or block).
STRING_CACHE_BYTES = 192 << 20
#: rapidfuzz threads for the word distances (-1: all cores); a parallel run sets 1 in each worker process.
THREADS = -1
#: Stand-in for a missing normalised value: ``min(|MISSING - x|, 1) = 1`` for x in [0, 1], 0 for two missing.
MISSING = 4.0


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


def normalise(values: Floats, bounds: tuple[float, float]) -> F32:
    """Min-max normalisation to [0, 1] (a constant attribute becomes 0); NaN (missing) becomes :data:`MISSING`."""
    low, high = bounds
    out = ((values - low) / (high - low) if high > low else np.zeros_like(values)).astype(np.float32)
    out[np.isnan(values)] = MISSING
    return out


@dataclass
class QuerySet:
    """Queries as parallel arrays: string id, normalised time and rank (:data:`MISSING`: none), domain id (-1)."""

    sid: Ints
    time: F32
    rank: F32
    dom: Ints


class RowCache:
    """Rows ``f(i)`` of a matrix too big to hold (``i`` an int id), computed in batches and kept in a bounded
    LRU cache."""

    def __init__(self, width: int, cache_bytes: int, compute: Callable[[Ints], F32]) -> None:
        self.width = width
        self.capacity = max(1, cache_bytes // (4 * max(1, width)))
        self.compute = compute
        self.cache: OrderedDict[int, F32] = OrderedDict()

    def rows(self, ids: Ints) -> F32:
        """A ``len(ids) x width`` float32 matrix."""
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


def word_rows(vocab: list[str], threads: int = -1) -> Callable[[Ints], F32]:
    """The normalised Levenshtein distances of some words of ``vocab`` to all of it (rapidfuzz ``cdist``)."""

    def compute(words: Ints) -> F32:
        rows: F32 = process.cdist(
            [vocab[w] for w in words.tolist()],
            vocab,
            scorer=Levenshtein.normalized_distance,
            dtype=np.float32,
            workers=threads,
        )
        return rows

    return compute


def _segments(ptr: Ints, items: Ints, ids: Ints) -> tuple[Ints, Ints]:
    """The items of ``ids`` in a CSR layout (``ptr``/``items``) concatenated, and where each id's run starts."""
    counts = ptr[ids + 1] - ptr[ids]
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.intp)
    index = np.repeat(ptr[ids] - starts, counts) + np.arange(int(counts.sum()), dtype=np.intp)
    return items[index], starts


def _reduce_rows(matrix: F32, idx: Ints, ufunc: np.ufunc) -> F32:
    """``ufunc`` over the rows ``idx[0, i], idx[1, i], ...`` of ``matrix``, for each column ``i`` of ``idx``."""
    acc: F32 = matrix[idx[0]]
    for j in range(1, len(idx)):
        ufunc(acc, matrix[idx[j]], out=acc)
    return acc


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
        others only generalised URLs of average records have (rows only). ``threads``: default :data:`THREADS`."""
        tokens = [s.lower().split() for s in strings]
        vocab: dict[str, int] = {}
        flat = [vocab.setdefault(w, len(vocab)) for ws in tokens for w in ws]
        self.nwords = np.array([len(ws) for ws in tokens], dtype=np.intp)
        self.ptr = np.concatenate([[0], np.cumsum(self.nwords)]).astype(np.intp)
        self.flat = np.array(flat, dtype=np.intp)
        self.length = normalise(self.nwords.astype(np.float64), words_bounds)
        self.words = RowCache(
            len(vocab), WORD_CACHE_BYTES, word_rows(list(vocab), THREADS if threads is None else threads)
        )
        self.strings = RowCache(len(strings), STRING_CACHE_BYTES, self._string_rows)
        self.groups = [
            (ids, words) for ids, words in self._by_size(np.arange(len(strings), dtype=np.intp)) if len(words)
        ]
        depth = max((len(d) for d in domains), default=0)
        label_ids: dict[str, int] = {}
        self.labels = np.full((len(domains), max(1, depth)), -1, dtype=np.int32)
        for i, d in enumerate(domains):
            self.labels[i, : len(d)] = [label_ids.setdefault(x, len(label_ids)) for x in d]
        self.dsize = np.array([len(d) for d in domains], dtype=np.intp)
        self.hosts = len(domains) if hosts is None else hosts
        self.domains = RowCache(self.hosts + 1, WORD_CACHE_BYTES, self._domain_rows)

    def clear(self) -> None:
        """Drop the cached rows (the caches refer back to this object: without this, a finished block's memory
        would wait for the cycle collector)."""
        for cache in (self.words, self.strings, self.domains):
            cache.cache.clear()

    # --- eq. 1-2: query strings ---

    def string_distance(self, a: Ints, b: Ints) -> F32:
        """``d_phi`` (eq. 1) between the strings ``a`` and ``b``: a ``len(a) x len(b)`` float32 matrix."""
        return np.take(self.strings.rows(a), b, axis=1)

    def _string_rows(self, a: Ints) -> F32:
        """``d_phi`` (eq. 1) of the strings ``a`` to every string."""
        full = self.nwords[a] > 0
        h = np.ones((len(a), len(self.nwords)), dtype=np.float32)  # an empty string: 1 to a non-empty one...
        h[np.ix_(~full, self.nwords == 0)] = 0.0  # ... and 0 to another
        if full.any():
            self._hausdorff(a[full], h, np.flatnonzero(full))
        h *= 2.0
        h += np.abs(self.length[a][:, None] - self.length[None, :])
        h /= 3.0
        return h

    def _by_size(self, strings: Ints, words: Ints | None = None) -> list[tuple[Ints, Ints]]:
        """The strings grouped by word count ``L``: positions in ``strings`` and an ``L x n`` matrix of word ids
        (or, given the sorted distinct ``words``, of positions in it)."""
        sizes = self.nwords[strings]
        order = np.argsort(sizes, kind="stable")
        groups = []
        for pos in np.split(order, np.flatnonzero(np.diff(sizes[order])) + 1):
            flat, _ = _segments(self.ptr, self.flat, strings[pos])
            if words is not None:
                flat = np.searchsorted(words, flat)
            groups.append((pos, np.ascontiguousarray(flat.reshape(len(pos), int(sizes[pos[0]])).T)))
        return groups

    def _hausdorff(self, a: Ints, out: F32, out_rows: Ints) -> None:
        """``d_H`` (eq. 2) of the non-empty strings ``a`` to every non-empty string, into ``out[out_rows]``.

        Strings are grouped by word count ``L`` (an ``L x n`` word matrix each), so every per-string min or max is
        ``L - 1`` element-wise passes over gathered rows or columns, in reused buffers; ``a`` in groups of about
        256 words."""
        order = np.concatenate([ids for ids, _ in self.groups])  # the non-empty strings, group after group
        a_step = max(1, 256 // max(1, int(self.nwords[a].max())))
        for alo in range(0, len(a), a_step):
            sa = a[alo : alo + a_step]
            words_a = np.unique(self.flat[np.concatenate([np.arange(self.ptr[s], self.ptr[s + 1]) for s in sa])])
            groups_a = self._by_size(sa, words_a)
            rows = self.words.rows(words_a)  # distinct words of sa x vocabulary
            # per vocabulary word, min over each a-string's words: for I_H(b, a)
            per_a = np.empty((len(sa), rows.shape[1]), dtype=np.float32)
            for pos_a, idx in groups_a:
                per_a[pos_a] = _reduce_rows(rows, idx, np.minimum)
            nw, na = len(words_a), len(sa)
            step = max(1, BLOCK_CELLS // (nw + na))
            buffers = np.empty(2 * (nw + na) * min(step, len(order)), dtype=np.float32)
            result = np.empty((na, len(order)), dtype=np.float32)
            col = 0
            for _, cols in self.groups:
                for lo in range(0, cols.shape[1], step):
                    part = cols[:, lo : lo + step]  # word j of each b-string: part[j]
                    n = part.shape[1]
                    per_word, word_j, i_ba, a_j = np.split(
                        buffers[: 2 * (nw + na) * n], [nw * n, 2 * nw * n, (2 * nw + na) * n]
                    )
                    per_word, word_j = per_word.reshape(nw, n), word_j.reshape(nw, n)
                    i_ba, a_j = i_ba.reshape(na, n), a_j.reshape(na, n)
                    # I_H(a, b): per word of a, min over the words of b; then max over each a-string's words
                    np.take(rows, part[0], axis=1, out=per_word, mode="clip")
                    # I_H(b, a): per word of b, min over the words of a; then max over each b-string's words
                    np.take(per_a, part[0], axis=1, out=i_ba, mode="clip")
                    for j in range(1, len(part)):
                        np.take(rows, part[j], axis=1, out=word_j, mode="clip")
                        np.minimum(per_word, word_j, out=per_word)
                        np.take(per_a, part[j], axis=1, out=a_j, mode="clip")
                        np.maximum(i_ba, a_j, out=i_ba)
                    for pos_a, idx in groups_a:
                        acc = _reduce_rows(per_word, idx, np.maximum)
                        result[pos_a, col : col + n] = np.maximum(acc, i_ba[pos_a], out=acc)
                    col += n
            out[np.ix_(out_rows[alo : alo + a_step], order)] = result

    # --- d_u: clicked domains ---

    def domain_rows(self, doms: Ints) -> F32:
        """``d_u`` of each of ``doms`` (-1: no URL) to every clicked domain, plus a last column for "no URL" (rows
        cached)."""
        return self.domains.rows(doms)

    def _domain_rows(self, doms: Ints) -> F32:
        """``d_u = 2^m / (2^(m+1) - 1) * sum_i [x_i != y_i] 2^-i`` (a label only one domain has differs; levels
        both lack are equal), one level at a time over ``len(doms) x`` all domains."""
        n = self.hosts
        out = np.ones((len(doms), n + 1), dtype=np.float32)
        out[doms < 0, n] = 0.0
        have = np.nonzero(doms >= 0)[0]
        if not len(have) or not n:
            return out
        la, sa = self.labels[doms[have]], self.dsize[doms[have]]
        depth = self.labels.shape[1]
        scale = (2.0 ** np.arange(depth + 1) / (2.0 ** np.arange(1, depth + 2) - 1.0)).astype(np.float32)  # by m
        step = max(1, BLOCK_CELLS // len(have))
        for lo in range(0, n, step):
            lb, sb = self.labels[lo : min(n, lo + step)], self.dsize[lo : min(n, lo + step)]
            total = np.zeros((len(have), len(sb)), dtype=np.float32)
            for i in range(depth):
                total += np.not_equal(la[:, i, None], lb[None, :, i]) * np.float32(2.0**-i)
            total *= scale[np.maximum(sa[:, None], sb[None, :]) - 1]
            out[have, lo : lo + len(sb)] = total
        return out

    # --- eq. 3-4 ---

    def query_distance(self, a: QuerySet, b: QuerySet) -> Floats:
        """``d_varphi`` (eq. 3) between every query of ``a`` and every query of ``b`` (for checks: unblocked)."""
        return self._six_times_eq3(self._rows_of(a), a, b).astype(np.float64) / 6.0

    def _rows_of(self, a: QuerySet) -> tuple[F32, Ints | None, F32, Ints | None]:
        """What eq. 3 needs of ``a`` whatever the other side: ``3 d_phi`` rows of its distinct strings and ``d_u``
        rows of its distinct domains, each with the row of every query of ``a`` (None: one row per query)."""

        def rows(ids: Ints) -> tuple[Ints, Ints | None]:
            distinct, inverse = np.unique(ids, return_inverse=True)
            inverse = inverse.reshape(-1)
            same = len(distinct) == len(inverse) and not np.any(inverse[1:] < inverse[:-1])
            return distinct, None if same else inverse

        strings, at_string = rows(a.sid)
        domains, at_domain = rows(a.dom)
        three = self.strings.rows(strings)
        three *= 3.0
        return three, at_string, self.domains.rows(domains), at_domain

    def _six_times_eq3(
        self, rows: tuple[F32, Ints | None, F32, Ints | None], a: QuerySet, b: QuerySet, work: F32 | None = None
    ) -> F32:
        """``6 * d_varphi``: ``len(a) x len(b)``, float32 (``rows``: :meth:`_rows_of` ``a``). ``work``: at least
        ``3 len(a) len(b)`` cells to compute in (fresh pages for every block cost a third more time)."""
        three, at_string, dom_rows, at_domain = rows
        m, n = len(a.sid), len(b.sid)
        if work is None:
            work = np.empty(3 * m * n, dtype=np.float32)
        d, tmp = work[: m * n].reshape(m, n), work[m * n : 2 * m * n].reshape(m, n)
        for table, at, cols, out in (
            (three, at_string, b.sid, d),
            (dom_rows, at_domain, np.where(b.dom < 0, self.hosts, b.dom), tmp),
        ):
            if at is None:
                np.take(table, cols, axis=1, out=out, mode="clip")
            else:
                distinct = work[2 * m * n : (2 * m + len(table)) * n].reshape(len(table), n)
                np.take(table, cols, axis=1, out=distinct, mode="clip")
                np.take(distinct, at, axis=0, out=out, mode="clip")
        d += tmp
        for x, y in ((a.time, b.time), (a.rank, b.rank)):
            np.subtract(x[:, None], y[None, :], out=tmp)
            np.abs(tmp, out=tmp)
            if m and n and max(x.max(), y.max()) > 1.0:  # a missing value: the distance caps at 1
                np.minimum(tmp, 1.0, out=tmp)
            d += tmp
        return d

    def user_distances(self, a: QuerySet, a_count: float, b: QuerySet, starts: Ints, counts: F32) -> Floats:
        """Eq. 4 between one user ``a`` (normalised query count ``a_count``) and the users whose queries are
        concatenated in ``b`` (user j's start at ``starts[j]``, normalised counts ``counts``), in column blocks."""
        users = len(starts)
        ends = np.append(starts[1:], len(b.sid))
        hausdorff = np.empty(users, dtype=np.float64)
        per_block = max(1, BLOCK_CELLS // max(1, len(a.sid)))
        rows = self._rows_of(a)
        widest = min(len(b.sid), per_block + (int((ends - starts).max()) if users else 0))  # a block's columns
        work = np.empty(3 * len(a.sid) * widest, dtype=np.float32)
        lo = 0
        while lo < users:
            hi = int(np.searchsorted(ends, starts[lo] + per_block, side="right"))
            hi = min(users, max(hi, lo + 1))
            q = slice(int(starts[lo]), int(ends[hi - 1]))
            part = QuerySet(b.sid[q], b.time[q], b.rank[q], b.dom[q])
            d = self._six_times_eq3(rows, a, part, work)
            local = starts[lo:hi] - starts[lo]
            i_ab = np.minimum.reduceat(d, local, axis=1).max(axis=0)
            i_ba = np.maximum.reduceat(d.min(axis=0), local)
            hausdorff[lo:hi] = np.maximum(i_ab, i_ba)
            lo = hi
        result: Floats = 0.5 * (np.abs(a_count - counts.astype(np.float64)) + hausdorff / 6.0)
        return result
