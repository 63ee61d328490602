"""``category_buffer``'s per-event work in one module that mypyc compiles (pyproject.toml ``[tool.querylog]
compiled``): the held events (:class:`Held`), the buckets' hot operations (:class:`Bucket`), the pair memory
(:class:`PairMemory`), the random words (:class:`RandomPool`), the draws and the arrival and release loops
(:class:`Buffer`). Native classes only reach each other's attributes at C speed within one compiled module, hence
one module, over 400 lines for that reason; it imports nothing of the package. Interpreted, it gives the same
releases for the same random words (``test_the_compiled_core_releases_what_its_source_releases``). The rarer
bucket operations are in :mod:`.buckets`, the pass over the archive's pairs in :mod:`.pairs`, the removal policies in
:mod:`.removal`.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from typing import Any, TypeVar

from sidecar.api import NO_META, Event

T = TypeVar("T")
UNKNOWN = "unknown"
"""The bucket of events without a category."""
WORDS = 4096
"""64-bit words fetched from the CSPRNG at a time (:class:`RandomPool`)."""
TRIES = 4
"""Rejection-sampling draws before the exact draw (:func:`exact_draw`)."""
KEPT_PAIRS = 512
"""A bucket's valid pairs are kept (``Bucket.open``) while there are at most this many (:func:`opened`)."""


class RandomPool:
    """``below(n)``: a uniform integer in [0, n) from a bulk-fetched CSPRNG stream.

    ``random.SystemRandom.randrange`` makes one ``urandom`` call per draw (about 3 us); the buffer needs several
    per event. This reads 32 KiB at a time (``BuildContext.token_bytes``: ``secrets`` in production, the seeded
    RNG in tests) and maps 64-bit words to indices by modulo (bias below n / 2**64)."""

    def __init__(self, token_bytes: Callable[[int], bytes]) -> None:
        self.token_bytes = token_bytes
        self.words: list[int] = []  # the current block (hot paths read it), and the next unused position
        self.i = 0

    def below(self, n: int) -> int:
        if self.i >= len(self.words):
            self.words = array("Q", self.token_bytes(8 * WORDS)).tolist()
            self.i = 0
        w = self.words[self.i]
        self.i += 1
        return w % n


