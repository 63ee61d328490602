"""Events that follow another event's outcome: a UBI click follows its query (``format: ubi``).

**The seam.** A stage of the runtime around the chain (``Pipeline`` calls :meth:`Joins.process` and
:meth:`Joins.flush` where it would call the chain's), not a filter: every filter keeps seeing query events only
and none learns about UBI. The codec says what joins what: a codec with ``join_of(event) -> (key, is_query) |
None`` (:class:`adapters.ubi.codec.UbiCodec`) makes the schema's format a joined one. A query event goes through
the chain; an *attached* event (a click: ``is_query`` false) never does. When the chain releases a query (at once,
or later from a buffer such as ``category_buffer``, under a reassigned or pseudonymized user), its attached events
are released right after it carrying the **released query's user** (and its released time when the chain moved
the query's time, as ``category_buffer`` ``time: release`` does; otherwise each keeps its own time); when the
query is dropped, they are dropped with it (counted ``dropped_with_query``).

**What happens to an attached event**, by what is known of its query (state keyed by the join key in the state
store, written in the batch's transaction: a restart keeps the join):

* released (an outcome is recorded): the event leaves at once with the released user;
* dropped: the event is dropped (``dropped_with_query``);
* pending (sent into the chain, neither released nor known dropped, e.g. held by ``category_buffer``): the event
  is held (``join_held``) until the query's outcome is known;
* unknown (never seen): held too, ``hold_seconds`` at most, then dead-lettered (``query_unknown``).

**When a pending query is known dropped.** The stage traces the chain filter by filter (:class:`Suppressed`,
the chain's ``trace``): a query that entered a filter that holds nothing (``drop``, ``hipaa_scrub``...) and did
not leave it was dropped by it, in ``process`` as in a release (a query a buffer let go, dropped by a later
filter): its held events are dropped at once (``dropped_with_query``) and the query counted by the filter's name
(``queries_dropped``). A query that entered a buffering filter (``category_buffer``) and did not leave it is held,
unless the buffer names it among the events it suppressed in that step (``Filter.take_suppressed``:
``category_buffer`` names its suppressions, no category, ``max_k``, ``max_held``, ``max_hold``): then it was dropped,
counted by the buffer's name, and its events are dropped at once. Drops a buffer does not name stay pending
(counted ``buffer_drops_unidentified``) until released, until the chain holds nothing at all (then they were
dropped), or for ``pending_seconds`` at most: their held events are then dead-lettered (``query_not_released``)
and later ones dropped.

**Bounds.** Held events: ``max_held`` (the oldest beyond it are dead-lettered: ``query_unknown`` or
``query_not_released``). Outcomes are remembered ``outcome_seconds`` (and ``max_outcomes`` at most): an event
arriving later than that is an event of an unknown query. Pending queries: ``max_pending`` (the oldest beyond it
expire as past ``pending_seconds``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import structlog

from sidecar.api import Codec, Event, Filter, SchemaConfig
from sidecar.chain import Chain
from sidecar.deadletter import DeadLetters
from sidecar.joinstore import DROPPED, HeldRow, JoinStore, Released
from sidecar.state import StateStore

__all__ = ["JoinBounds", "Joins", "NoJoins", "build_joins"]

log = structlog.get_logger("querylog.joins")

JoinOf = Callable[[Event], "tuple[str, bool] | None"]


@dataclass(frozen=True)
class JoinBounds:
    """How long and how much the join stage keeps (see the module doc); the defaults are documented in
    docs/STACK.md (UBI)."""

    hold_seconds: float = 600.0
    pending_seconds: float = 172_800.0
    outcome_seconds: float = 172_800.0
    max_held: int = 100_000
    max_pending: int = 1_000_000
    max_outcomes: int = 1_000_000
    #: how often the time bounds are checked in :meth:`Joins.process` (a flush always checks them)
    check_every_seconds: float = 1.0


class NoJoins:
    """The stage of a format that joins nothing: the chain alone."""

    active = False

    def process(self, chain: Chain, events: list[Event]) -> list[Event]:
        return chain.process(events) if events else []

    def flush(self, chain: Chain, final: bool) -> list[Event]:
        return chain.flush(final)

    def held(self) -> int:
        return 0

    def stats(self) -> dict[str, Any]:
        return {}


def _join_of(ev: Event) -> tuple[str, bool] | None:
    join_of: JoinOf | None = getattr(ev.codec, "join_of", None)
    return join_of(ev) if join_of is not None else None


def _query_keys(events: list[Event]) -> list[str]:
    """The join keys of the query events among ``events``."""
    keys = []
    for ev in events:
        joined = _join_of(ev)
        if joined is not None and joined[1]:
            keys.append(joined[0])
    return keys


class Suppressed:
    """The chain's trace for one ``process`` or ``flush`` (see the module doc): which queries a filter dropped,
    by the filter's name, and how many events buffering filters dropped without saying which."""

    def __init__(self, filters: list[Filter[Any]]) -> None:
        self.held = {id(f): f.held() for f in filters}
        for f in filters:
            if f.BUFFERING:
                f.report_suppressed()  # a buffer that can name what it suppresses (category_buffer) keeps it
        #: join key -> the name of the filter that dropped the query
        self.dropped: dict[str, str] = {}
        self.unidentified = 0

    def __call__(self, f: Filter[Any], entered: list[Event], left: list[Event]) -> None:
        before = self.held.get(id(f), 0)
        now = self.held[id(f)] = f.held()
        gone = len(entered) - len(left) - (now - before)  # events the step dropped
        if f.BUFFERING:  # the events it names as suppressed; the rest of what it dropped stays unidentified
            suppressed = f.take_suppressed()
            for key in _query_keys(suppressed):
                self.dropped.setdefault(key, f.NAME)
            self.unidentified += max(0, gone - len(suppressed))
            return
        if gone <= 0:  # nothing dropped: a query that entered and did not leave is held by this filter
            return
        out = set(_query_keys(left))
        for key in _query_keys(entered):
            if key not in out:
                self.dropped.setdefault(key, f.NAME)


