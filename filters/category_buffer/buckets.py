"""Paper 001's per-category buffers: a user set, a query set and the current k.

Each held event is split in two halves — its user (in a bucket's user set) and
its query (in a bucket's query set) — that leave at different times, so a
:class:`Held` records in which bucket each half still is. A :class:`Bucket`
keeps both sets with O(1) random removal and owns its k: raised to
ceil(k * delta) when no valid pair exists (paper 001) but never above its
``max_k``, stepped back toward its base after a release when decay is on.
:func:`heaviest_first` picks whose halves a bucket at ``max_k`` suppresses.
"""

from __future__ import annotations

import heapq
import math
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence, Sized
from operator import attrgetter
from typing import Any

from sidecar.api import Event

UNKNOWN = "unknown"
"""The bucket of events without a category."""
ROOT = "*"
"""The bucket that overdue level-1 buckets merge into (``max_hold: merge``)."""

_ROW = attrgetter("row")
_ARRIVED = attrgetter("arrived")


def parent_name(name: str) -> str:
    """The bucket an overdue bucket merges into: one taxonomy level up, ``*`` above level 1."""
    if name in (UNKNOWN, ROOT) or "/" not in name:
        return ROOT
    return name.rsplit("/", 1)[0]


class Held:
    """One buffered event: its user half and its query half, and where each is still held.

    ``event`` is never modified (the output is a copy), so it can be written to
    the state store at any time. ``qidx`` is its position in the bucket's query
    list (O(1) random removal by swapping with the last element). ``uvalues``
    are the values that travel with the user (see :mod:`.sides`); None until
    they can be read (an event restored without its codec).
    """

    __slots__ = (
        "arrived",
        "event",
        "fmt",
        "new",
        "pair",
        "qbucket",
        "qidx",
        "row",
        "sender",
        "text",
        "ubucket",
        "uvalues",
    )

    def __init__(
        self,
        row: int,
        event: Event,
        sender: str,
        text: str,
        pair: int,
        arrived: float,
        fmt: str | None,
        uvalues: tuple[Any, ...] | None,
        new: bool,
    ) -> None:
        self.row = row
        self.event = event
        self.sender = sender
        self.text = text
        self.pair = pair
        self.arrived = arrived
        self.fmt = fmt
        self.uvalues = uvalues
        self.ubucket: str | None = None
        self.qbucket: str | None = None
        self.qidx = -1
        #: not yet in the state store (arrived in the current batch)
        self.new = new


