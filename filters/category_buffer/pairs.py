"""Pair safety: which (user, query text) pairs a release must not create, and drawing a valid one.

A pair is a user id and a query text in its normalised form
(:func:`normalise_text`), kept only as a 64-bit hash (:func:`pair_of`; Python's
hash is salted per process and never stored). A released pair is valid when its
user is not the query's sender and is not known to have sent the same text:
among the events held (:attr:`PairMemory.held`), the rest of the current batch,
the last ``avoid_repeat_pairs`` arrivals and, after ``replay --prescan``, the
whole archive (:func:`shared_pairs`).
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from filters.category_buffer.buckets import CORE, Bucket
from sidecar.api import Event

if TYPE_CHECKING:
    from filters.category_buffer.core import (
        KEPT_PAIRS,
        TRIES,
        PairMemory,
        RandomPool,
        enumerated_draw,
        exact_draw,
        kept_draw,
        opened,
        tried_draw,
        weighted,
    )
else:
    KEPT_PAIRS, TRIES, PairMemory, RandomPool = CORE.KEPT_PAIRS, CORE.TRIES, CORE.PairMemory, CORE.RandomPool
    kept_draw, opened, tried_draw, weighted = CORE.kept_draw, CORE.opened, CORE.tried_draw, CORE.weighted
    exact_draw, enumerated_draw = CORE.exact_draw, CORE.enumerated_draw

__all__ = [
    "KEPT_PAIRS",
    "TRIES",
    "PairMemory",
    "draw",
    "enumerated_draw",
    "exact_draw",
    "kept_draw",
    "normalise_text",
    "opened",
    "pair_of",
    "shared_pair_array",
    "shared_pairs",
]


def normalise_text(query: Any) -> str:
    """The text identity used for pair checks: words case-folded, whitespace collapsed."""
    return " ".join(str(query).casefold().split())


def pair_of(user: str, text: str) -> int:
    """The hash that identifies a (user, normalised text) pair."""
    return hash((user, text))


def draw(
    bucket: Bucket, pool: RandomPool, memory: PairMemory, by_user: bool, tries: int = TRIES
) -> tuple[int, str, int] | None:
    """A valid (query index, user, slot index) of ``bucket``, or None when it has no valid pair.

    Valid: the user is not the query's sender and ``memory`` does not avoid the
    pair. The pair is uniform among the valid pairs (``by_user``, ``user_draw: user``)
    or weighted by the user's held slots (``slot``, the paper's multiset).
    Rejection sampling first (:func:`.core.tried_draw`: ``tries`` tries of a query
    uniform among held queries and a user uniform among distinct users, or by slot),
    then :func:`exact_draw`; a bucket whose users and senders are all one person is
    recognised in one pass.
    """
    drawn = tried_draw(bucket, pool, memory, by_user, tries)
    if drawn is None:
        return exact_draw(bucket, pool, memory, by_user)
    return None if drawn[0] < 0 else drawn


def shared_pairs(batches: Iterable[list[Event]]) -> tuple[int, list[int]]:
    """The events read and the pairs among them whose text more than one user sends (:func:`shared_pair_array`)."""
    read, shared = shared_pair_array(batches)
    return read, shared.tolist()


def shared_pair_array(batches: Iterable[list[Event]]) -> tuple[int, npt.NDArray[np.int64]]:
    """The events read and the pairs among them whose text more than one user sends, as an array.

    Only such a pair can be re-created (a user gets another sender's copy of a
    text they send themselves). The pass takes 16 bytes per event (numpy),
    freed when it returns.
    """
    texts, pairs = array("q"), array("q")
    for batch in batches:
        for ev in batch:
            text = normalise_text(str(ev.query))
            texts.append(hash(text))
            pairs.append(pair_of(str(ev.user), text))
    if not pairs:
        return 0, np.zeros(0, dtype=np.int64)
    unique_pairs, first = np.unique(np.frombuffer(pairs, dtype=np.int64), return_index=True)
    pair_texts = np.frombuffer(texts, dtype=np.int64)[first]
    values, senders = np.unique(pair_texts, return_counts=True)
    shared: npt.NDArray[np.int64] = unique_pairs[np.isin(pair_texts, values[senders > 1])]
    return len(pairs), shared
