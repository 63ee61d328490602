"""The durable, bounded outbox of network sinks (sidecar/outbox.py)."""

from __future__ import annotations

import random
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from sidecar.api import BuildContext, OutboxOptions
from sidecar.outbox import Outbox, OutboxFull, Pending, safe_name
from sidecar.outboxes import backpressure, outbox_factory
from sidecar.state import StateStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[StateStore]:
    s = StateStore(tmp_path / "state")
    yield s
    s.close()


class Recorder:
    """A send callable: records payloads; fails the first ``fail`` calls."""

    def __init__(self, fail: int = 0) -> None:
        self.fail = fail
        self.calls = 0
        self.sent: list[bytes] = []
        self.done = threading.Event()
        self.expect = 0

    def __call__(self, payload: bytes) -> None:
        self.calls += 1
        if self.calls <= self.fail:
            raise ConnectionRefusedError("down")
        self.sent.append(payload)
        if len(self.sent) >= self.expect:
            self.done.set()


def test_batches_are_delivered_in_order_and_deleted(store: StateStore) -> None:
    """put() rows come out oldest first through send(); each is deleted once send returned; counters follow."""
    box = Outbox(store, "t1", retry_initial_seconds=0.01)
    for i in range(5):
        box.put(f"batch-{i}".encode(), events=i + 1)
    assert box.pending() == Pending(5, 15, sum(len(f"batch-{i}") for i in range(5)))
    rec = Recorder()
    rec.expect = 5
    box.start(rec)
    assert rec.done.wait(5)
    assert box.drain(5)
    assert rec.sent == [f"batch-{i}".encode() for i in range(5)]
    assert store.conn.execute("SELECT COUNT(*) FROM outbox_t1").fetchone()[0] == 0
    stats = box.stats()
    assert (stats["sent_batches"], stats["sent_events"], stats["pending_batches"], stats["retries"]) == (5, 15, 0, 0)
    box.close()


def test_put_commits_with_the_runtime_transaction(store: StateStore) -> None:
    """Inside an open transaction the batch is invisible to the sender until COMMIT; a ROLLBACK takes it away."""
    box = Outbox(store, "tx", retry_initial_seconds=0.01, poll_seconds=0.02)
    rec = Recorder()
    with store.lock:
        store.conn.execute("BEGIN IMMEDIATE")
        box.put(b"rolled-back", 1)
        store.conn.execute("ROLLBACK")
        store.conn.execute("BEGIN IMMEDIATE")
        box.put(b"committed", 1)
        box.start(rec)  # the sender runs, but sees nothing uncommitted
        assert not rec.done.wait(0.2)
        store.conn.execute("COMMIT")
    rec.expect = 1
    assert rec.done.wait(5)
    assert box.drain(5)
    assert rec.sent == [b"committed"]
    box.close()


def test_the_sender_sends_while_the_runtime_holds_its_lock(store: StateStore) -> None:
    """Reading and sending use the sender's own connection: a long runtime transaction does not hold them up."""
    box = Outbox(store, "own", poll_seconds=0.02)
    box.put(b"x", 1)
    rec = Recorder()
    rec.expect = 1
    with store.lock:
        store.conn.execute("BEGIN IMMEDIATE")
        box.start(rec)
        assert rec.done.wait(5), "send() waited for the runtime's lock"
        store.conn.execute("COMMIT")
    assert box.drain(5)
    box.close()


def test_full_outbox_refuses_and_reports_backpressure(store: StateStore) -> None:
    """At max_batches / max_bytes, put() raises OutboxFull (with the reason); a batch that starts below the bound
    is taken whole; full() and backpressure() tell sources to stop reading."""
    box = Outbox(store, "bound", max_batches=2, max_bytes=None)
    box.put(b"a", 1)
    box.put(b"b", 1)
    with pytest.raises(OutboxFull) as err:
        box.put(b"c", 1)
    assert err.value.reason == "max_batches" and err.value.name == "bound"
    assert box.full() and box.stats()["refused_full"] == 1

    by_size = Outbox(store, "size", max_bytes=10, max_batches=None)
    by_size.put(b"x" * 8, 1)
    by_size.put(b"y" * 30, 1)  # started below the bound: taken whole
    with pytest.raises(OutboxFull, match="max_bytes"):
        by_size.put(b"z", 1)

    class Sink:
        def __init__(self, outbox: Outbox | None) -> None:
            self.outbox = outbox

    assert backpressure([Sink(None), object(), Sink(by_size)]) == "size"
    empty = Outbox(store, "empty", max_batches=1)
    assert backpressure([Sink(empty)]) is None
    assert store.conn.execute("SELECT COUNT(*) FROM outbox_bound").fetchone()[0] == 2


