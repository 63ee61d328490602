"""The runtime behind every entry point: state store, chain, dead letters, sinks.

:class:`Pipeline` is the :class:`~sidecar.api.Runtime` that sources drive.
"""

from __future__ import annotations

import contextlib
import random
import sqlite3
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import structlog

from sidecar.api import (
    BuildContext,
    Codec,
    Event,
    Filter,
    Receipt,
    RecordBatch,
    Sink,
    StateDamaged,
)
from sidecar.building import build_component, codec_lookup, create_positions, record_bytes, sink_stats
from sidecar.chain import Chain
from sidecar.config import ComponentSpec, ErrorCollector, LoadedConfig
from sidecar.deadletter import DeadLetters
from sidecar.fieldpolicy import field_policies
from sidecar.joins import build_joins
from sidecar.liveaudit import LiveAudit, NoAudit
from sidecar.outbox import OutboxFull
from sidecar.outboxes import backpressure, outbox_factory
from sidecar.readiness import not_ready
from sidecar.release import TimedRelease
from sidecar.state import StateError, StateStore
from sidecar.timings import Timings

log = structlog.get_logger("querylog.pipeline")

__all__ = ["Pipeline", "build_component", "codec_lookup"]  # the two builders are re-exported for drivers and tests


class Pipeline:
    """A built chain with its state store, dead letters and sinks; shared by replay and serve."""

    def __init__(
        self,
        config: LoadedConfig,
        *,
        seed: int | None = None,
        with_sinks: bool = True,
        validate_only: bool = False,
        extra_sinks: Sequence[ComponentSpec] = (),
    ) -> None:
        """``validate_only``: build every component to check the config, touching nothing (``check-config``):
        the state store is a throw-away one in a temporary folder and nothing is dead-lettered to a file.
        ``extra_sinks``: a driver's own sinks (``replay -o``), built after the configured ones (``with_sinks``)."""
        self.config = config
        self.started = time.monotonic()
        self._scratch = tempfile.TemporaryDirectory(prefix="querylog-check-") if validate_only else None
        self.state = StateStore(self._scratch.name if self._scratch else config.state_dir)
        rng = random.Random(seed) if seed is not None else random.SystemRandom()
        self.dead = DeadLetters(None if validate_only else config.dead_letter_path, config.dead_letter_max_bytes)
        schema = config.sidecar.schema
        self.ctx = BuildContext(
            config_dir=config.config_dir,
            state=self.state,
            rng=rng,
            seed=seed,
            schema=schema,
            dead_letters=self.dead,
            codecs=codec_lookup(schema),
            max_record_bytes=config.sidecar.limits.max_record_bytes,
            validate_only=validate_only,
            outboxes=outbox_factory(self.state, random.Random()),  # retry jitter only: no CSPRNG needed
        )
        filters: list[Filter[Any]] = []
        self.sinks: list[Sink[Any]] = []
        errors = ErrorCollector()  # each component is built on its own: report every one that fails
        try:
            with errors.guard():
                self.fields = field_policies(config, self.ctx, self.dead)
            for spec in config.filters:
                with errors.guard():
                    try:
                        filters.append(build_component(spec, self.ctx, config))
                    except StateDamaged as exc:  # a filter's rows no longer decode: the database is damaged
                        raise StateError(self.state.path, str(exc)) from None
            for spec in (*(config.sinks if with_sinks else ()), *extra_sinks):
                with errors.guard():
                    self.sinks.append(build_component(spec, self.ctx, config))
            errors.raise_any()
            #: events that follow another's outcome (UBI clicks their query: ``format: ubi``), around the chain
            self.joins = build_joins(schema, self.state, self.dead, self.ctx.codecs)
        except BaseException:
            for f in filters:
                f.close()
            for sink in self.sinks:
                sink.close()
            self.state.close()
            raise
        self.chain = Chain(filters)
        #: one batch at a time through the chain and sinks, whichever source calls (re-entrant: a source's
        #: ``transaction()`` block calls process/deliver/flush_sinks under it)
        self._lock = threading.RLock()
        self._in_transaction = False  # a transaction() block is open: a nested one joins it
        self._sinks_started = False
        self._timer: TimedRelease | None = None
        self.timings = Timings()  # seconds per batch by source and by sink (the chain times its filters)
        #: config reloads by result (``success``, ``failure``): see :meth:`reload`
        self.reloads: Counter[str] = Counter()
        self.audit: LiveAudit | NoAudit = NoAudit()  #: what was released, on /metrics (serve sets it)
        log.info("pipeline_built", filters=[f.NAME for f in filters], sinks=[s.NAME for s in self.sinks])

    # ---- the Runtime contract -------------------------------------------------------------------
    @property
    def dead_letters(self) -> DeadLetters:
        return self.dead

    @property
    def lock(self) -> threading.RLock:
        return self._lock

    @property
    def filters(self) -> list[Filter[Any]]:
        return self.chain.filters

    def _decode(self, batch: RecordBatch, reasons: Counter[str]) -> list[Event]:
        """Decode a batch; bad records go to the dead letters, counted by reason in ``reasons``."""
        bad: list[tuple[int, str]] = []
        events = batch.codec.decode_many(batch.records, "\n", bad)
        for idx, reason in bad:
            pos = batch.positions[idx] if batch.positions is not None else None
            record = batch.records[idx]
            self.dead.add(reason, batch.origin, pos, record if isinstance(record, str | bytes) else None)
            reasons[reason] += 1
        if batch.last_eol == "" and events and (not bad or bad[-1][0] != len(batch.records) - 1):
            events[-1].eol = ""
        if self.fields is not None and events:  # every non-role field through its policy (schema.fields)
            events = self.fields.apply(events, batch, bad, reasons)
        return events

    def receive(self, batch: RecordBatch) -> Receipt:
        """Decode a batch of records, run the chain, deliver to the sinks and flush them, commit (with the
        batch's checkpoint): durable when it returns. :class:`~sidecar.api.Backpressure` before anything ran
        when a sink's outbox is full."""
        t0 = time.perf_counter()
        reasons: Counter[str] = Counter()
        with self.transaction():  # state changes commit with the delivery
            events = self._decode(batch, reasons)
            audited = self.audit.incoming(events)
            before = self.chain.held() + self.joins.held()
            out = self.joins.process(self.chain, events)
            self.audit.outgoing(out, audited)
            held = self.chain.held() + self.joins.held() - before
            self._deliver_flushed(out, batch.codec, reasons)
            if batch.checkpoint is not None:
                self._commit_position(*batch.checkpoint)
        n = len(events)
        self.timings.source(batch.origin, time.perf_counter() - t0, n)
        dead = sum(reasons.values())
        return Receipt(n, dead, out, held, max(0, n - len(out) - held), reasons)

    def _deliver_flushed(self, out: list[Event], codec: Codec | None, reasons: Counter[str]) -> None:
        """Deliver ``out`` to every sink and flush them (caller holds the transaction); what a sink's format
        cannot frame is dead-lettered there and counted in ``reasons`` as ``refused_by_sink``."""
        if codec is not None:
            self.start_sinks(codec.header_for_output(), codec)
        dead_before = self.dead.total
        self.start_sinks(None, None)  # once, as deliver() does: a no-op when started
        self.timings.write_flush(self.sinks, out)  # deliver() and flush_sinks(), each sink timed
        refused = self.dead.total - dead_before
        if refused:
            reasons["refused_by_sink"] += refused
        self.dead.flush()

    def transform(self, batch: RecordBatch) -> tuple[Receipt, list[Event]]:
        """Run a batch through the chain for a request/response caller (see ``Runtime.transform``)."""
        t0 = time.perf_counter()
        reasons: Counter[str] = Counter()
        events = self._decode(batch, reasons)
        if reasons:
            self.dead.flush()
        if not self.joins.active and not any(f.BUFFERING for f in self.chain.filters):
            # nothing can be released, so nothing is delivered here to commit with: the filters' own savepoints
            # suffice (measured: bench passthrough's gRPC Filter at b=1000 lost 29% to a transaction per batch)
            with self._lock:
                audited = self.audit.incoming(events)
                out = self.chain.process(events) if events else []
                self.audit.outgoing(out, audited)
            n = len(events)
            self.timings.source(batch.origin, time.perf_counter() - t0, n)
            return Receipt(n, sum(reasons.values()), [], 0, n - len(out), reasons), out
        own = {id(e) for e in events}
        with self.transaction():
            audited, before = self.audit.incoming(events), self.chain.held() + self.joins.held()
            out = self.joins.process(self.chain, events)
            self.audit.outgoing(out, audited)
            held = self.chain.held() + self.joins.held() - before
            mine = [e for e in out if id(e) in own]
            released = [e for e in out if id(e) not in own] if len(mine) != len(out) else []
            if released:
                self._deliver_flushed(released, None, reasons)
        n = len(events)
        self.timings.source(batch.origin, time.perf_counter() - t0, n)
        receipt = Receipt(n, sum(reasons.values()), released, held, max(0, n - len(mine) - held), reasons)
        return receipt, mine

    def release(self, final: bool) -> int:
        """Ask buffering filters to release, deliver what they let go and commit it with the delivery.

        Without sinks, a final release has nobody to take it: the events are dead-lettered
        (``undelivered_at_shutdown``, counted, kept in the file); a timed release without sinks asks nothing
        (what is held stays held)."""
        if not self.sinks and not final:
            return 0
        with self.transaction(check_outbox=not final):
            released = self.joins.flush(self.chain, final)
            self.audit.outgoing(released)
            if released and self.sinks:
                self._deliver_flushed(released, None, Counter())
            for ev in released if not self.sinks else ():
                self.dead.add("undelivered_at_shutdown", "runtime", None, record_bytes(ev))
        self.dead.flush()
        return len(released)

    def backpressure(self) -> str | None:
        return backpressure(self.sinks)

    def checkpoint(self, key: str) -> str | None:
        self.state.migrate("source_positions", [create_positions])
        row = self.state.conn.execute("SELECT value FROM source_positions WHERE key = ?", (key,)).fetchone()
        return str(row[0]) if row else None

    def _commit_position(self, key: str, value: str) -> None:
        self.state.migrate("source_positions", [create_positions])
        self.state.conn.execute(
            "INSERT INTO source_positions(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
            (key, value),
        )

    def start_release_timer(self, interval: float | None = None) -> None:
        """Start the process's one release timer (every ``interval`` seconds; None: ``flush_interval_seconds``)
        when a buffering filter and a sink exist; :meth:`close` stops it. Sources never run timers of their own."""
        if self._timer is None and self.sinks and any(f.BUFFERING for f in self.filters):
            every = interval if interval is not None else self.config.sidecar.flush_interval_seconds
            self._timer = TimedRelease(self, every)

    def process(self, batch: list[Event]) -> list[Event]:
        with self._lock:
            return self.joins.process(self.chain, batch)

    def flush(self, final: bool) -> list[Event]:
        with self._lock:
            return self.joins.flush(self.chain, final)

    def held(self) -> int:
        with self._lock:
            return self.chain.held() + self.joins.held()

    @contextmanager
    def transaction(self, *, check_outbox: bool = True) -> Iterator[None]:
        """Commit the filters' state-store writes of the block at once, when it ends (see ``Runtime``); the
        block holds the runtime's lock, so no other source's batch runs in between.

        A sink whose outbox is full refuses the block before it starts (:class:`~sidecar.outbox.OutboxFull`:
        nothing ran, nothing is to be acknowledged); ``check_outbox=False`` skips that check (a caller that
        delivers after the block, as file replay does, and whose sinks apply backpressure when written).

        On an exception inside the block its writes are rolled back: events a filter released stay durably held
        (a sink may already have some of them, so after a restart they can be delivered twice: at-least-once),
        never lost; until a restart the filters' memory may be ahead of their durable state, which only ever
        means more duplicates, never a loss. A block inside another (``replay --resume``'s group of batches,
        :mod:`sidecar.commitgroups`) is part of it: the outer block commits, or rolls back, both.
        """
        conn = self.state.conn
        with self._lock, self.state.lock:
            if self._in_transaction:
                yield
                return
            full = backpressure(self.sinks) if check_outbox else None
            if full is not None:
                raise OutboxFull(full, "full")
            conn.execute("BEGIN IMMEDIATE")
            self._in_transaction = True
            try:
                yield
            except BaseException as exc:
                self._in_transaction = False
                with contextlib.suppress(sqlite3.Error):  # SQLite may have rolled back already (disk full...)
                    conn.execute("ROLLBACK")
                log.warning("batch_rolled_back", error=type(exc).__name__)
                if isinstance(exc, sqlite3.Error):  # the state database: name it and say what to do
                    raise StateError.from_sqlite(self.state.path, exc) from exc
                raise
            self._in_transaction = False
            try:
                conn.execute("COMMIT")
            except sqlite3.Error as exc:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise StateError.from_sqlite(self.state.path, exc) from exc

    def start_sinks(self, header: str | None, codec: Codec | None) -> None:
        """Start the sinks once, with the first input's header and codec."""
        with self._lock:
            if self._sinks_started:
                return
            for sink in self.sinks:
                sink.start(header, codec)
            self._sinks_started = True

    def deliver(self, events: Iterable[Event]) -> None:
        batch = list(events)
        with self._lock:
            if not self._sinks_started:
                self.start_sinks(None, None)
            for sink in self.sinks:
                sink.write(batch)

    def flush_sinks(self) -> None:
        with self._lock:
            for sink in self.sinks:
                sink.flush()

    def reload(self, config: LoadedConfig, *, flush: bool = False, reloadable: frozenset[str] | None = None) -> None:
        """Swap in the chain of ``config`` between batches (see :mod:`sidecar.reload`), or raise its located
        :class:`ConfigError` and keep the running chain; counted in :attr:`reloads` either way. ``flush``: a
        removed buffering filter that holds events flushes into the sinks first instead of refusing the reload;
        ``reloadable``: the top-level keys that may change (default: ``filters``)."""
        from sidecar.reload import RELOADABLE, build_chain, carry_counts, flush_into_sinks, removed_buffering

        with self._lock:
            try:
                chain, unused = build_chain(self, config, flush=flush, reloadable=reloadable or RELOADABLE)
            except BaseException:
                self.reloads["failure"] += 1
                raise
            removed = [f for f in removed_buffering(self.chain.filters, config) if f.held()] if flush else []
            try:
                if removed:
                    flush_into_sinks(self, removed, config)
            except BaseException:
                self.reloads["failure"] += 1
                for f in chain.filters:
                    if f not in self.chain.filters:
                        f.close()
                raise
            self.chain, self.config = carry_counts(self.chain, chain), config
            self.reloads["success"] += 1
            for f in unused:
                f.close()

    # ---- readiness (probes: /readyz, gRPC health) -------------------------------------------------
    draining = False  #: set by ``serve`` on SIGTERM: :meth:`ready` says ``draining`` from then on
    readiness_checks: tuple[Callable[[], list[str]], ...] = ()  #: a driver's own (``serve``: sources listen)

    def ready(self) -> list[str]:
        """What is not ready, by name (see ``Runtime.ready`` and :func:`sidecar.readiness.not_ready`)."""
        return not_ready(self.state.path, self.sinks, self.draining, self.readiness_checks)

    def stats(self) -> dict[str, Any]:
        with self._lock:
            s = self.chain.stats()
            s["sinks"] = [sink_stats(sink) for sink in self.sinks]
            s["latency"] = self.timings.snapshot(self.chain.timers(), len(self.sinks))
            s["live_audit"] = self.audit.stats()
            s["joins"] = self.joins.stats()
        s["dead_letters"] = dict(self.dead.counts)
        s["events_dead_lettered"] = self.dead.total
        s["uptime_seconds"] = round(time.monotonic() - self.started, 3)
        s["config_reloads"] = dict(self.reloads)
        s["fields"] = self.fields.stats() if self.fields is not None else {}
        return s

    def close(self) -> None:
        """Close filters (held state stays in SQLite), sinks, dead letters, database."""
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        final_counts = {k: v for k, v in self.stats().items() if k.startswith("events_")}
        for sink in self.sinks:
            sink.close()
        self.chain.close()
        self.dead.close()
        self.state.close()
        if self._scratch is not None:
            self._scratch.cleanup()
        log.info("pipeline_closed", **final_counts)
