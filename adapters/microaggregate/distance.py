"""Paper 003's user distance (§3.2.1, eq. 1-4) over a whole log, vectorised with numpy and rapidfuzz.

Numeric parts (time, rank, queries per user, words per query) are min-max normalised over the log (the paper's
``norm``, shifted to [0, 1]: distances only see differences). Two readings of the paper, stated here:

* eq. 1: the text says the Hausdorff part weighs double the word-count part ("we consider more important the
  similarity of the string itself than the length"), so ``d_phi = (2 * d_H + |len1 - len2|) / 3``.
* ``d_u``: the paper calls it a weighted mean with weights ``2^(m-i)``; the weights are divided by their sum
  ``2^(m+1) - 1`` so that it is one (``www.a.com`` vs ``www.b.com``: label ``a`` differs, weight 2/7).

A missing time, rank or URL is at distance 0 from another missing one and 1 from any value; an empty query
(no words) likewise for the word part.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.intp]

#: Upper bound on the cells of one block of the word-level Hausdorff computation (memory stays bounded).
BLOCK_CELLS = 1 << 22


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
    """``d_u`` of two label tuples (right-most first); see the module note on the weights."""
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


def domain_matrix(domains: list[tuple[str, ...]]) -> Floats:
    """``d_u`` between all ``domains``, plus a last row and column for "no URL" (0 to itself, 1 to any)."""
    n = len(domains)
    out = np.ones((n + 1, n + 1), dtype=np.float64)
    out[n, n] = 0.0
    if not n:
        return out
    ids: dict[str, int] = {}
    depth = max(len(d) for d in domains)
    labels = np.full((n, depth), -1, dtype=np.intp)
    for i, d in enumerate(domains):
        labels[i, : len(d)] = [ids.setdefault(x, len(ids)) for x in d]
    sizes = np.array([len(d) for d in domains], dtype=np.intp)
    level = np.arange(depth, dtype=np.intp)
    step = max(1, (1 << 22) // max(1, n * depth))
    for lo in range(0, n, step):
        a, sa = labels[lo : lo + step], sizes[lo : lo + step]
        m = np.maximum(sa[:, None], sizes[None, :]) - 1  # block x n
        same = (a[:, None, :] == labels[None, :, :]) & (a[:, None, :] >= 0)
        weight = np.where(level[None, None, :] <= m[:, :, None], 2.0 ** (m[:, :, None] - level[None, None, :]), 0.0)
        out[lo : min(lo + step, n), :n] = (weight * ~same).sum(axis=2) / (2.0 ** (m + 1) - 1.0)
    return out


def word_hausdorff(a: list[str], b: list[str]) -> float:
    """``d_H`` of two word sets under the normalised Levenshtein distance (eq. 2); one-by-one, for checks."""
    if not a and not b:
        return 0.0
    if not a or not b:
        return 1.0
    d = process.cdist(a, b, scorer=Levenshtein.normalized_distance, dtype=np.float64)
    return float(max(d.min(axis=1).max(), d.min(axis=0).max()))


def _minmax(values: Floats) -> Floats:
    """Min-max normalisation to [0, 1], NaN (missing) kept; a constant attribute becomes 0."""
    if values.size == 0 or np.all(np.isnan(values)):
        return values.copy()
    low, high = float(np.nanmin(values)), float(np.nanmax(values))
    span = high - low
    return (values - low) / span if span > 0 else np.where(np.isnan(values), np.nan, 0.0)


def _missing_aware(a: Floats, b: Floats) -> Floats:
    """``|a - b|`` broadcast, with 0 for two missing values and 1 for one."""
    na, nb = np.isnan(a), np.isnan(b)
    d = np.abs(a - b)
    return np.where(na & nb, 0.0, np.where(na | nb, 1.0, d))


@dataclass
class QuerySet:
    """Queries as parallel arrays: string id, normalised time and rank (NaN: missing), domain id (-1: none)."""

    sid: Ints
    time: Floats
    rank: Floats
    dom: Ints


class LogSpace:
    """The strings, domains and normalisation of one log; distances between query sets and users."""

    def __init__(self, strings: list[str], domains: list[tuple[str, ...]]) -> None:
        words = [s.lower().split() for s in strings]
        vocab: dict[str, int] = {"": 0}  # index 0 only pads (a vocabulary is never empty)
        for ws in words:
            for w in ws:
                vocab.setdefault(w, len(vocab))
        width = max((len(ws) for ws in words), default=0) or 1
        self.words = np.full((len(strings), width), -1, dtype=np.intp)
        for i, ws in enumerate(words):
            self.words[i, : len(ws)] = [vocab[w] for w in ws]
        self.vocab = list(vocab)
        self.nwords = np.array([len(ws) for ws in words], dtype=np.intp)
        self.length = _minmax(np.array([len(ws) for ws in words], dtype=np.float64))
        self.dom_dist = domain_matrix(domains)

    def string_distance(self, a: Ints, b: Ints) -> Floats:
        """``d_phi`` (eq. 1) between the strings ``a`` and ``b``: a len(a) x len(b) matrix.

        The word distances of the words of ``a`` to the whole vocabulary are computed once (rapidfuzz, a few
        rows: memory never grows with the square of the vocabulary); each direction of the Hausdorff distance is
        then a gather over the (padded) words of ``b`` and a masked min/max."""
        wa = self.words[a]
        words_a, slot = np.unique(wa[wa >= 0], return_inverse=True)
        rows = process.cdist(
            [self.vocab[w] for w in words_a.tolist()],
            self.vocab,
            scorer=Levenshtein.normalized_distance,
            dtype=np.float32,  # half the memory traffic of the gathers below; sums are done in float64
            workers=-1,
        ).reshape(len(words_a), len(self.vocab))  # distinct words of a x vocabulary
        # min over each a-string's words, per vocabulary word: for I_H(b, a)
        per_a = np.full((len(a), rows.shape[1]), np.inf, dtype=np.float32)
        where = np.nonzero(wa >= 0)  # row-major: the words of one a-string are adjacent
        filled, starts = np.unique(where[0], return_index=True)
        if len(filled):
            per_a[filled] = np.minimum.reduceat(rows[slot.reshape(-1)], starts, axis=0)
        slots = np.full((len(a), self.words.shape[1]), -1, dtype=np.intp)
        slots[where] = slot.reshape(-1)
        empty_a = self.nwords[a] == 0
        out = np.empty((len(a), len(b)), dtype=np.float64)
        step = max(1, BLOCK_CELLS // max(1, (len(a) + len(words_a)) * max(1, int(self.nwords.mean()))))
        for lo in range(0, len(b), step):
            sb = b[lo : lo + step]
            full = np.nonzero(self.nwords[sb] > 0)[0]  # the b strings with words: segments of the flat word list
            h = np.where(empty_a[:, None], 0.0, 1.0) * np.ones((1, len(sb)))  # empty b strings
            if len(full):
                counts = self.nwords[sb[full]]
                seg = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.intp)
                flat = self.words[np.repeat(sb[full], counts), np.arange(int(counts.sum())) - np.repeat(seg, counts)]
                # I_H(a, b): per word of a, min over the words of b; then max over each a-string's words
                per_word = np.minimum.reduceat(rows[:, flat], seg, axis=1)  # words_a x full
                padded = np.vstack([per_word, np.full((1, len(full)), -np.inf, dtype=np.float32)])
                i_ab = padded[slots].max(axis=1)  # a x full (slot -1: the -inf row)
                # I_H(b, a): per word of b, min over the words of a; then max over each b-string's words
                i_ba = np.maximum.reduceat(per_a[:, flat], seg, axis=1)
                hf = np.maximum(i_ab, i_ba).astype(np.float64)
                h[:, full] = np.where(np.isinf(hf), 1.0, hf)  # an empty a string against words: 1
            lengths = np.abs(self.length[a][:, None] - self.length[sb][None, :])
            out[:, lo : lo + step] = (2.0 * h + lengths) / 3.0
        return out

    def query_distance(self, a: QuerySet, b: QuerySet) -> Floats:
        """``d_varphi`` (eq. 3) between every query of ``a`` and every query of ``b``."""
        ua, ia = np.unique(a.sid, return_inverse=True)
        ub, ib = np.unique(b.sid, return_inverse=True)
        strings = self.string_distance(ua, ub)[ia.reshape(-1)[:, None], ib.reshape(-1)[None, :]]
        missing = self.dom_dist.shape[0] - 1
        da = np.where(a.dom < 0, missing, a.dom)
        db = np.where(b.dom < 0, missing, b.dom)
        return (
            _missing_aware(a.time[:, None], b.time[None, :])
            + _missing_aware(a.rank[:, None], b.rank[None, :])
            + self.dom_dist[da[:, None], db[None, :]]
            + 3.0 * strings
        ) / 6.0

    def user_distances(self, a: QuerySet, a_count: float, b: QuerySet, starts: Ints, counts: Floats) -> Floats:
        """Eq. 4 between one user ``a`` (normalised query count ``a_count``) and the users whose queries are
        concatenated in ``b`` (user j's start at ``starts[j]``, normalised counts ``counts``)."""
        d = self.query_distance(a, b)
        i_ab = np.minimum.reduceat(d, starts, axis=1).max(axis=0)
        i_ba = np.maximum.reduceat(d.min(axis=0), starts)
        result: Floats = 0.5 * (np.abs(a_count - counts) + np.maximum(i_ab, i_ba))
        return result
