"""A durable, bounded outbox for network sinks, in the state database.

A network sink makes the *hand-over* durable: its ``flush`` puts the encoded batch into an outbox table of the state
database in the runtime's transaction (with the filters' state changes), and a sender thread delivers the rows later:
a restart (even ``kill -9``) finds every undelivered batch, and a source may acknowledge once ``receive`` returned.
A sink gets one from its build context (``ctx.outbox(name, config)``: :mod:`sidecar.outboxes`); or directly::

    outbox = Outbox(ctx.state, "forward_10_0_0_5_24224", max_bytes=256 << 20, max_batches=10_000)
    outbox.put(payload, events)    # in Sink.flush, on the runtime's state connection (a SAVEPOINT)
    outbox.start(send)             # send(payload) -> None delivers one batch, raises on failure
    outbox.pending(), .full()      # Pending(batches, events, bytes) not yet delivered; put() would refuse
    outbox.drain(timeout)          # wait until nothing is pending; stop(timeout): undelivered rows stay; close()

* **Storage.** One table per outbox, ``outbox_<name>`` (``name``: letters, digits, ``_``), rows ``(id, created,
  events, bytes, payload)`` in insertion order (``AUTOINCREMENT``). ``state``: the runtime's state store
  (``BuildContext.state``), or a folder where the outbox opens a store of its own (tools and tests).
* **put** runs on the store's connection under ``state.lock`` in ``SAVEPOINT`` … ``RELEASE`` (never ``BEGIN``): it
  commits with the runtime's transaction (alone outside one). :class:`OutboxFull` when already at a bound; a batch
  starting below is taken whole (a sink never refuses what a buffer released; the runtime checks backpressure first).
* **The sender** is one daemon thread with its own SQLite connection (WAL, ``busy_timeout``), so reading and sending
  never hold the runtime's lock. It sends the oldest row with ``send(payload)`` and deletes it when ``send`` returned
  (under ``state.lock`` for that statement: never racing the runtime's transaction). When ``send`` raises, the same
  row is retried after an exponential backoff with jitter (``retry_initial_seconds`` doubling up to
  ``retry_max_seconds``, each wait drawn from [d/2, d]): batches go out in order, at least once.
  A sender still sending when :meth:`Outbox.close` gave up on it closes its connection itself when it ends.
* **Counters.** ``pending()``/:meth:`Outbox.oldest_age` in memory (exact at start; corrected by an exact count when
  the sender finds the table empty or a put the bound). **Space.** A drained table's pages go back to the file
  system (:mod:`sidecar.vacuum`). **Privacy.** Logs and counters: counts, the outbox name, exception types only.
"""

from __future__ import annotations

import os
import random
import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from sidecar import vacuum
from sidecar.api import Backpressure, StateStoreLike
from sidecar.state import StateStore

__all__ = ["Outbox", "OutboxFull", "Pending", "safe_name"]

log = structlog.get_logger("querylog.outbox")

_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")
_FIRST_POLL = 0.002  # seconds: the sender's first look after a put() or a delivery


