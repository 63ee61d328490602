"""The live audit's linkage estimate: a reservoir sample of users and the released ids their queries come out under.

**The sample.** Algorithm R over the *distinct* users of the audited input: the n-th new user takes a slot with
probability ``size/n`` (``secrets.randbelow``), replacing a slot drawn uniformly. A user is new when a filter of
``seen_bits`` bits (a Bloom filter, 3 bit positions from the user's keyed hash) has not seen it; a false positive
skips a new user (about 1% at a million users in the 8 Mbit default), it never samples one twice.

**Per sampled user** the distinct keyed hashes of its first ``queries_per_user`` queries, each given a bit
position; an index maps a query hash to the (slot, position) pairs that sent it, for its first
:data:`COMMON_SENDERS` sampled senders only: the bound on the work per released event (a common query, "google",
would otherwise cost a step per sampled user at each of its releases). The later senders of such a query keep its
position, which no release then sets: it counts as not released for them, as a dropped query would.

**Released events** are matched by query hash: the released user id's keyed hash (a *candidate*) gets the bit of
that query in the slot's mask. A slot tracks ``candidates_per_user`` candidates; a new one replaces the one that
covers the fewest queries. So the memory is bounded by ``size * (queries_per_user + candidates_per_user)`` small
entries plus the index, whatever the stream.

**The estimate** (:meth:`Linkage.estimate`): a sampled user is *assessed* when at least ``min_overlap`` of its
distinct queries were seen released, and *linked* when one released id covers at least ``min_overlap`` of them,
more than half of them, and more than any other id: the user's trail can be followed under that id (a passthrough
or a pseudonymizing chain). A k-anonymity chain that gives a user's queries to k users spreads them, so no id
dominates beyond chance. The share linked of assessed is exported beside 1/k.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass

#: Sampled senders of one query the index keeps (the later ones are not matched by its releases)
COMMON_SENDERS = 16


class _Slot:
    """One sampled user: its queries (hash -> bit position) and the released ids they came out under (id hash ->
    mask of positions)."""

    __slots__ = ("candidates", "queries", "user")

    def __init__(self, user: int) -> None:
        self.user = user
        self.queries: dict[int, int] = {}
        self.candidates: dict[int, int] = {}


@dataclass(frozen=True)
class LinkageEstimate:
    """Users sampled, assessed (enough queries released to judge) and linked (one released id dominates)."""

    sampled: int
    assessed: int
    linked: int

    @property
    def share(self) -> float:
        """Linked of assessed (0 when none is assessed yet)."""
        return self.linked / self.assessed if self.assessed else 0.0


class Linkage:
    """The reservoir of users and their released candidates; not thread-safe (the runtime's lock guards it)."""

    def __init__(
        self,
        size: int,
        queries_per_user: int,
        candidates_per_user: int,
        min_overlap: int,
        seen_bits: int,
        randbelow: Callable[[int], int] = secrets.randbelow,
    ) -> None:
        self.size = size
        self.queries_per_user = queries_per_user
        self.candidates_per_user = candidates_per_user
        self.min_overlap = min_overlap
        self.randbelow = randbelow
        self.slots: list[_Slot] = []
        self.by_user: dict[int, int] = {}
        self.index: dict[int, list[tuple[int, int]]] = {}
        self.seen_bits = seen_bits
        self._seen = bytearray((seen_bits + 7) // 8)
        #: distinct users seen (the n of Algorithm R)
        self.users_seen = 0

    def _new_user(self, user: int) -> bool:
        """Mark ``user`` seen; True when it was not (3 positions from the 64-bit hash: double hashing)."""
        bits, seen = self.seen_bits, self._seen
        h1, h2 = user & 0xFFFFFFFF, (user >> 32) | 1
        new = False
        for i in range(3):
            pos = (h1 + i * h2) % bits
            byte, mask = pos >> 3, 1 << (pos & 7)
            if not seen[byte] & mask:
                seen[byte] |= mask
                new = True
        return new

    def _slot_for(self, user: int) -> _Slot | None:
        """The slot of ``user``: its own, a new one (Algorithm R), or None (not sampled)."""
        i = self.by_user.get(user)
        if i is not None:
            return self.slots[i]
        if not self._new_user(user):
            return None
        self.users_seen += 1
        if len(self.slots) < self.size:
            i = len(self.slots)
            self.slots.append(_Slot(user))
        else:
            i = self.randbelow(self.users_seen)
            if i >= self.size:
                return None
            self._evict(i)
            self.slots[i] = _Slot(user)
        self.by_user[user] = i
        return self.slots[i]

    def _evict(self, i: int) -> None:
        slot = self.slots[i]
        del self.by_user[slot.user]
        for query in slot.queries:
            entries = [e for e in self.index.get(query, ()) if e[0] != i]
            if entries:
                self.index[query] = entries
            else:
                self.index.pop(query, None)

    def sent(self, user: int, query: int) -> None:
        """An input event (keyed hashes of its user and query)."""
        slot = self._slot_for(user)
        if slot is None or query in slot.queries or len(slot.queries) >= self.queries_per_user:
            return
        pos = len(slot.queries)
        slot.queries[query] = pos
        entries = self.index.setdefault(query, [])
        if len(entries) < COMMON_SENDERS:
            entries.append((self.by_user[user], pos))

    def released(self, user: int, query: int) -> None:
        """A released event (keyed hashes of its released user id and query)."""
        entries = self.index.get(query)
        if entries is None:
            return
        for i, pos in entries:
            candidates = self.slots[i].candidates
            mask = candidates.get(user)
            if mask is None:
                if len(candidates) >= self.candidates_per_user:
                    del candidates[min(candidates, key=lambda c: candidates[c].bit_count())]
                mask = 0
            candidates[user] = mask | (1 << pos)

    def estimate(self) -> LinkageEstimate:
        """Assessed and linked users of the sample now (at most ``size * candidates_per_user`` masks read)."""
        assessed = linked = 0
        for slot in self.slots:
            if not slot.candidates:
                continue
            union = 0
            counts = []
            for mask in slot.candidates.values():
                union |= mask
                counts.append(mask.bit_count())
            released = union.bit_count()
            if released < self.min_overlap:
                continue
            assessed += 1
            counts.sort(reverse=True)
            top, second = counts[0], counts[1] if len(counts) > 1 else 0
            if top >= self.min_overlap and 2 * top > released and top > second:
                linked += 1
        return LinkageEstimate(len(self.slots), assessed, linked)

    def entries(self) -> int:
        """Entries held: queries and candidates of every slot (the memory bound's measure)."""
        return sum(len(s.queries) + len(s.candidates) for s in self.slots)
