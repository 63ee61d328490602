"""``category_buffer``'s :class:`~sidecar.api.Filter`: arrivals, releases, removal policies, durability.

The algorithm (paper 001, Algorithm 2) and where this implementation departs
from the paper, and why, are described in the package docstring
(:mod:`filters.category_buffer`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar

import structlog

from filters.category_buffer.buckets import CORE as CORE_IN_USE
from filters.category_buffer.buckets import UNKNOWN, Bucket, Held
from filters.category_buffer.config import CategoryBufferConfig
from filters.category_buffer.firstpass import PendingPass, Waiting, pack_result, unpack_result
from filters.category_buffer.pairs import PairMemory, normalise_text, pair_of, shared_pair_array
from filters.category_buffer.rand import RandomPool
from filters.category_buffer.removal import RemovalPolicies
from filters.category_buffer.sides import Sides, read_field
from filters.category_buffer.store import HeldStore, Journal, unpack_event
from sidecar.api import BuildContext, Codec, ConfigValueError, Event, Filter, StateDamaged

if TYPE_CHECKING:
    from filters.category_buffer.core import Buffer

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
    #: The module of the per-event work (:mod:`.core`, :class:`.core.Buffer`, its classes): compiled with mypyc when
    #: built from its current source, else the source; a test runs both on the same random words.
    CORE: ClassVar[ModuleType] = CORE_IN_USE

    def __init__(self, config: CategoryBufferConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        if ctx.state is None:
            raise ConfigValueError("k", "category_buffer needs the state store (state_dir)")
        core = self.CORE
        self.pool: RandomPool = core.RandomPool(ctx.token_bytes)
        self.store = HeldStore(ctx.state)
        self.journal = Journal(core.Rows())  # the rows of the core in use (compiled or its source)
        self.memory: PairMemory = core.PairMemory(config.avoid_repeat_pairs)
        #: the codec of each format seen in a batch (restored events are encoded with it)
        self.codecs: dict[str | None, Codec] = {}
        self.sides = Sides(config, self.codecs, self.counts, ctx.codec_for)
        plain_names = config.level == 1 and config.category_field is None
        rules = (plain_names, self.sides.simple, config.time == "release", config.min_users or 0)
        self.core: Buffer = core.Buffer(
            memory=self.memory,
            pool=self.pool,
            journal=self.journal.rows,
            counts=self.counts,
            codecs=self.codecs,
            rules=(*rules, config.user_draw == "user", config.delta, config.decay, config.max_k_policy == "suppress"),
            new_bucket=self._bucket,
            bucket_name=self._bucket_name,
            user_values=self.sides.user_values,
            emit=self.sides.emit,
            at_max_k=self._at_max_k,
            dropped=self._dropped,
        )
        #: the buckets by name (the same dict as the core's)
        self.buckets: dict[str, Bucket] = self.core.buckets
        #: batches waiting for a first pass made elsewhere (prescan_later); None: none is awaited
        self._waiting: Waiting | None = None
        self._load()

    @property
    def _held(self) -> int:  # the core's count (RemovalPolicies declares the attribute)
        """Query halves held in the buckets."""
        return self.core.held

    @_held.setter
    def _held(self, n: int) -> None:
        self.core.held = n

    def _dropped(self, ev: Event) -> None:
        """An uncategorised event dropped (``unknown: drop``): named to a join stage that asked."""
        if self.core.suppressed is not None:
            self.core.suppressed.append(ev)

    # --- buckets -------------------------------------------------------------------

    def _bucket(self, name: str) -> Bucket:
        """The bucket ``name``, created at its base k (``k_per_category`` or ``k``) on first use."""
        b = self.buckets.get(name)
        if b is None:
            per_category = self.config.k_per_category
            base = per_category[name] if per_category and name in per_category else self.config.k
            b = self.buckets[name] = self.CORE.Bucket(name, base, self.config.max_k_of(base))
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

    def _release(self, bucket: Bucket, out: list[Event]) -> None:
        """Release what ``bucket`` allows (:meth:`.core.Buffer.release`)."""
        self.core.release(bucket, out)

    # --- durability ---------------------------------------------------------------

    def _load(self) -> None:
        """Rebuild the buckets, their k and the pair memory from the state store."""
        rows, ks = self.store.load()
        self.core.next_id = (rows[-1][0] + 1) if rows else 1
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
            uvalues = self.sides.restored_values(ev)
            h: Held = self.CORE.Held(row_id, ev, sender, text, pair, arrived, fmt, uvalues, False)
            self.memory.hold(pair)
            if ubucket is not None:
                self._bucket(ubucket).add_user(h)
            if qbucket is not None:
                self._bucket(qbucket).add_query(h)
        for name, k in ks.items():
            b = self._bucket(name)
            b.k = min(max(k, b.base), b.max_k)
            if b.k != k:  # stored by an earlier version or config (above today's max_k): store the capped k
                self.journal.rows.k_changed(name)
        self._held = sum(len(b.queries) for b in self.buckets.values())
        if rows:
            log.info("buffer_restored", filter=self.NAME, held=self._held, buckets=len(self.buckets))

    def defer_commits(self, batches: int) -> None:
        """Write the held rows every ``batches`` batches and at the final flush (:meth:`.Journal.commit`)."""
        self.journal.every = max(1, batches)

    def commit_deferred(self) -> None:
        """Write what a deferring journal still holds (:meth:`defer_commits`): ``replay --resume`` commits it with
        its checkpoint."""
        self._commit(final=True)

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

    def _outgrown(self) -> None:
        """More events arrive than the first pass read (the file grew in between): the archive's shared pairs
        no longer decide alone. The pair memory keeps every held event's pair from now on (the recent arrivals
        before this batch are not known: as after a restart) and no bucket keeps its valid pairs."""
        self.memory.static = False
        held = {h for b in self.buckets.values() for h in b.queries}
        held.update(h for b in self.buckets.values() for hs in b.by_name.values() for h in hs)
        for h in held:
            self.memory.hold(h.pair)
        for b in self.buckets.values():
            b.open = None
        log.warning("prescan_outgrown", filter=self.NAME, reason="more_events_than_the_first_pass")

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
        """:meth:`process` of a batch that came at ``now``: the core's arrivals and releases
        (:meth:`.core.Buffer.arrive`), then the removal policies and the commit."""
        counts = self.counts
        if self.memory.static and counts["arrived"] + counts["dropped_unknown"] + len(batch) > counts["prescanned"]:
            self._outgrown()
        suppressed_before = counts["suppressed_max_k"]
        out = self.core.arrive(batch, now)
        self.memory.end_batch()
        suppressed = self.counts["suppressed_max_k"] - suppressed_before
        if suppressed:
            log.info("events_suppressed", filter=self.NAME, reason="max_k", count=suppressed)
        if self._held > self.config.max_held:
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
