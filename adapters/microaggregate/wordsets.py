"""Eq. 1-2 of paper 003 between the distinct query strings of a log: ``d_phi`` of a string to the others.

A row (one string against the others) is computed once and cached (:class:`~.rowcache.RowCache`), and only for the
*live* strings, those the caller will still read (:meth:`StringSpace.restrict`): MDAV's remaining users' strings
only shrink, so a row computed for a bigger set stays valid and a new one costs less as users are placed. The word
distances (normalised Levenshtein, rapidfuzz ``cdist`` on all cores) are rows "one word x the live vocabulary",
cached the same way: MDAV's average records reuse the log's frequent words. Both Hausdorff directions are then
segment min/max over the words of each string, in cache-sized column blocks. Every value is computed exactly as a
whole-row computation would (the same float32 operations on the same operands).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import numpy as np
import numpy.typing as npt
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein

from adapters.microaggregate.normalised import normalise
from adapters.microaggregate.rowcache import RowCache

T = TypeVar("T")
F32 = npt.NDArray[np.float32]
Ints = npt.NDArray[np.intp]
Bools = npt.NDArray[np.bool_]


def run_all(run: Callable[[T], None], tasks: Sequence[T], workers: int) -> None:
    """``run`` on every task, on up to ``workers`` threads (numpy computes without the GIL); each task writes
    its own part of the result, so the result does not depend on the threads."""
    if workers > 1 and len(tasks) > 1:
        with ThreadPoolExecutor(min(workers, len(tasks)), thread_name_prefix="microaggregate") as pool:
            list(pool.map(run, tasks))
    else:
        for task in tasks:
            run(task)


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


class StringSpace:
    """The distinct strings of one log (or block) and their ``d_phi`` rows (eq. 1), cached."""

    def __init__(
        self,
        strings: list[str],
        words_bounds: tuple[float, float],
        threads: int,
        word_cache_bytes: int,
        string_cache_bytes: int,
        block_cells: int,
    ) -> None:
        """``threads``: rapidfuzz's; ``block_cells``: the most cells of one working matrix."""
        tokens = [s.lower().split() for s in strings]
        vocab: dict[str, int] = {}
        flat = [vocab.setdefault(w, len(vocab)) for ws in tokens for w in ws]
        self.vocab = list(vocab)
        self.nwords = np.array([len(ws) for ws in tokens], dtype=np.intp)
        self.ptr = np.concatenate([[0], np.cumsum(self.nwords)]).astype(np.intp)
        self.flat = np.array(flat, dtype=np.intp)
        self.owner = np.repeat(np.arange(len(strings), dtype=np.intp), self.nwords)  # the string of each word
        self.length = normalise(self.nwords.astype(np.float64), words_bounds)
        self.threads = threads
        self.workers = (os.cpu_count() or 1) if threads < 0 else max(1, threads)
        self.block_cells = block_cells
        self.words = RowCache(len(vocab), word_cache_bytes, self._word_rows)
        self.rows = RowCache(len(strings), string_cache_bytes, self._string_rows)
        self.live: Ints = np.arange(len(strings), dtype=np.intp)
        self.live_mask: Bools | None = None  # None: every string
        self.live_words: Ints | None = None  # None: every word
        self.live_vocab = self.vocab
        self.groups = self._groups(self.live)

    def restrict(self, mask: Bools) -> None:
        """From now on only the strings of ``mask`` are read from the rows (their columns); rows computed from
        here on are computed there only. Cached rows of a superset stay; for another set they are dropped."""
        if self.live_mask is not None and np.array_equal(mask, self.live_mask):
            return
        if self.live_mask is not None and bool(np.any(mask & ~self.live_mask)):
            self.clear()
        self.live_mask = mask.copy()
        self.live = np.flatnonzero(mask)
        words = np.zeros(len(self.vocab), dtype=bool)
        words[self.flat[mask[self.owner]]] = True
        self.live_words = np.flatnonzero(words)
        self.live_vocab = [self.vocab[w] for w in self.live_words.tolist()]
        self.groups = self._groups(self.live)

    def clear(self) -> None:
        """Drop the cached rows."""
        self.rows.clear()
        self.words.clear()

    def _groups(self, strings: Ints) -> list[tuple[Ints, Ints]]:
        """The non-empty ones of ``strings`` by word count ``L``: their ids and an ``L x n`` matrix of word ids."""
        return [(strings[pos], words) for pos, words in self._by_size(strings) if len(words)]

    def _word_rows(self, words: Ints) -> F32:
        """The normalised Levenshtein distances of ``words`` to the live vocabulary (1 elsewhere)."""
        rows: F32 = process.cdist(
            [self.vocab[w] for w in words.tolist()],
            self.live_vocab,
            scorer=Levenshtein.normalized_distance,
            dtype=np.float32,
            workers=self.threads,
        )
        if self.live_words is None:
            return rows
        out = np.ones((len(words), len(self.vocab)), dtype=np.float32)
        out[:, self.live_words] = rows
        return out

    def _string_rows(self, a: Ints) -> F32:
        """``d_phi`` (eq. 1) of the strings ``a`` to the live strings (1 elsewhere)."""
        cols = self.live
        full = self.nwords[a] > 0
        h = np.ones((len(a), len(cols)), dtype=np.float32)  # an empty string: 1 to a non-empty one...
        h[np.ix_(~full, self.nwords[cols] == 0)] = 0.0  # ... and 0 to another
        if full.any() and self.groups:
            self._hausdorff(a[full], h, np.flatnonzero(full))
        h *= 2.0
        h += np.abs(self.length[a][:, None] - self.length[cols][None, :])
        h /= 3.0
        if self.live_mask is None:
            return h
        out = np.ones((len(a), len(self.nwords)), dtype=np.float32)
        out[:, cols] = h
        return out

    def _by_size(self, strings: Ints, words: Ints | None = None) -> list[tuple[Ints, Ints]]:
        """The strings grouped by word count ``L``: positions in ``strings`` and an ``L x n`` matrix of word ids
        (or, given the sorted distinct ``words``, of positions in it)."""
        sizes = self.nwords[strings]
        order = np.argsort(sizes, kind="stable")
        groups = []
        for pos in np.split(order, np.flatnonzero(np.diff(sizes[order])) + 1):
            if not len(pos):
                continue
            flat, _ = _segments(self.ptr, self.flat, strings[pos])
            if words is not None:
                flat = np.searchsorted(words, flat)
            groups.append((pos, np.ascontiguousarray(flat.reshape(len(pos), int(sizes[pos[0]])).T)))
        return groups

    def _hausdorff(self, a: Ints, out: F32, out_rows: Ints) -> None:
        """``d_H`` (eq. 2) of the non-empty strings ``a`` to the live non-empty strings, into ``out[out_rows]``
        (whose columns are the live strings); ``a`` in batches of about 256 words (:meth:`_hausdorff_batch`)."""
        order = np.concatenate([ids for ids, _ in self.groups])  # the live non-empty strings, group after group
        at = np.searchsorted(self.live, order)  # their columns in ``out``
        a_step = max(1, 256 // max(1, int(self.nwords[a].max())))
        for alo in range(0, len(a), a_step):
            out[np.ix_(out_rows[alo : alo + a_step], at)] = self._hausdorff_batch(a[alo : alo + a_step], len(order))

    def _hausdorff_batch(self, sa: Ints, columns: int) -> F32:
        """``d_H`` of the strings ``sa`` to the live non-empty strings (``columns`` of them, group after group).

        Strings are grouped by word count ``L`` (an ``L x n`` word matrix each), so every per-string min or max is
        ``L - 1`` element-wise passes over gathered rows or columns, in reused buffers; column blocks of the live
        strings run on :attr:`workers` threads, each into its own columns of the result."""
        words_a = np.unique(self.flat[np.concatenate([np.arange(self.ptr[s], self.ptr[s + 1]) for s in sa])])
        groups_a = self._by_size(sa, words_a)
        rows = self.words.rows(words_a)  # distinct words of sa x vocabulary
        # per vocabulary word, min over each a-string's words: for I_H(b, a)
        per_a = np.empty((len(sa), rows.shape[1]), dtype=np.float32)
        for pos_a, idx in groups_a:
            per_a[pos_a] = _reduce_rows(rows, idx, np.minimum)
        nw, na = len(words_a), len(sa)
        step = max(1, self.block_cells // (nw + na))
        result = np.empty((na, columns), dtype=np.float32)
        tasks, col = [], 0
        for _, cols in self.groups:
            for lo in range(0, cols.shape[1], step):
                tasks.append((cols[:, lo : lo + step], col))  # word j of each b-string: part[j]
                col += tasks[-1][0].shape[1]
        buffers = threading.local()

        def run(task: tuple[Ints, int]) -> None:
            part, col = task
            n = part.shape[1]
            work = getattr(buffers, "work", None)
            if work is None:
                work = buffers.work = np.empty(2 * (nw + na) * min(step, columns), dtype=np.float32)
            per_word, word_j, i_ba, a_j = np.split(work[: 2 * (nw + na) * n], [nw * n, 2 * nw * n, (2 * nw + na) * n])
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

        run_all(run, tasks, self.workers)
        return result