class OutboxFull(Backpressure):
    """The outbox is at its bound (``reason``: ``max_bytes``, ``max_batches``): the batch was not taken."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(name, reason)
        Exception.__init__(self, f"outbox {name} is full ({reason}): the downstream is not taking batches fast enough")
        self.name = name


@dataclass(frozen=True)
class Pending:
    """What an outbox holds that is not delivered yet."""

    batches: int
    events: int
    bytes: int


def safe_name(text: str) -> str:
    """``text`` as an outbox name: runs of other characters become ``_`` (``10.0.0.5:24224`` -> ``10_0_0_5_24224``)."""
    name = re.sub(r"[^A-Za-z0-9_]+", "_", text).strip("_")[:64]
    return name or "outbox"


class Outbox:
    """A bounded table of batches to deliver and the thread that delivers them (see the module docstring)."""

    def __init__(
        self,
        state: StateStoreLike | str | os.PathLike[str],
        name: str,
        *,
        max_bytes: int | None = 256 * 1024 * 1024,
        max_batches: int | None = 10_000,
        retry_initial_seconds: float = 0.5,
        retry_max_seconds: float = 30.0,
        poll_seconds: float = 0.5,
        rng: random.Random | None = None,
    ) -> None:
        if not _NAME.fullmatch(name):
            raise ValueError("an outbox name is 1-64 letters, digits or _")
        if (max_bytes is not None and max_bytes < 1) or (max_batches is not None and max_batches < 1):
            raise ValueError("outbox bounds must be >= 1 (or None: unbounded)")
        self.name = name
        self.table = f"outbox_{name}"
        self.max_bytes = max_bytes
        self.max_batches = max_batches
        self.retry_initial = retry_initial_seconds
        self.retry_max = max(retry_max_seconds, retry_initial_seconds)
        self.poll_seconds = poll_seconds
        self._rng = rng or random.Random()  # jitter only: no CSPRNG needed
        self._own_store: StateStore | None = None
        if isinstance(state, str | os.PathLike):
            self._own_store = StateStore(os.fspath(state))
            self.state: StateStoreLike = self._own_store
        else:
            self.state = state
        self.path = _database_file(self.state.conn)
        table = self.table

        def create(db: Any) -> None:
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL,"
                " events INTEGER NOT NULL, bytes INTEGER NOT NULL, payload BLOB NOT NULL)"
            )

        self.state.migrate(table, [create])
        with self.state.lock:
            vacuum.make_incremental(self.state.conn, Path(self.path))
        self._lock = threading.Lock()  # the counters
        self._changed = threading.Condition(self._lock)
        self._batches = self._events = self._bytes = 0
        self._oldest: float | None = None  # when the oldest pending row was put (time.time()); None: none
        with self.state.lock:
            self._recount(self.state.conn)
        #: Counters (no values): batches/events delivered, retries, failed sends by exception type, refused puts.
        self.sent_batches = 0
        self.sent_events = 0
        self.retries = 0
        self.failures: Counter[str] = Counter()
        self.refused_full = 0
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._ended = self._orphaned = False  # the sender ended; close() left it its connection to close
        self._conn: sqlite3.Connection | None = None

    # ---- the writer side (the runtime's connection) ---------------------------------------------
    def put(self, payload: bytes, events: int) -> int:
        """Add a batch (``events``: how many events it carries); returns its row id. :class:`OutboxFull` when full.

        Call it from a sink's ``flush``: it nests in the runtime's transaction (a SAVEPOINT under
        ``state.lock``), so the batch becomes durable exactly when the runtime commits.
        """
        conn = self.state.conn
        with self.state.lock:
            reason = self._over()
            if reason is not None:
                self._recount(conn)  # the counters may be stale (a rolled-back transaction): look again
                reason = self._over()
                if reason is not None:
                    with self._lock:
                        self.refused_full += 1
                    raise OutboxFull(self.name, reason)
            conn.execute(f"SAVEPOINT {self.table}")
            try:
                cur = conn.execute(
                    f"INSERT INTO {self.table}(created, events, bytes, payload) VALUES (?, ?, ?, ?)",
                    (time.time(), events, len(payload), payload),
                )
            except BaseException:
                conn.execute(f"ROLLBACK TO {self.table}")
                conn.execute(f"RELEASE {self.table}")
                raise
            conn.execute(f"RELEASE {self.table}")
            row_id = cur.lastrowid
        with self._lock:
            self._batches += 1
            self._events += events
            self._bytes += len(payload)
            self._oldest = time.time() if self._oldest is None else self._oldest
        self._wake.set()
        assert row_id is not None
        return row_id

    def _over(self) -> str | None:
        with self._lock:
            if self.max_batches is not None and self._batches >= self.max_batches:
                return "max_batches"
            if self.max_bytes is not None and self._bytes >= self.max_bytes:
                return "max_bytes"
        return None

    def _recount(self, conn: sqlite3.Connection) -> None:
        n, events, size, oldest = conn.execute(
            f"SELECT COUNT(*), COALESCE(SUM(events), 0), COALESCE(SUM(bytes), 0), MIN(created) FROM {self.table}"
        ).fetchone()
        with self._changed:
            self._batches, self._events, self._bytes = int(n), int(events), int(size)
            self._oldest = float(oldest) if oldest is not None else None
            self._changed.notify_all()

    def full(self) -> bool:
        """True when :meth:`put` would refuse a batch now (a source stops reading: backpressure)."""
        return self._over() is not None

    def pending(self) -> Pending:
        """Batches, events and bytes not delivered yet."""
        with self._lock:
            return Pending(self._batches, self._events, self._bytes)

    def oldest_age(self) -> float:
        """Seconds since the oldest pending batch was put (0.0: nothing pending), for metrics."""
        return 0.0 if (oldest := self._oldest) is None else max(0.0, time.time() - oldest)

    def stats(self) -> dict[str, Any]:
        """Counters for metrics: counts only."""
        with self._lock:
            return {
                "pending_batches": self._batches,
                "pending_events": self._events,
                "pending_bytes": self._bytes,
                "sent_batches": self.sent_batches,
                "sent_events": self.sent_events,
                "retries": self.retries,
                "failures": sum(self.failures.values()),
                "failures_by_error": dict(self.failures),
                "refused_full": self.refused_full,
            }

    # ---- the sender ----------------------------------------------------------------------------
    def start(self, send: Callable[[bytes], None]) -> None:
        """Start the sender thread: it delivers the oldest batch with ``send`` until :meth:`stop`."""
        if self._thread is not None and self._thread.is_alive():
            raise RuntimeError(f"outbox {self.name}: the sender is already running")
        if self._conn is None:
            self._conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None, timeout=30)
            self._conn.execute("PRAGMA busy_timeout=30000")
            self._conn.execute("PRAGMA synchronous=NORMAL")
        self._stopping.clear()
        self._ended = self._orphaned = False
        self._thread = threading.Thread(
            target=self._sender, args=(send, self._conn), name=f"querylog-outbox-{self.name}", daemon=True
        )
        self._thread.start()

    def _sender(self, send: Callable[[bytes], None], conn: sqlite3.Connection) -> None:
        try:
            self._run(send, conn)
        finally:
            with self._lock:  # close() gave up waiting: the connection is this thread's to close
                self._ended = True
                if self._orphaned:
                    conn.close()

    def _run(self, send: Callable[[bytes], None], conn: sqlite3.Connection) -> None:
        attempt = 0
        idle_wait = _FIRST_POLL
        shrink = vacuum.Shrinker(self.state.lock, conn, self.name)
        while not self._stopping.is_set():
            try:
                row = conn.execute(
                    f"SELECT id, events, bytes, payload, created FROM {self.table} ORDER BY id LIMIT 1"
                ).fetchone()
            except sqlite3.Error as exc:
                log.error("outbox_read_failed", outbox=self.name, error=type(exc).__name__)
                self._stopping.wait(self.retry_max)
                continue
            if row is None:
                shrink.if_owed()
                if self.pending().batches:  # counted a put whose transaction rolled back: count again, exactly
                    with self.state.lock:  # no runtime transaction is open while this lock is held
                        self._recount(conn)
                # a put() wakes the sender at once, but its transaction may not have committed yet: look again
                # soon, then less and less often
                if self._wake.wait(idle_wait):
                    self._wake.clear()
                    idle_wait = _FIRST_POLL
                else:
                    idle_wait = min(idle_wait * 2, self.poll_seconds)
                continue
            idle_wait = _FIRST_POLL
            row_id, events, size, payload, self._oldest = row  # the oldest pending row (put: only when none was)
            try:
                send(bytes(payload))
            except Exception as exc:  # any failure: the batch stays and is sent again
                attempt += 1
                delay = self.backoff(attempt)
                with self._lock:
                    self.failures[type(exc).__name__] += 1
                    self.retries += 1
                log.warning(
                    "outbox_send_failed",
                    outbox=self.name,
                    error=type(exc).__name__,
                    attempt=attempt,
                    retry_in_seconds=round(delay, 3),
                    events=events,
                )
                self._stopping.wait(delay)
                continue
            if attempt:
                log.info("outbox_send_recovered", outbox=self.name, attempts=attempt + 1)
            attempt = 0
            try:
                with self.state.lock:  # the runtime writes under this lock: never wait on its transaction
                    conn.execute(f"DELETE FROM {self.table} WHERE id = ?", (row_id,))
            except sqlite3.Error as exc:  # delivered but still in the table: it will be sent again
                log.error("outbox_delete_failed", outbox=self.name, error=type(exc).__name__)
                self._stopping.wait(self.retry_initial)
                continue
            with self._changed:
                self._batches = max(0, self._batches - 1)
                self._events = max(0, self._events - events)
                self._bytes = max(0, self._bytes - size)
                self.sent_batches += 1
                self.sent_events += events
                self._changed.notify_all()
                drained = not self._batches
                self._oldest = None if drained else self._oldest
            if drained:  # give the state database's freed pages back
                shrink.owe()

    def backoff(self, attempt: int) -> float:
        """Seconds to wait before retry ``attempt`` (1, 2, ...): from [d/2, d], d doubling up to the maximum."""
        d = min(self.retry_max, self.retry_initial * 2 ** min(attempt - 1, 60))
        return self._rng.uniform(d / 2, d)

    def drain(self, timeout: float) -> bool:
        """Wait until nothing is pending (or ``timeout`` seconds passed); True when drained."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self._batches:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(min(left, 0.1))
        return True

    def stop(self, timeout: float | None = None) -> bool:
        """Stop the sender after the send in progress (undelivered batches stay); True when it ended in time."""
        self._stopping.set()
        self._wake.set()
        thread = self._thread
        if thread is None:
            return True
        thread.join(timeout)
        if thread.is_alive():
            log.warning("outbox_sender_still_running", outbox=self.name)
            return False
        self._thread = None
        return True

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop the sender and close its connection (and the store the outbox opened itself)."""
        stopped = self.stop(timeout)
        with self._lock:
            if self._conn is not None and (stopped or self._ended):
                self._conn.close()
            elif self._conn is not None:
                self._orphaned = True  # the sender closes it when its send returns
            self._conn = None
        if self._own_store is not None:
            self._own_store.close()
            self._own_store = None


def _database_file(conn: sqlite3.Connection) -> str:
    """The file of the connection's main database (the sender opens its own connection to it)."""
    for _, name, file in conn.execute("PRAGMA database_list").fetchall():
        if name == "main" and file:
            return str(Path(file))
    raise ValueError("the outbox needs a state database in a file")