class Bucket:
    """One category's user set and query set, and its current k.

    The user set is kept per user (``by_name``: that user's held user halves)
    with the distinct users also in a list (``names``, O(1) removal by swapping
    with the last, ``name_pos`` their positions), so a user is drawn uniformly
    among distinct users in O(1); the query set is a list with O(1) random
    removal, and its halves per sender (``sent``, each in the order they came
    into the bucket). Both sets always have the same size: an arrival adds to
    both, a release takes one from each. A user's held user halves stay in the
    order they came, as their query halves do in ``sent``: the oldest of
    either is the first (:meth:`take_most_held` reads no more than it takes).
    """

    __slots__ = (
        "base",
        "by_name",
        "k",
        "max_k",
        "name",
        "name_pos",
        "names",
        "open",
        "queries",
        "retry_at",
        "sent",
    )

    def __init__(self, name: str, base: int, max_k: int | None = None) -> None:
        self.name = name
        self.base = base
        self.k = base
        self.max_k = max_k if max_k is not None else base
        #: ``max_k_policy: hold``: no release is tried below this many held events (0: no such wait). A bucket
        #: at max_k that cannot release waits to grow by delta before trying again, as an inflating k would:
        #: trying on every arrival would cost O(held) each.
        self.retry_at = 0
        self.by_name: dict[str, list[Held]] = {}  # held user halves per user
        self.names: list[str] = []  # the keys of by_name, in an order with O(1) removal
        self.name_pos: dict[str, int] = {}  # each name's index in names
        self.queries: list[Held] = []
        self.sent: dict[str, dict[Held, None]] = {}  # held query halves per sender, oldest first
        #: every valid (query half, user) pair of the bucket, kept while they are few (:func:`.pairs.opened`);
        #: None: not kept (a draw finds one)
        self.open: list[tuple[Held, str]] | None = None

    # --- the two sets ------------------------------------------------------------

    def add_user(self, h: Held) -> None:
        """Hold the user half of ``h`` here."""
        h.ubucket = self.name
        slots = self.by_name.get(h.sender)
        if slots is None:
            self.by_name[h.sender] = [h]
            self.name_pos[h.sender] = len(self.names)
            self.names.append(h.sender)
        else:
            slots.append(h)

    def add_query(self, h: Held) -> None:
        """Hold the query half of ``h`` here."""
        h.qidx = len(self.queries)
        h.qbucket = self.name
        self.queries.append(h)
        mine = self.sent.get(h.sender)
        if mine is None:
            self.sent[h.sender] = {h: None}
        else:
            mine[h] = None

    def pop_user(self, name: str, i: int) -> Held:
        """Take user ``name``'s ``i``-th held user half (the others keep their order: a memmove of that user's
        halves, O(1) in Python)."""
        slots = self.by_name[name]
        h = slots.pop(i)
        if not slots:
            self.forget(name)
        h.ubucket = None
        return h

    def forget(self, name: str) -> None:
        """``name`` holds no user half here any more (O(1): the last name takes its place)."""
        del self.by_name[name]
        if self.open is not None:
            self.open = [pair for pair in self.open if pair[1] != name]
        names = self.names
        i = self.name_pos.pop(name)
        last = names.pop()
        if last != name:
            names[i] = last
            self.name_pos[last] = i

    def remove_user(self, h: Held) -> None:
        """Take the user half of ``h`` (O(that user's held halves))."""
        slots = self.by_name[h.sender]
        slots.remove(h)
        if not slots:
            self.forget(h.sender)
        h.ubucket = None

    def remove_users(self, halves: Sequence[Held]) -> None:
        """Take the user halves ``halves`` (O(the held user halves of their users), however many)."""
        by_sender: dict[str, set[Held]] = {}
        for h in halves:
            by_sender.setdefault(h.sender, set()).add(h)
        for sender, gone in by_sender.items():
            keep = [h for h in self.by_name[sender] if h not in gone]
            if keep:
                self.by_name[sender] = keep
            else:
                self.forget(sender)
            for h in gone:
                h.ubucket = None

    def take_most_held(self, n: int) -> tuple[list[Held], list[Held]]:
        """Take ``n`` query halves and ``n`` user halves, each from the user who holds the most here
        (:func:`heaviest_first`), each user's oldest first; returns them (``max_k_policy: suppress``).
        O(users log users + n): who gives is decided on counts, and a user's oldest halves are their first."""
        sent = self.sent
        by_name = self.by_name
        givers = heaviest_first({name: len(hs) for name, hs in sent.items()}, n, by_name)
        queries = [self.pop_query(next(iter(sent[name])).qidx) for name in givers]
        givers = heaviest_first({name: len(hs) for name, hs in by_name.items()}, n, sent)
        oldest: dict[str, Iterator[Held]] = {}
        for name, m in Counter(givers).items():
            slots = by_name[name]
            oldest[name] = iter(slots[:m])
            del slots[:m]
            if not slots:
                self.forget(name)
        users = [next(oldest[name]) for name in givers]
        for h in users:
            h.ubucket = None
        return queries, users

    def take_oldest(self, n: int) -> tuple[list[Held], list[Held]]:
        """Take the ``n`` oldest held query halves and the ``n`` oldest user halves (by arrival time, ties in the
        bucket's order); returns them (``max_hold: suppress``, ``max_held``)."""
        queries = [self.pop_query(h.qidx) for h in sorted(self.queries, key=_ARRIVED)[:n]]
        users = sorted(self.users(), key=_ARRIVED)[:n]
        self.remove_users(users)
        return queries, users

    def pop_query(self, i: int) -> Held:
        """Take the ``i``-th held query half (O(1): the last one takes its place)."""
        queries = self.queries
        h = queries[i]
        last = queries.pop()
        if last is not h:
            queries[i] = last
            last.qidx = i
        h.qbucket = None
        mine = self.sent[h.sender]
        del mine[h]
        if not mine:
            del self.sent[h.sender]
        if self.open is not None:
            self.open = [pair for pair in self.open if pair[0] is not h]
        return h

    def users(self) -> list[Held]:
        """Every held user half."""
        return [h for slots in self.by_name.values() for h in slots]

    def take_all(self) -> tuple[list[Held], list[Held]]:
        """Empty the bucket; returns its held query halves and user halves, each in arrival order (to move them
        elsewhere, where they then are the oldest of their users)."""
        queries, users = sorted(self.queries, key=_ROW), sorted(self.users(), key=_ROW)
        self.queries = []
        self.sent = {}
        self.by_name = {}
        self.names = []
        self.name_pos = {}
        self.open = None
        return queries, users

    # --- k -----------------------------------------------------------------------

    def raise_k(self, delta: float) -> bool:
        """No valid pair at k: k <- ceil(k * delta) (paper 001), at most ``max_k``. False when k already is
        ``max_k`` (the bucket's policy at max_k applies instead)."""
        if self.k >= self.max_k:
            return False
        self.k = min(self.max_k, math.ceil(self.k * delta))
        return True

    def decay_k(self, delta: float) -> bool:
        """After a release, step an inflated k back toward its base:
        k <- max(base, min(k - 1, ceil(k / delta))). False when k already is its base."""
        if self.k <= self.base:
            return False
        self.k = max(self.base, min(self.k - 1, math.ceil(self.k / delta)))
        return True


def heaviest_first(counts: Mapping[str, int], n: int, other: Mapping[str, Sized]) -> list[str]:
    """Who gives each of ``n`` halves, in order: the user who holds the most, one half at a time.

    ``counts`` is one side's held halves per user (a bucket's query halves by sender, or its user halves by
    user), ``other`` each user's halves on the other side: a user's weight is all they hold in the bucket. The
    heaviest user with a half on this side gives one, then whoever is heaviest then (ties: the smaller name),
    so the dominant user's excess goes first: what ``max_k_policy: suppress`` drops. O(users + n log users).
    """
    heap = [(-c - (len(other[name]) if name in other else 0), name) for name, c in counts.items() if c > 0]
    heapq.heapify(heap)
    given: dict[str, int] = {}
    out: list[str] = []
    while heap and len(out) < n:
        neg, name = heapq.heappop(heap)
        out.append(name)
        i = given[name] = given.get(name, 0) + 1
        if i < counts[name]:
            heapq.heappush(heap, (neg + 1, name))
    return out
