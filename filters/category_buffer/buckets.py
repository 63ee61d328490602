"""Paper 001's per-category buffers: a user set, a query set and the current k.

Each held event is split in two halves — its user (in a bucket's user set) and
its query (in a bucket's query set) — that leave at different times, so a
:class:`Held` records in which bucket each half still is. A :class:`Bucket`
keeps both sets with O(1) random removal and owns its k: raised to
ceil(k * delta) when no valid pair exists (paper 001) but never above its
``max_k``, stepped back toward its base after a release when decay is on.
Both are in :mod:`.core` (compiled with the loops that use them); the rarer
operations are functions: :func:`.core.take_most_held` (whose halves a bucket
at ``max_k`` suppresses, by :func:`.core.heaviest_first`; compiled too, as a
heavy user's archive suppresses often), :func:`take_oldest`, :func:`take_all` here.
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import TYPE_CHECKING

from filters.category_buffer import core as _built
from sidecar.api.compiled import current

CORE = current(_built)
"""The module of the buffer's classes and loops in use (:mod:`.core`): compiled when built from its current
source, else the source (an edited source never runs an old build)."""
if TYPE_CHECKING:
    from filters.category_buffer.core import UNKNOWN, Bucket, Held, Rows, heaviest_first, take_most_held
else:
    UNKNOWN, Bucket, Held, Rows = CORE.UNKNOWN, CORE.Bucket, CORE.Held, CORE.Rows
    heaviest_first, take_most_held = CORE.heaviest_first, CORE.take_most_held

__all__ = [
    "CORE",
    "ROOT",
    "UNKNOWN",
    "Bucket",
    "Held",
    "Rows",
    "heaviest_first",
    "held_users",
    "parent_name",
    "remove_user",
    "remove_users",
    "take_all",
    "take_most_held",
    "take_oldest",
]

ROOT = "*"
"""The bucket that overdue level-1 buckets merge into (``max_hold: merge``)."""

_ROW = attrgetter("row")
_ARRIVED = attrgetter("arrived")


def parent_name(name: str) -> str:
    """The bucket an overdue bucket merges into: one taxonomy level up, ``*`` above level 1."""
    if name in (UNKNOWN, ROOT) or "/" not in name:
        return ROOT
    return name.rsplit("/", 1)[0]


def remove_user(bucket: Bucket, h: Held) -> None:
    """Take the user half of ``h`` (O(that user's held halves))."""
    slots = bucket.by_name[h.sender]
    slots.remove(h)
    if not slots:
        bucket.forget(h.sender)
    h.ubucket = None


def remove_users(bucket: Bucket, halves: Sequence[Held]) -> None:
    """Take the user halves ``halves`` (O(the held user halves of their users), however many)."""
    by_sender: dict[str, set[Held]] = {}
    for h in halves:
        by_sender.setdefault(h.sender, set()).add(h)
    for sender, gone in by_sender.items():
        keep = [h for h in bucket.by_name[sender] if h not in gone]
        if keep:
            bucket.by_name[sender] = keep
        else:
            bucket.forget(sender)
        for h in gone:
            h.ubucket = None


def take_oldest(bucket: Bucket, n: int) -> tuple[list[Held], list[Held]]:
    """Take the ``n`` oldest held query halves and the ``n`` oldest user halves (by arrival time, ties in the
    bucket's order); returns them (``max_hold: suppress``, ``max_held``)."""
    queries = [bucket.pop_query(h.qidx) for h in sorted(bucket.queries, key=_ARRIVED)[:n]]
    users = sorted(held_users(bucket), key=_ARRIVED)[:n]
    remove_users(bucket, users)
    return queries, users


def held_users(bucket: Bucket) -> list[Held]:
    """Every held user half of a bucket."""
    return [h for slots in bucket.by_name.values() for h in slots]


def take_all(bucket: Bucket) -> tuple[list[Held], list[Held]]:
    """Empty the bucket; returns its held query halves and user halves, each in arrival order (to move them
    elsewhere, where they then are the oldest of their users)."""
    queries, users = sorted(bucket.queries, key=_ROW), sorted(held_users(bucket), key=_ROW)
    bucket.queries = []
    bucket.sent = {}
    bucket.by_name = {}
    bucket.names = []
    bucket.name_pos = {}
    bucket.open = None
    return queries, users
