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
        kept_draw,
        opened,
        tried_draw,
        weighted,
    )
else:
    KEPT_PAIRS, TRIES, PairMemory, RandomPool = CORE.KEPT_PAIRS, CORE.TRIES, CORE.PairMemory, CORE.RandomPool
    kept_draw, opened, tried_draw, weighted = CORE.kept_draw, CORE.opened, CORE.tried_draw, CORE.weighted

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


def exact_draw(bucket: Bucket, pool: RandomPool, memory: PairMemory, by_user: bool) -> tuple[int, str, int] | None:
    """:func:`draw` after rejection sampling failed: the same distribution, without enumerating every pair.

    Whether ``memory`` avoids a pair depends on the user and the query's text only, so the held queries are
    grouped by text and each distinct text's valid users are listed once: O(queries + texts x users) instead of
    O(queries x users) (a bucket stuck on a popular text, say 29 queries of 2 texts and 13 users, checks 26
    pairs, not 377). A text with q queries and valid users V holds q x |V| valid pairs (weight q x slots(V) with
    ``slot``): a group is drawn by that weight, then a query uniformly within it and a user uniformly in V (or by
    slots). Each valid pair is then drawn with probability 1 / (valid pairs) (or slots(u) / total), as an
    enumeration of all valid pairs gives. A query's sender is always avoided (its own pair is held); should it
    not be, the valid pairs are enumerated one by one instead (:func:`enumerated_draw`).
    """
    by_name = bucket.by_name
    names = bucket.names
    queries = bucket.queries
    held, batch, recent, older, future = memory.held, memory.batch, memory.recent, memory.older, memory.future
    by_text: dict[str, list[int]] = {}
    for qi, q in enumerate(queries):
        group = by_text.get(q.text)
        if group is None:
            by_text[q.text] = [qi]
        else:
            group.append(qi)
    groups: list[tuple[list[int], list[str], list[int], int]] = []
    total = 0
    for text, qis in by_text.items():
        valid = [  # PairMemory.avoided written out: this is the loop that costs
            n
            for n in names
            if (p := hash((n, text))) not in held
            and p not in batch
            and p not in recent
            and p not in older
            and p not in future
        ]
        if not valid:
            continue
        # a sender not avoided: never seen (its own pair is held while its query is), but exact; static: its
        # text is then another user's too, so the pair is in future as well (see opened)
        if not memory.static and not set(valid).isdisjoint(queries[qi].sender for qi in qis):
            return enumerated_draw(bucket, pool, memory, by_user)
        slots = [1] * len(valid) if by_user else [len(by_name[n]) for n in valid]
        per_query = sum(slots)
        groups.append((qis, valid, slots, per_query))
        total += len(qis) * per_query
    if memory.static and sum(len(qis) * len(valid) for qis, valid, _, _ in groups) <= KEPT_PAIRS:
        bucket.open = [(queries[qi], n) for qis, valid, _, _ in groups for qi in qis for n in valid]
    if not total:
        return None
    pick = pool.below(total)
    for qis, valid, slots, per_query in groups:
        if pick < len(qis) * per_query:
            qi = qis[pick // per_query]
            name = valid[pick % per_query] if by_user else weighted(valid, slots, pick % per_query)
            return qi, name, pool.below(len(by_name[name]))
        pick -= len(qis) * per_query
    raise AssertionError("pick out of range")


def enumerated_draw(bucket: Bucket, pool: RandomPool, memory: PairMemory, by_user: bool) -> tuple[int, str, int] | None:
    """Every valid pair listed, one drawn (uniformly, or by the user's slots): the reference :func:`exact_draw`
    gives the same distribution as."""
    by_name = bucket.by_name
    avoided = memory.avoided
    below = pool.below
    valid = [
        (qi, name)
        for qi, q in enumerate(bucket.queries)
        for name in bucket.names
        if name != q.sender and not avoided(name, q.text)
    ]
    if not valid:
        return None
    if by_user:
        qi, name = valid[below(len(valid))]
    else:
        w = [len(by_name[n]) for _, n in valid]
        qi, name = weighted(valid, w, below(sum(w)))
    return qi, name, below(len(by_name[name]))


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