class Joins:
    """The join stage of one runtime; see the module doc."""

    active = True

    def __init__(
        self,
        state: StateStore,
        dead: DeadLetters,
        codecs: Callable[[str], Codec | None],
        bounds: JoinBounds = JoinBounds(),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.store = JoinStore(state)
        self.dead = dead
        self.codecs = codecs
        self.bounds = bounds
        self.clock = clock
        self.counts: Counter[str] = Counter()
        #: queries known dropped, by who dropped them: a filter's name, ``chain_holds_nothing``, ``no_buffer``
        self.queries_dropped: Counter[str] = Counter()
        self._checked = 0.0

    # ---- the stage ---------------------------------------------------------------------------------
    def process(self, chain: Chain, events: list[Event]) -> list[Event]:
        """Run ``events`` through ``chain``, attached events aside; what leaves now: each released query followed
        by the attached events held for it, then the batch's attached events whose query is released (in this
        batch or earlier)."""
        now = self.clock()
        into: list[Event] = []
        attached: list[tuple[str, Event]] = []
        queries: dict[str, Any] = {}  # key -> the query's time as it enters the chain
        for ev in events:
            joined = _join_of(ev)
            if joined is not None and not joined[1]:
                attached.append((joined[0], ev))
                continue
            if joined is not None:
                queries[joined[0]] = ev.time
            into.append(ev)
        self.store.add_pending(queries.items(), now)
        trace = Suppressed(chain.filters)
        out = self._released(chain.process(into, trace) if into else [], now)
        self._suppressed(trace, now)
        if queries and not any(f.BUFFERING for f in chain.filters):
            for key in queries:  # neither released nor held: a chain without a buffer dropped it
                if self.store.is_pending(key):
                    self._dropped(key, now, "no_buffer")
        for key, ev in attached:  # after the chain: the outcome of a query of this batch is known already
            self._place(key, ev, now, out)
        self._expire(chain, now, force=False)
        return out

    def flush(self, chain: Chain, final: bool) -> list[Event]:
        """The chain's release, each released query followed by its attached events; time bounds checked."""
        now = self.clock()
        trace = Suppressed(chain.filters)
        out = self._released(chain.flush(final, trace), now)
        self._suppressed(trace, now)
        self._expire(chain, now, force=True)
        return out

    def held(self) -> int:
        """Attached events held for their query."""
        return self.store.held

    def stats(self) -> dict[str, Any]:
        """Held events, pending queries, remembered outcomes and the counts by outcome (never a value)."""
        return {
            "held": self.held(),
            "pending_queries": self.store.count("join_pending"),
            "outcomes": self.store.count("join_outcome"),
            "counts": dict(self.counts),
            "queries_dropped": dict(self.queries_dropped),
        }

    # ---- one attached event ------------------------------------------------------------------------
    def _place(self, key: str, ev: Event, now: float, out: list[Event]) -> None:
        outcome = self.store.outcome(key)
        if outcome is DROPPED:
            self.counts["dropped_with_query"] += 1
        elif outcome is not None:
            self._follow(ev, outcome)
            out.append(ev)
        else:
            codec = ev.codec
            assert codec is not None  # _join_of found a codec
            self.store.hold(key, now, codec.format, codec.encode(ev), ev.eol)
            self.counts["held"] += 1

    def _released(self, out: list[Event], now: float) -> list[Event]:
        """``out`` with each released query's held events after it, their user the query's released user."""
        if not out:
            return out
        result: list[Event] = []
        for ev in out:
            result.append(ev)
            joined = _join_of(ev)
            if joined is None or not joined[1]:
                continue
            outcome = self.store.released(joined[0], ev.user, ev.time, now)
            for follower in self._events(self.store.take(joined[0])):
                self._follow(follower, outcome)
                result.append(follower)
        return result

    def _follow(self, ev: Event, outcome: Released) -> None:
        """An attached event takes its query's released user, and its released time when the chain moved it."""
        ev.user = outcome.user
        if outcome.moved:
            ev.time = outcome.time
        self.counts["released_with_query"] += 1

    def _suppressed(self, trace: Suppressed, now: float) -> None:
        """The queries the chain's filters dropped in this step: known dropped, their held events dropped."""
        for key, name in trace.dropped.items():
            if self.store.is_pending(key):
                self._dropped(key, now, name)
        if trace.unidentified:
            self.counts["buffer_drops_unidentified"] += trace.unidentified

    def _dropped(self, key: str, now: float, by: str) -> None:
        self.store.dropped(key, now)
        n = len(self.store.take(key))
        self.counts["dropped_with_query"] += n
        self.queries_dropped[by] += 1

    def _events(self, rows: list[HeldRow]) -> list[Event]:
        """Held rows read back by the codec of their format (a row no codec reads is dead-lettered)."""
        out: list[Event] = []
        for _id, _key, _since, fmt, line, eol in rows:
            codec = self.codecs(fmt)
            bad: list[tuple[int, str]] = []
            events = codec.decode_many([line], eol, bad) if codec is not None else []
            if len(events) == 1:
                out.append(events[0])
            else:
                self.dead.add("join_held_unreadable", "joins", None, line)
                self.counts["join_held_unreadable"] += 1
        return out

    # ---- bounds ------------------------------------------------------------------------------------
    def _expire(self, chain: Chain, now: float, *, force: bool) -> None:
        b = self.bounds
        if chain.held() == 0:  # nothing held: no pending query can be released any more
            for key in self.store.all_pending():
                self._dropped(key, now, "chain_holds_nothing")
        if not force and now - self._checked < b.check_every_seconds:
            return
        self._checked = now
        for key in self.store.pending_before(now - b.pending_seconds, b.max_pending):
            self.store.dropped(key, now)
            self._dead("query_not_released", self.store.take(key))
        self._dead("query_unknown", self.store.unknown_before(now - b.hold_seconds))
        for row in self.store.oldest_beyond(b.max_held):
            pending = self.store.is_pending(row[1]) or self.store.outcome(row[1]) is not None
            self._dead("query_not_released" if pending else "query_unknown", [row])
        self.store.forget_outcomes(now - b.outcome_seconds, b.max_outcomes)

    def _dead(self, reason: str, rows: list[HeldRow]) -> None:
        for row in rows:
            self.dead.add(reason, "joins", None, row[4])
            self.counts[reason] += 1


def build_joins(
    schema: SchemaConfig, state: StateStore, dead: DeadLetters, codecs: Callable[[str], Codec | None]
) -> Joins | NoJoins:
    """The join stage for the schema's format: :class:`Joins` when its codec joins records (``join_of``)."""
    if schema.format in ("auto", "tsv", "jsonl"):
        return NoJoins()
    codec = codecs(schema.format)
    if codec is None or not callable(getattr(codec, "join_of", None)):
        return NoJoins()
    log.info("join_stage_on", format=schema.format)
    return Joins(state, dead, codecs)
