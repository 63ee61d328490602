"""``category_buffer``'s :class:`~sidecar.api.Filter`: arrivals, releases, removal policies, durability.

The algorithm (paper 001, Algorithm 2) and where this implementation departs
from the paper, and why, are described in the package docstring
(:mod:`filters.category_buffer`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any, ClassVar

import structlog

from filters.category_buffer.buckets import UNKNOWN, Bucket, Held
from filters.category_buffer.config import CategoryBufferConfig
from filters.category_buffer.firstpass import PendingPass, Waiting, pack_result, unpack_result
from filters.category_buffer.pairs import (
    TRIES,
    PairMemory,
    draw,
    kept_draw,
    normalise_text,
    opened,
    pair_of,
    shared_pair_array,
)
from filters.category_buffer.rand import RandomPool
from filters.category_buffer.removal import RemovalPolicies
from filters.category_buffer.sides import Sides, read_field
from filters.category_buffer.store import HeldStore, Journal, unpack_event
from sidecar.api import BuildContext, Codec, ConfigValueError, Event, Filter, StateDamaged

log = structlog.get_logger("querylog.category_buffer")


class CategoryBufferFilter(RemovalPolicies, Filter[CategoryBufferConfig]):
    """Re-pair users and queries inside category buffers of k (paper 001 Algorithm 2), durably."""

    NAME = "category_buffer"
    Config = CategoryBufferConfig
    SUMMARY = "k-anonymous re-pairing of users and queries within category buffers (paper 001 Alg. 2), in SQLite"
    BUFFERING = True
    STATEFUL = True
    PRESCAN = True
    PRESCAN_ROLES_ONLY = True  # shared_pairs reads users and texts
    #: The hot-path specialisation of :meth:`process` and :meth:`_release` (the branches marked SPECIALISED): the
    #: arrival's text key, common bucket name and user side, its bucket and pair bookkeeping, and a release's first
    #: random draw, written out inline instead of calling the helpers named there. Measured on ``bench buffer``'s
    #: workload (k=5, 10,000 users, batches of 1000; two runs of 20 interleaved rounds of 100,000 events): 170k and
    #: 174k vs 135k and 145k events per CPU-second (median, +26% and +20%), best 190k and 200k vs 153k and 161k
    #: (+24%, +25%). A release's two pops written out too gained 8% (`bench buffer`, median of 3 interleaved runs:
    #: 240k vs 222k events per CPU-second): folded back into ``Bucket.pop_user``/``pop_query``. False runs the
    #: helpers only, with the same output for the same random words (pinned by
    #: ``test_specialised_hot_path_gives_the_helpers_output``): for tests, and to measure it again
    #: (`querylog bench buffer --helpers-only`).
    SPECIALISED: ClassVar[bool] = True

    def __init__(self, config: CategoryBufferConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        if ctx.state is None:
            raise ConfigValueError("k", "category_buffer needs the state store (state_dir)")
        self.pool = RandomPool(ctx.token_bytes)
        self.store = HeldStore(ctx.state)
        self.journal = Journal()
        self.buckets: dict[str, Bucket] = {}
        self.memory = PairMemory(config.avoid_repeat_pairs)
        #: the codec of each format seen in a batch (restored events are encoded with it)
        self.codecs: dict[str | None, Codec] = {}
        self.sides = Sides(config, self.codecs, self.counts, ctx.codec_for)
        self._held = 0
        self._stream_time: Any = None
        self._next_id = 1
        #: batches waiting for a first pass made elsewhere (prescan_later); None: none is awaited
        self._waiting: Waiting | None = None
        self._load()

    # --- buckets -------------------------------------------------------------------

    def _bucket(self, name: str) -> Bucket:
        """The bucket ``name``, created at its base k (``k_per_category`` or ``k``) on first use."""
        b = self.buckets.get(name)
        if b is None:
            per_category = self.config.k_per_category
            base = per_category[name] if per_category and name in per_category else self.config.k
            b = self.buckets[name] = Bucket(name, base, self.config.max_k_of(base))
        return b

    def _bucket_name(self, ev: Event) -> str | None:
        """The bucket of an arriving event: its category (at ``level``), ``unknown``, or None (drop it)."""
        cfg = self.config
        meta = ev.meta
        cat = meta.get("category")
        if (not cat or cat == UNKNOWN) and cfg.category_field:
            cat = read_field(ev, cfg.category_field, ev.codec)
        if not cat or cat == UNKNOWN:
            return None if cfg.unknown == "drop" else UNKNOWN
        if cfg.level > 1:
            path = meta.get("category_path")
            if path:
                return "/".join(str(p) for p in tuple(path)[: cfg.level])
        return str(cat)

    # --- releasing -----------------------------------------------------------------

    def _gone_half(self, h: Held) -> None:
        """Bookkeeping after one half of ``h`` left its bucket."""
        if h.ubucket is None and h.qbucket is None:
            self.memory.unhold(h.pair)
            self.journal.left(h)
        else:
            self.journal.moved(h)

    def _gone_halves(self, taken: tuple[list[Held], list[Held]]) -> None:
        """Bookkeeping after query and user halves were taken from a bucket (of an event a half, or both)."""
        queries, users = taken
        for h in dict.fromkeys((*queries, *users)):
            self._gone_half(h)

    def _release(self, bucket: Bucket, out: list[Event]) -> None:
        """Release while the bucket holds k events of at least ``min_users`` distinct users and a valid
        pair exists; otherwise k <- ceil(k * delta) (paper 001's rule, which is ``min_users: 2``), or
        ``max_k_policy`` once k is ``max_k``."""
        if len(bucket.queries) < bucket.retry_at:  # max_k_policy hold: retried once grown by delta, as k would
            return
        cfg = self.config
        min_users = cfg.min_users or bucket.base
        by_user = cfg.user_draw == "user"
        pool, memory = self.pool, self.memory
        specialised = self.SPECIALISED
        fast_draw = specialised and by_user
        while len(bucket.queries) >= bucket.k:
            drawn: tuple[int, str, int] | None
            by_name = bucket.by_name
            if len(by_name) < min_users:
                drawn = None
            elif bucket.open is not None:  # its valid pairs are kept (pairs.opened): one of them
                drawn = kept_draw(bucket, pool, by_user)
            elif fast_draw and len(by_name) > 1 and pool.i + 3 <= len(pool.words):
                # SPECIALISED: draw()'s first try with RandomPool.below and PairMemory.avoided written out (the
                # same words, the same result); when that pair is not valid, draw() makes the other tries.
                words, i = pool.words, pool.i
                queries = bucket.queries
                names = bucket.names
                qi = words[i] % len(queries)
                q = queries[qi]
                name = names[words[i + 1] % len(names)]
                pair = hash((name, q.text))
                if (
                    name != q.sender
                    and pair not in memory.held
                    and pair not in memory.batch
                    and pair not in memory.recent
                    and pair not in memory.older
                    and pair not in memory.future
                ):
                    drawn = qi, name, words[i + 2] % len(by_name[name])
                    pool.i = i + 3
                else:
                    pool.i = i + 2
                    drawn = draw(bucket, pool, memory, by_user, TRIES - 1)
            else:
                drawn = draw(bucket, pool, memory, by_user)
            if drawn is None:
                if bucket.raise_k(cfg.delta):
                    self.journal.k_changed(bucket.name)
                    self.counts["k_raised"] += 1
                else:
                    self._at_max_k(bucket)
                return
            qi, name, si = drawn
            u = bucket.pop_user(name, si)
            q = bucket.pop_query(qi)
            # SPECIALISED: skip _gone_half where it does nothing (a new event whose other half is still held)
            if not specialised or u.qbucket is None or not u.new:
                self._gone_half(u)
            if not specialised or q.ubucket is None or not q.new:
                self._gone_half(q)
            out.append(self.sides.emit(q, u, self._stream_time))
            self._held -= 1
            bucket.retry_at = 0
            if cfg.decay and bucket.k > bucket.base and bucket.decay_k(cfg.delta):
                self.journal.k_changed(bucket.name)

    # --- durability ---------------------------------------------------------------

    def _load(self) -> None:
        """Rebuild the buckets, their k and the pair memory from the state store."""
        rows, ks = self.store.load()
        self._next_id = (rows[-1][0] + 1) if rows else 1
        for row_id, ubucket, qbucket, arrived, blob in rows:
            try:
                ev, fmt = unpack_event(blob, self.ctx.codec_for)
            except Exception as exc:  # bytes changed under SQLite's own structure (msgpack, UTF-8, shape)
                raise StateDamaged(
                    f"has a damaged held event (category_buffer row {row_id}: {type(exc).__name__})"
                ) from None
            sender = str(ev.user)
            text = normalise_text(ev.query)
            pair = pair_of(sender, text)
            h = Held(row_id, ev, sender, text, pair, arrived, fmt, self.sides.restored_values(ev), new=False)
            self.memory.hold(pair)
            if ubucket is not None:
                self._bucket(ubucket).add_user(h)
            if qbucket is not None:
                self._bucket(qbucket).add_query(h)
        for name, k in ks.items():
            b = self._bucket(name)
            b.k = min(max(k, b.base), b.max_k)
            if b.k != k:  # stored by an earlier version or config (above today's max_k): store the capped k
                self.journal.k_changed(name)
        self._held = sum(len(b.queries) for b in self.buckets.values())
        if rows:
            log.info("buffer_restored", filter=self.NAME, held=self._held, buckets=len(self.buckets))

    def defer_commits(self, batches: int) -> None:
        """Write the held rows every ``batches`` batches and at the final flush (:meth:`.Journal.commit`)."""
        self.journal.every = max(1, batches)

    def _commit(self, final: bool = False) -> None:  # the arrivals, releases and k changes since the last one
        not_kept = self.journal.commit(self.store, self.buckets, final)
        if not_kept:
            self.counts["record_not_kept"] += not_kept

    # --- the Filter contract ------------------------------------------------------

    def prescan(self, batches: Iterable[list[Event]]) -> None:
        """Learn the archive's (user, text) pairs whose text has more than one sender.

        Only such a pair can be re-created, so only those are kept: in memory,
        as salted 64-bit hashes, until the process ends (see :func:`.pairs.shared_pairs`).
        """
        self.prescan_learn(self.prescan_collect(batches))

    def prescan_collect(self, batches: Iterable[list[Event]]) -> bytes:
        """:meth:`prescan`'s first half, which changes nothing here (it may run in another, forked process):
        the events read and their shared pairs, as bytes for :meth:`prescan_learn`."""
        return pack_result(*shared_pair_array(batches))

    def prescan_learn(self, result: bytes) -> None:
        """:meth:`prescan`'s second half: keep the shared pairs :meth:`prescan_collect` found."""
        read, shared = unpack_result(result)
        self.counts["prescanned"] += read
        if read:
            self.counts["prescan_shared_pairs"] = self.memory.learn_future(shared)
            # the whole archive's shared pairs, before any arrival and with nothing restored: validity is static
            self.memory.static = not self._held and not self.counts["arrived"]

    def prescan_later(self, pending: PendingPass) -> None:
        """The first pass runs elsewhere: batches wait, unchanged and unreleased, until its result is in (see
        :mod:`.firstpass`), then arrive in their order, as after :meth:`prescan`."""
        self._waiting = Waiting(pending)

    def _after_first_pass(self) -> list[Event]:
        """Take the first pass's result (waiting for it) and run the batches that waited for it."""
        waiting, self._waiting = self._waiting, None
        if waiting is None:
            return []
        self.prescan_learn(waiting.pending.result())
        out: list[Event] = []
        for batch, now in waiting.batches:
            out += self._arrive(batch, now)
        return out

    def process(self, batch: list[Event]) -> list[Event]:
        """Add each event to its bucket and release what the buckets allow; commit the batch (or keep it until
        the first pass's result is in: :meth:`prescan_later`)."""
        now = self.ctx.clock()
        if self._waiting is None:
            return self._arrive(batch, now)
        if not self._waiting.add(batch, now):
            return []
        return self._after_first_pass()

    def _arrive(self, batch: list[Event], now: float) -> list[Event]:
        """:meth:`process` of a batch that came at ``now``."""
        cfg = self.config
        out: list[Event] = []
        memory = self.memory
        specialised = self.SPECIALISED
        # SPECIALISED: the common bucket naming (level 1, no category_field) and user side (the user id only)
        fast_names = specialised and cfg.level == 1 and cfg.category_field is None
        simple = specialised and self.sides.simple
        senders = [str(ev.user) for ev in batch]
        if specialised:  # SPECIALISED: normalise_text and pair_of
            texts = [" ".join(str(ev.query).casefold().split()) for ev in batch]
            pairs = [hash(key) for key in zip(senders, texts)]
        else:
            texts = [normalise_text(ev.query) for ev in batch]
            pairs = [pair_of(sender, text) for sender, text in zip(senders, texts)]
        memory.look_ahead(pairs)  # a pair that occurs later in this batch is not created either
        dropped = 0
        suppressed_before = self.counts["suppressed_max_k"]
        for ev, sender, text, pair in zip(batch, senders, texts, pairs):
            cat = ev.meta.get("category") if fast_names else None
            name = cat if type(cat) is str and cat and cat != UNKNOWN else self._bucket_name(ev)
            if name is None:
                dropped += 1
                if self._suppressed is not None:
                    self._suppressed.append(ev)
                continue
            self._stream_time = ev.time
            codec = ev.codec
            fmt = codec.format if codec is not None else None
            if codec is not None and fmt not in self.codecs:
                self.codecs[fmt] = codec
            uvalues = (ev.user,) if simple else self.sides.user_values(ev, codec)
            h = Held(self._next_id, ev, sender, text, pair, now, fmt, uvalues, new=True)
            self._next_id += 1
            bucket = self.buckets.get(name) or self._bucket(name)
            if specialised:
                # SPECIALISED: Bucket.add_user, Journal.arrived, PairMemory.hold and remember
                h.ubucket = h.qbucket = name
                slots = bucket.by_name.get(sender)
                new_user = slots is None
                if slots is None:
                    bucket.by_name[sender] = [h]
                    bucket.name_pos[sender] = len(bucket.names)
                    bucket.names.append(sender)
                else:
                    slots.append(h)
                bucket.add_query(h)
                self.journal.new.append(h)
                held = memory.held
                held[pair] = held.get(pair, 0) + 1
                if memory.cap:
                    memory.recent.add(pair)
                    if len(memory.recent) * 2 >= memory.cap:
                        memory.older = memory.recent
                        memory.recent = set()
            else:
                bucket.add_user(h)
                new_user = len(bucket.by_name[sender]) == 1
                bucket.add_query(h)
                self.journal.arrived(h)
                memory.hold(pair)
                memory.remember(pair)
            if bucket.open is not None:
                opened(bucket, h, new_user, memory)
            if len(bucket.queries) >= bucket.k:
                self._release(bucket, out)
        arrived = len(batch) - dropped
        self._held += arrived
        if dropped:
            self.counts["dropped_unknown"] += dropped
        self.counts["arrived"] += arrived
        memory.end_batch()
        suppressed = self.counts["suppressed_max_k"] - suppressed_before
        if suppressed:
            log.info("events_suppressed", filter=self.NAME, reason="max_k", count=suppressed)
        if self._held > cfg.max_held:
            self._overflow()
        self._apply_max_hold(out)
        self._commit()
        self.counts["released"] += len(out)
        return out

    def flush(self, final: bool) -> list[Event]:
        """Apply the max_hold policy (not on final: shutdown leaves held events held). Batches still waiting for
        the first pass arrive first (what they release is released)."""
        arrived = self._after_first_pass()  # counted as released by _arrive
        if final:
            self._commit(final=True)  # what a deferring journal still has (defer_commits)
            return arrived
        out: list[Event] = []
        self.memory.end_batch()
        self._apply_max_hold(out)
        self._commit(final=True)
        self.counts["released"] += len(out)
        return arrived + out

    def held(self) -> int:
        """Events held: query halves still in a bucket, and events waiting for the first pass."""
        return self._held + (self._waiting.events if self._waiting is not None else 0)

    def held_users(self) -> Counter[tuple[str, str]]:
        """Held user halves by (user, bucket): what each user is still owed (for the profile invariant)."""
        out: Counter[tuple[str, str]] = Counter()
        for b in self.buckets.values():
            for name, slots in b.by_name.items():
                out[(name, b.name)] += len(slots)
        return out

    def stats(self) -> dict[str, Any]:
        """Held events, current k and its cap (max_k) per bucket (counts only)."""
        return {
            "held_per_category": {b.name: len(b.queries) for b in self.buckets.values() if b.queries},
            "k_per_category": {b.name: b.k for b in self.buckets.values()},
            "max_k_per_category": {b.name: b.max_k for b in self.buckets.values()},
        }