def test_backpressure_covers_every_outbox_made_through_the_build_context(store: StateStore) -> None:
    """An outbox a sink got from ``ctx.outbox`` (the runtime's factory) counts for backpressure whatever the sink
    calls its attribute; the name is made safe and the options give the bounds."""
    ctx = BuildContext(config_dir=Path("."), state=store, outboxes=outbox_factory(store, random.Random(1)))
    box = ctx.outbox("peer 10.0.0.5:24224", OutboxOptions(outbox_max_batches=1, retry_initial_seconds=0.01))
    assert box.name == "peer_10_0_0_5_24224"

    class Sink:
        def __init__(self) -> None:
            self.ctx = ctx
            self.queue = box

    assert backpressure([Sink()]) is None
    box.put(b"x", 1)
    assert backpressure([Sink()]) == "peer_10_0_0_5_24224"
    box.close()


def test_failed_sends_are_retried_in_order(store: StateStore) -> None:
    """send() raising keeps the batch: it is retried (backoff) before any later batch; failures counted by type."""
    box = Outbox(store, "retry", retry_initial_seconds=0.01, retry_max_seconds=0.02)
    box.put(b"first", 1)
    box.put(b"second", 1)
    rec = Recorder(fail=3)
    rec.expect = 2
    box.start(rec)
    assert rec.done.wait(5)
    assert box.drain(5)
    assert rec.sent == [b"first", b"second"]
    stats = box.stats()
    assert stats["retries"] == 3 and stats["failures_by_error"] == {"ConnectionRefusedError": 3}
    box.close()


def test_backoff_is_exponential_capped_and_jittered(store: StateStore) -> None:
    """The wait before attempt n is drawn from [d/2, d], d = initial * 2**(n-1) capped at the maximum; two outboxes
    do not wait in lockstep."""
    a = Outbox(store, "ja", retry_initial_seconds=1.0, retry_max_seconds=8.0, rng=random.Random(1))
    b = Outbox(store, "jb", retry_initial_seconds=1.0, retry_max_seconds=8.0, rng=random.Random(2))
    for attempt, d in [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (10, 8.0), (200, 8.0)]:
        wa, wb = a.backoff(attempt), b.backoff(attempt)
        assert d / 2 <= wa <= d and d / 2 <= wb <= d
    assert [a.backoff(5) for _ in range(5)] != [b.backoff(5) for _ in range(5)]


def test_undelivered_batches_survive_a_restart(tmp_path: Path) -> None:
    """Batches not delivered when the process stops (sender down, or never started) are sent after a restart,
    by an outbox opened on the same state folder; its pending counts come from the table."""
    state = tmp_path / "state"
    box = Outbox(state, "restart", retry_initial_seconds=0.01)
    box.put(b"one", 3)
    box.put(b"two", 4)
    failing = Recorder(fail=10**9)
    box.start(failing)
    box.close()
    assert failing.sent == []

    again = Outbox(state, "restart")
    assert again.pending() == Pending(2, 7, 6)
    rec = Recorder()
    rec.expect = 2
    again.start(rec)
    assert rec.done.wait(5)
    assert again.drain(5)
    assert rec.sent == [b"one", b"two"]
    again.close()


def test_stop_keeps_what_is_left_and_stats_hold_no_values(store: StateStore) -> None:
    """stop() ends the sender; what it did not deliver stays; the counters are numbers by name only."""
    box = Outbox(store, "stop", retry_initial_seconds=5.0)
    box.put(b"secret query text", 1)
    box.start(Recorder(fail=10**9))
    assert box.stop(5)
    assert box.pending().batches == 1
    stats = box.stats()
    assert "secret" not in repr(stats)
    assert all(isinstance(v, int) for k, v in stats.items() if k != "failures_by_error")


def test_names_and_bounds_are_checked(store: StateStore) -> None:
    """An outbox name is letters, digits and _ (safe_name makes one from an address); bounds are >= 1."""
    with pytest.raises(ValueError):
        Outbox(store, "bad-name")
    with pytest.raises(ValueError):
        Outbox(store, "ok", max_batches=0)
    assert safe_name("forward_10.0.0.5:24224") == "forward_10_0_0_5_24224"
    assert safe_name("::") == "outbox"


def test_a_sender_close_gave_up_on_closes_its_connection_when_its_send_returns(store: StateStore) -> None:
    """close() waits ``timeout`` for a send in progress; past it, the sender closes its own connection when the
    send returns (a peer that never answers left the state database open: the nats sink's lifecycle test)."""
    from helpers.waiting import wait_until

    release, sending = threading.Event(), threading.Event()

    def send(payload: bytes) -> None:
        sending.set()
        release.wait(30)

    outbox = Outbox(store, "slow", max_bytes=None, max_batches=None)
    with store.lock:
        outbox.put(b"x", 1)
    outbox.start(send)
    assert sending.wait(10)
    conn, sender = outbox._conn, outbox._thread
    assert conn is not None and sender is not None
    outbox.close(timeout=0.05)  # gives up: the send is still in progress
    assert sender.is_alive()
    release.set()
    # the connection is probed only once its thread ended: a use racing its close() crashed the interpreter (CI)
    wait_until(lambda: not sender.is_alive(), what="the sender to end after its send returned")
    with pytest.raises(sqlite3.ProgrammingError):  # Cannot operate on a closed database
        conn.execute("SELECT 1")