class Held:
    """One buffered event: its user half and its query half, and where each is still held.

    ``event`` is left as it came, but for its annotations (``meta``), which move to the output when the query
    half leaves (:meth:`Buffer.released`). ``qidx`` is its position in the bucket's query list.
    ``uvalues`` travel with the user (see :mod:`.sides`); None: read when released (only the user id travels:
    the event has it; restored without its codec: read by the codec of its format).
    ``new``: not yet in the state store (arrived since the journal's last write). ``pair`` is the int of
    :func:`.pairs.pair_of`, typed ``object`` so that compiled code keeps it boxed (an ``int`` is unboxed and boxed
    again, a new int object, at every dict or set look-up)."""

    def __init__(
        self,
        row: int,
        event: Event,
        sender: str,
        text: str,
        pair: object,
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
        self.new = new


class Bucket:
    """One category's user set and query set, and its current k.

    Users: ``by_name`` (each user's held user halves, in arrival order) and the distinct users in ``names`` (O(1)
    removal by swapping with the last; ``name_pos``), so a user is drawn uniformly in O(1). Queries: a list with
    O(1) removal, and per sender (``sent``, in arrival order). Both sets have the same size. ``open``: every valid
    (query half, user) pair while they are few (:func:`opened`), else None. ``retry_at``: ``max_k_policy: hold``
    tries no release below this many held events (0: no wait)."""

    def __init__(self, name: str, base: int, max_k: int | None = None) -> None:
        self.name = name
        self.base = base
        self.k = base
        self.max_k = max_k if max_k is not None else base
        self.retry_at = 0
        self.by_name: dict[str, list[Held]] = {}
        self.names: list[str] = []
        self.name_pos: dict[str, int] = {}
        self.queries: list[Held] = []
        self.sent: dict[str, dict[Held, None]] = {}
        self.open: list[tuple[Held, str]] | None = None

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
        """Take user ``name``'s ``i``-th held user half (the others keep their order)."""
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

    def raise_k(self, delta: float) -> bool:
        """No valid pair at k: k <- ceil(k * delta) (paper 001), at most ``max_k``; False when k is ``max_k``."""
        if self.k >= self.max_k:
            return False
        self.k = min(self.max_k, math.ceil(self.k * delta))
        return True

    def decay_k(self, delta: float) -> bool:
        """After a release: k <- max(base, min(k - 1, ceil(k / delta))); False when k is its base."""
        if self.k <= self.base:
            return False
        self.k = max(self.base, min(self.k - 1, math.ceil(self.k / delta)))
        return True


def take_most_held(bucket: Bucket, n: int) -> tuple[list[Held], list[Held]]:
    """Take ``n`` query halves and ``n`` user halves, each from the user who holds the most here
    (:func:`heaviest_first`), each user's oldest first; returns them (``max_k_policy: suppress``).
    O(users log users + n): who gives is decided on counts, and a user's oldest halves are their first."""
    sent = bucket.sent
    by_name = bucket.by_name
    if n == 1:  # the usual case (one arrival over max_k): the heaviest of each side, found without a dict or heap
        q = bucket.pop_query(next(iter(sent[heaviest(sent, by_name)])).qidx)
        return [q], [bucket.pop_user(heaviest(by_name, sent), 0)]
    givers = heaviest_first({name: len(hs) for name, hs in sent.items()}, n, by_name)
    queries = [bucket.pop_query(next(iter(sent[name])).qidx) for name in givers]
    givers = heaviest_first({name: len(hs) for name, hs in by_name.items()}, n, sent)
    given: dict[str, int] = {}  # each giver's count, in order of first appearance (as Counter would: compiled)
    for name in givers:
        given[name] = given.get(name, 0) + 1
    oldest: dict[str, Iterator[Held]] = {}
    for name, m in given.items():
        slots = by_name[name]
        oldest[name] = iter(slots[:m])
        del slots[:m]
        if not slots:
            bucket.forget(name)
    users = [next(oldest[name]) for name in givers]
    for h in users:
        h.ubucket = None
    return queries, users


def heaviest(side: Mapping[str, Sized], other: Mapping[str, Sized]) -> str:
    """:func:`heaviest_first` of one half: of the users with a half on ``side`` (``Bucket.sent`` or ``by_name``),
    the one whose held halves here (``side`` and ``other``) are the most (ties: the smaller name)."""
    best = ""
    most = -1
    for name, mine in side.items():
        theirs = other.get(name)
        weight = len(mine) + (len(theirs) if theirs is not None else 0)
        if weight > most or (weight == most and name < best):
            best, most = name, weight
    return best


def heaviest_first(counts: Mapping[str, int], n: int, other: Mapping[str, Sized]) -> list[str]:
    """Who gives each of ``n`` halves, in order: the user who holds the most, one half at a time.

    ``counts`` is one side's held halves per user, ``other`` each user's halves on the other side: a user's
    weight is all they hold in the bucket. The heaviest user with a half on this side gives one, then whoever
    is heaviest then (ties: the smaller name), so the dominant user's excess goes first: what ``max_k_policy:
    suppress`` drops. O(users + n log users); one half (the usual case): the heap's first, without the heap."""
    heap = [(-c - (len(other[name]) if name in other else 0), name) for name, c in counts.items() if c > 0]
    if n == 1:
        return [min(heap)[1]] if heap else []
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


class PairMemory:
    """The (user, text) pairs that must not be created, as hashes, in memory only.

    ``held``: pairs of every event with a half held (counted); ``batch``: the current batch's (look-ahead);
    ``recent``/``older``: two generations of ``cap / 2`` recent arrivals; ``future``: the archive's shared pairs
    (prescan). ``static``: ``future`` holds the whole archive's shared pairs and every held event is of this
    archive, so a pair's validity never changes (see :func:`opened`), and ``future`` alone decides it: a pair
    the others would avoid is a user's who sends a text another user sends too (the draws never give a query to
    its sender, nor, in :func:`exact_draw`, to a sender of a held query of that text), so it is in ``future``;
    they are then not kept (same releases, a third less work per event).
    Pairs are ints typed ``object`` (see :class:`Held`)."""

    def __init__(self, cap: int) -> None:
        self.cap = cap
        self.static = False
        self.held: dict[object, int] = {}
        self.batch: set[object] = set()
        self.recent: set[object] = set()
        self.older: set[object] = set()
        self.future: set[int] = set()

    def hold(self, pair: object) -> None:
        """An event with this pair is now held (not kept when ``static``, nor are the other sets)."""
        if self.static:
            return
        self.held[pair] = self.held.get(pair, 0) + 1

    def unhold(self, pair: object) -> None:
        """Both halves of an event with this pair have left."""
        if self.static:
            return
        n = self.held[pair] - 1
        if n:
            self.held[pair] = n
        else:
            del self.held[pair]

    def remember(self, pair: object) -> None:
        """Remember an arrived pair (nothing when ``cap`` is 0, or ``static``)."""
        if not self.cap or self.static:
            return
        self.recent.add(pair)
        if len(self.recent) * 2 >= self.cap:
            self.older = self.recent
            self.recent = set()

    def look_ahead(self, pairs: Iterable[object]) -> None:
        """The pairs of the batch being processed: none of them is created either (unless ``static``)."""
        if not self.static:
            self.batch = set(pairs)

    def end_batch(self) -> None:
        """The batch is done: forget its look-ahead."""
        self.batch = set()

    def learn_future(self, pairs: Iterable[int]) -> int:
        """Add pairs the archive holds later (prescan); returns how many are known."""
        self.future.update(pairs)
        return len(self.future)

    def avoided(self, user: str, text: str) -> bool:
        """True when giving ``text`` to ``user`` would create a known pair (``static``: ``future`` knows them all)."""
        pair: object = hash((user, text))  # pairs.pair_of; boxed once (compiled: an int is boxed at each look-up)
        if self.static:
            return pair in self.future
        return (
            pair in self.held or pair in self.batch or pair in self.recent or pair in self.older or pair in self.future
        )


def weighted(items: Sequence[T], weights: Sequence[int], pick: int) -> T:
    """The item at position ``pick`` (0 <= pick < sum(weights)) of the items repeated by weight."""
    for item, w in zip(items, weights):
        if pick < w:
            return item
        pick -= w
    raise ValueError("pick out of range")


NO_PAIR = (-1, "", 0)
""":func:`tried_draw`: the bucket certainly has no valid pair."""


def tried_draw(
    bucket: Bucket, pool: RandomPool, memory: PairMemory, by_user: bool, tries: int = TRIES
) -> tuple[int, str, int] | None:
    """A draw's rejection sampling (:func:`.pairs.draw`): ``tries`` tries of a query uniform among held queries and
    a user uniform among distinct users (or by slot), the first valid (query index, user, slot index) kept;
    :data:`NO_PAIR` when the bucket's users and senders are all one person; None when every try failed."""
    by_name = bucket.by_name
    queries = bucket.queries
    names = bucket.names
    if len(by_name) == 1:  # every held query of that user too (their senders are sent's keys): no pair at all
        only = names[0]
        if all(sender == only for sender in bucket.sent):
            return NO_PAIR
    weights = [] if by_user else [len(by_name[n]) for n in names]
    total = sum(weights)
    nq = len(queries)
    for _ in range(tries):
        qi = pool.below(nq)
        q = queries[qi]
        name = names[pool.below(len(names))] if by_user else weighted(names, weights, pool.below(total))
        if name != q.sender and not memory.avoided(name, q.text):
            return qi, name, pool.below(len(by_name[name]))
    return None


def kept_draw(bucket: Bucket, pool: RandomPool, by_user: bool) -> tuple[int, str, int] | None:
    """A draw in a bucket whose valid pairs are kept: one of them, uniformly (``slot``: by the user's held
    slots), as the exact draw draws; None when there is none."""
    kept = bucket.open
    if not kept:
        return None
    by_name = bucket.by_name
    if by_user:
        q, name = kept[pool.below(len(kept))]
    else:
        weights = [len(by_name[n]) for _, n in kept]
        q, name = weighted(kept, weights, pool.below(sum(weights)))
    return q.qidx, name, pool.below(len(by_name[name]))


def opened(bucket: Bucket, h: Held, new_user: bool, memory: PairMemory) -> None:
    """``h`` arrived in a bucket whose valid pairs are kept (``Bucket.open``): add those it opens.

    Only with ``memory.static``, where a pair's validity never changes (a pair avoided for a while is one whose
    user sends that text in this archive, and as the query's sender does too, it is in ``future`` for good): the
    new query with each held user other than its sender, and its sender, when new here, with each held query of
    another sender. The pairs of what leaves go in ``Bucket.pop_query``/``forget``. Over :data:`KEPT_PAIRS`: not
    kept any more (draws find them)."""
    kept = bucket.open
    if kept is None:
        return
    future = memory.future
    text, sender = h.text, h.sender
    for n in bucket.names:
        if n != sender and hash((n, text)) not in future:
            kept.append((h, n))
    if new_user and len(kept) <= KEPT_PAIRS:
        verdict: dict[str, bool] = {}
        for q in bucket.queries:
            if q.sender != sender:
                ok = verdict.get(q.text)
                if ok is None:
                    ok = verdict[q.text] = hash((sender, q.text)) not in future
                if ok:
                    kept.append((q, sender))
    if len(kept) > KEPT_PAIRS:
        bucket.open = None


def exact_draw(bucket: Bucket, pool: RandomPool, memory: PairMemory, by_user: bool) -> tuple[int, str, int] | None:
    """:func:`.pairs.draw` after rejection sampling failed: the same distribution, without enumerating every pair.

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
    static = memory.static
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
        valid: list[str] = []
        if static:  # PairMemory.avoided written out: this is the loop that costs
            senders = {queries[qi].sender for qi in qis}  # held: avoided by their held pair, which is not kept
            for n in names:
                if n not in senders and hash((n, text)) not in future:
                    valid.append(n)
        else:
            for n in names:
                p: object = hash((n, text))  # boxed once (see Held)
                if p not in held and p not in batch and p not in recent and p not in older and p not in future:
                    valid.append(n)
        if not valid:
            continue
        # a sender not avoided: never seen (its own pair is held while its query is), but exact; static: its
        # text is then another user's too, so the pair is in future as well (see opened)
        if not static and not set(valid).isdisjoint(queries[qi].sender for qi in qis):
            return enumerated_draw(bucket, pool, memory, by_user)
        slots = [1] * len(valid) if by_user else [len(by_name[n]) for n in valid]
        per_query = sum(slots)
        groups.append((qis, valid, slots, per_query))
        total += len(qis) * per_query
    if static and sum(len(qis) * len(valid) for qis, valid, _, _ in groups) <= KEPT_PAIRS:
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


class Rows:
    """The journal's bookkeeping of the held rows between two writes (:class:`.store.Journal` writes them):
    compiled, as :class:`Buffer` tells it of every arrival and departure. ``new``: the arrivals since the last
    write, in row order (an entry emptied when the event fully left before it: freed while its objects are still
    in the CPU's caches, not with 50,000 others at a deferred write); ``touched``: older rows with a half moved or
    left; ``gone``: older rows fully left; ``dirty_k``: buckets whose k changed."""

    def __init__(self) -> None:
        self.new: list[Held | None] = []
        self.touched: set[Held] = set()
        self.gone: list[int] = []
        self.dirty_k: set[str] = set()
        self.first_row = -1  # the row of new[0] (rows of arrivals are consecutive), read at a window's first left

    def arrived(self, h: Held) -> None:
        """``h`` arrived since the last write."""
        self.new.append(h)

    def moved(self, h: Held) -> None:
        """A half of ``h`` left or changed bucket; the other is still held."""
        if not h.new:
            self.touched.add(h)

    def left(self, h: Held) -> None:
        """Both halves of ``h`` are gone (an arrival since the last write: its entry in :attr:`new` emptied)."""
        if not h.new:
            self.touched.discard(h)
            self.gone.append(h.row)
            return
        new = self.new
        if self.first_row < 0 and new:
            first = new[0]  # never emptied before the first call of a window
            self.first_row = first.row if first is not None else -1
        i = h.row - self.first_row
        if 0 <= i < len(new) and new[i] is h and h.ubucket is None and h.qbucket is None:
            new[i] = None

    def k_changed(self, bucket: str) -> None:
        """The k of ``bucket`` changed."""
        self.dirty_k.add(bucket)

    def reset(self) -> None:
        """Written: start a new window."""
        self.new = []
        self.first_row = -1
        self.touched = set()
        self.gone = []
        self.dirty_k = set()


class Buffer:
    """The filter's buckets and the arrival and release loops over them (``CategoryBufferFilter`` delegates).

    The rules are the filter's config (``min_users`` 0: the bucket's base k); what is rare or depends on other
    parts stays with the filter, as callables: a new bucket, a bucket name other than a plain level-1 category,
    the user side and the released copy when more than the user id travels,
    ``max_k_policy``, an uncategorised event dropped. ``held``: query halves held; ``next_id``: the next row id;
    ``stream_time``: the time of the arrival being processed (``time: release``)."""

    def __init__(
        self,
        *,
        memory: PairMemory,
        pool: RandomPool,
        journal: Rows,
        counts: Counter[str],
        codecs: dict[str | None, Any],
        rules: tuple[bool, bool, bool, int, bool, float, bool, bool],
        new_bucket: Callable[[str], Bucket],
        bucket_name: Callable[[Event], str | None],
        user_values: Callable[[Event, Any], tuple[Any, ...]],
        emit: Callable[[Held, Held, Any], Event],
        at_max_k: Callable[[Bucket], None],
        dropped: Callable[[Event], None],
    ) -> None:
        self.buckets: dict[str, Bucket] = {}
        self.memory, self.pool, self.journal, self.counts, self.codecs = memory, pool, journal, counts, codecs
        #: (plain level-1 names, only the user id travels, time: release, min_users, by user, delta, decay,
        #: max_k_policy suppress)
        plain_names, simple, time_release, min_users, by_user, delta, decay, suppress_at_max_k = rules
        self.plain_names, self.simple, self.time_release, self.min_users = plain_names, simple, time_release, min_users
        self.by_user, self.delta, self.decay, self.suppress_at_max_k = by_user, delta, decay, suppress_at_max_k
        #: the events whose query was suppressed, kept for a join stage that asked (None: not kept)
        self.suppressed: list[Event] | None = None
        self.new_bucket, self.bucket_name, self.user_values, self.emit = new_bucket, bucket_name, user_values, emit
        self.at_max_k, self.dropped = at_max_k, dropped
        self.held = 0
        self.next_id = 1
        self.stream_time: Any = None

    def arrive(self, batch: list[Event], now: float) -> list[Event]:
        """Add each event of a batch that came at ``now`` to its bucket and release what the buckets allow."""
        out: list[Event] = []
        memory = self.memory
        senders = [str(ev.user) for ev in batch]
        texts = [" ".join(str(ev.query).casefold().split()) for ev in batch]  # pairs.normalise_text
        pairs: list[object] = [hash((s, t)) for s, t in zip(senders, texts)]  # pairs.pair_of; kept boxed
        memory.look_ahead(pairs)  # a pair that occurs later in this batch is not created either
        dropped = 0
        for ev, sender, text, pair in zip(batch, senders, texts, pairs):
            cat = ev.meta.get("category") if self.plain_names else None
            name = cat if isinstance(cat, str) and cat and cat != UNKNOWN else self.bucket_name(ev)
            if name is None:
                dropped += 1
                self.dropped(ev)
                continue
            self.stream_time = ev.time
            codec = ev.codec
            fmt: str | None = codec.format if codec is not None else None
            if codec is not None and fmt not in self.codecs:
                self.codecs[fmt] = codec
            uvalues = None if self.simple else self.user_values(ev, codec)  # simple: the event's user (released)
            h = Held(self.next_id, ev, sender, text, pair, now, fmt, uvalues, True)
            self.next_id += 1
            bucket = self.buckets.get(name)
            if bucket is None:
                bucket = self.new_bucket(name)
            new_user = sender not in bucket.by_name
            bucket.add_user(h)
            bucket.add_query(h)
            self.journal.arrived(h)
            memory.hold(pair)
            memory.remember(pair)
            if bucket.open is not None:
                opened(bucket, h, new_user, memory)
            if len(bucket.queries) >= bucket.k:
                self.release(bucket, out)
        self.held += len(batch) - dropped
        if dropped:
            self.counts["dropped_unknown"] += dropped
        self.counts["arrived"] += len(batch) - dropped
        return out

    def release(self, bucket: Bucket, out: list[Event]) -> None:
        """Release while the bucket holds k events of at least ``min_users`` distinct users and a valid pair
        exists; otherwise k <- ceil(k * delta) (paper 001's rule, which is ``min_users: 2``), or ``max_k_policy``
        once k is ``max_k``."""
        if len(bucket.queries) < bucket.retry_at:  # max_k_policy hold: retried once grown by delta, as k would
            return
        min_users = self.min_users or bucket.base
        pool, memory, by_user = self.pool, self.memory, self.by_user
        while len(bucket.queries) >= bucket.k:
            drawn: tuple[int, str, int] | None
            if len(bucket.by_name) < min_users:
                drawn = None
            elif bucket.open is not None:  # its valid pairs are kept (opened): one of them
                drawn = kept_draw(bucket, pool, by_user)
            else:
                drawn = tried_draw(bucket, pool, memory, by_user)
                if drawn is None:
                    drawn = exact_draw(bucket, pool, memory, by_user)
                elif drawn[0] < 0:
                    drawn = None
            if drawn is None:
                if bucket.raise_k(self.delta):
                    self.journal.k_changed(bucket.name)
                    self.counts["k_raised"] += 1
                elif self.suppress_at_max_k:
                    self.suppress_most_held(bucket)
                else:
                    self.at_max_k(bucket)
                return
            qi, name, si = drawn
            u = bucket.pop_user(name, si)
            q = bucket.pop_query(qi)
            self.gone_half(u)
            self.gone_half(q)
            out.append(self.released(q, u))
            self.held -= 1
            bucket.retry_at = 0
            if self.decay and bucket.k > bucket.base and bucket.decay_k(self.delta):
                self.journal.k_changed(bucket.name)

    def suppress_most_held(self, bucket: Bucket) -> None:
        """``max_k_policy: suppress`` at max_k: suppress the oldest held halves of whoever holds the most
        (:func:`take_most_held`) until the bucket holds max_k - 1."""
        n = len(bucket.queries) - bucket.max_k + 1
        if n <= 0:
            return
        self.suppress(take_most_held(bucket, n))
        self.held -= n
        self.counts["suppressed_max_k"] += n

    def suppress(self, taken: tuple[list[Held], list[Held]]) -> None:
        """Bookkeeping after query and user halves were suppressed: their queries never leave (kept in
        :attr:`suppressed` when a join stage asked)."""
        queries, users = taken
        kept = self.suppressed
        if kept is not None:
            for h in queries:
                kept.append(h.event)
        for h in dict.fromkeys(queries + users):
            self.gone_half(h)

    def gone_half(self, h: Held) -> None:
        """Bookkeeping after one half of ``h`` left its bucket (a new event's moved half: nothing to write)."""
        if h.ubucket is None and h.qbucket is None:
            self.memory.unhold(h.pair)
            self.journal.left(h)
        elif not h.new:
            self.journal.moved(h)

    def released(self, q: Held, u: Held) -> Event:
        """The output: a copy of the query's event carrying the drawn user's id (``Sides.emit`` when more
        travels with the user, or the query's event has no codec of its own). Only the user id travelling, an
        arrival keeps no ``uvalues`` (one object less per held event): the user's own event has it. Always a new
        object: the runtime tells a request's own events from released ones by identity (``Pipeline.transform``,
        the partitions' output order). The query's annotations move to it (later filters annotate the output):
        its user half, if still held, needs only its user and time."""
        src = q.event
        codec = src.codec
        if not self.simple or codec is None:
            return self.emit(q, u, self.stream_time)
        uv = u.uvalues
        user = u.event.user if uv is None else uv[0]
        t = self.stream_time if self.time_release and self.stream_time is not None else src.time
        ev = Event.__new__(Event)  # Event.__init__'s slots, set here: no interpreted frame per release
        ev.user = user
        ev.query = src.query
        ev.time = t
        ev.rank = src.rank
        ev.url = src.url
        ev.record = src.record
        ev.raw = src.raw
        ev.codec = codec
        ev.eol = src.eol
        meta = src.meta
        if meta:  # the query's annotations move to the output (later filters annotate it); the query half has left
            ev.meta = meta
            src.meta = NO_META
        else:
            ev.meta = NO_META
        return ev
