"""The state database gives an outbox's space back once the outbox drains (incremental vacuum)."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
import structlog
from helpers import wait_until

from sidecar import vacuum
from sidecar.outbox import Outbox

MiB = 1024 * 1024


def _size(db: Path) -> int:
    """The main database file's size once the WAL is checkpointed (a reader's connection of its own)."""
    conn = sqlite3.connect(db, isolation_level=None)
    try:
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    finally:
        conn.close()
    return db.stat().st_size


def test_the_state_database_shrinks_after_a_large_outbox_drains(tmp_path: Path) -> None:
    """20 MiB of batches waited in the outbox (a peer was down); once delivered, the file is small again."""
    state = tmp_path / "state"
    outbox = Outbox(state, "peer", max_bytes=None, max_batches=None)
    db = state / "querylog.db"
    try:
        for _ in range(400):
            outbox.put(os.urandom(50 * 1024), 10)
        full = _size(db)
        assert full > 20 * MiB
        outbox.start(lambda payload: None)
        assert outbox.drain(60)
        wait_until(lambda: _size(db) < 2 * MiB, what="the state database to shrink after the drain")
    finally:
        outbox.close()


def test_an_existing_database_is_made_incremental_when_small(tmp_path: Path) -> None:
    """A state database made before (auto_vacuum none) is converted when its outbox opens, being small."""
    state = tmp_path / "state"
    state.mkdir()
    conn = sqlite3.connect(state / "querylog.db")
    conn.execute("CREATE TABLE old_filter_state (k TEXT)")
    conn.close()
    outbox = Outbox(state, "peer")
    try:
        assert outbox.state.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == vacuum.INCREMENTAL
    finally:
        outbox.close()


def test_a_large_existing_database_is_left_as_it_is_and_says_how(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over the conversion bound, nothing is rewritten at start; one warning names the file and the command."""
    monkeypatch.setattr(vacuum, "CONVERT_MAX_BYTES", 0)
    state = tmp_path / "state"
    with structlog.testing.capture_logs() as logs:
        outbox = Outbox(state, "peer")
    try:
        assert outbox.state.conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    finally:
        outbox.close()
    (warning,) = [e for e in logs if e["event"] == "state_database_does_not_shrink"]
    assert "VACUUM" in warning["hint"] and str(state / "querylog.db") in warning["hint"]
