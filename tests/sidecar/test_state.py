"""The SQLite state store: WAL, mode 0600, schema versions and migrations."""

from __future__ import annotations

import stat
import threading
from pathlib import Path

import pytest
import sqlite_utils

from sidecar.state import DB_NAME, StateStore


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_wal_and_private_file_modes(tmp_path: Path) -> None:
    """The database is in WAL mode; the database file and its WAL/SHM side files are 0600, the folder 0700."""
    store = StateStore(tmp_path / "state")
    store.conn.execute("CREATE TABLE t (x)")
    store.conn.execute("INSERT INTO t VALUES (1)")
    assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    db = tmp_path / "state" / DB_NAME
    assert _mode(db) == 0o600
    assert _mode(tmp_path / "state") == 0o700
    store.close()
    reopened = StateStore(tmp_path / "state")
    for suffix in ("-wal", "-shm"):
        side = Path(str(db) + suffix)
        if side.exists():
            assert _mode(side) == 0o600
    assert reopened.conn.execute("SELECT x FROM t").fetchall() == [(1,)]
    reopened.close()


def test_existing_loose_permissions_are_tightened(tmp_path: Path) -> None:
    """A database file left world-readable is chmod'ed to 0600 when opened."""
    StateStore(tmp_path / "s").close()  # an existing database (an empty file is refused: see test_replay)
    db = tmp_path / "s" / DB_NAME
    db.chmod(0o644)
    StateStore(tmp_path / "s").close()
    assert _mode(db) == 0o600


def test_migrations_run_once_in_order_and_record_the_version(tmp_path: Path) -> None:
    """migrate applies only the steps a component has not had; schema_versions records the count."""
    calls: list[str] = []

    def v1(db: sqlite_utils.Database) -> None:
        calls.append("v1")
        db["held"].create({"id": int, "user": str}, pk="id")

    def v2(db: sqlite_utils.Database) -> None:
        calls.append("v2")
        db["held"].add_column("category", str)

    store = StateStore(tmp_path)
    assert store.version("buffer") == 0
    store.migrate("buffer", [v1])
    assert store.version("buffer") == 1
    store.close()
    store = StateStore(tmp_path)
    store.migrate("buffer", [v1, v2])
    store.migrate("buffer", [v1, v2])
    assert calls == ["v1", "v2"]
    assert store.version("buffer") == 2
    assert store.version("other") == 0
    assert {c.name for c in store.db["held"].columns} == {"id", "user", "category"}
    rows = store.conn.execute("SELECT component, version FROM schema_versions").fetchall()
    assert rows == [("buffer", 2)]
    store.close()


def test_a_failing_migration_rolls_back_and_keeps_the_version(tmp_path: Path) -> None:
    """A step that raises leaves neither its changes nor a new version behind."""

    def ok(db: sqlite_utils.Database) -> None:
        db["a"].create({"x": int})

    def bad(db: sqlite_utils.Database) -> None:
        db["b"].create({"y": int})
        raise RuntimeError("boom")

    store = StateStore(tmp_path)
    with pytest.raises(RuntimeError):
        store.migrate("c", [ok, bad])
    assert store.version("c") == 1
    assert "a" in store.db.table_names() and "b" not in store.db.table_names()
    store.close()


def test_store_is_usable_from_threads(tmp_path: Path) -> None:
    """One connection shared across threads under the store's lock (the gRPC server has worker threads)."""
    store = StateStore(tmp_path)
    store.conn.execute("CREATE TABLE n (x)")

    def work(i: int) -> None:
        for j in range(50):
            with store.lock:
                store.conn.execute("INSERT INTO n VALUES (?)", (i * 100 + j,))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert store.conn.execute("SELECT count(*) FROM n").fetchone()[0] == 200
    store.close()


def test_dead_letters_are_flushed_with_the_batch_and_rotated_at_the_cap(tmp_path: Path) -> None:
    """Dead letters reach the file with each batch (no close needed) and the file is rotated to FILE.1 at
    `dead_letter_max_bytes`, so two files bound the disk used; counting goes on (issue 11, defect 6)."""
    from sidecar.api import RecordBatch
    from sidecar.codecs import JsonlCodec, SchemaConfig
    from sidecar.config import load_config
    from sidecar.pipeline import Pipeline

    config = tmp_path / "c.yaml"
    config.write_text("state_dir: state\ndead_letter_max_bytes: 4096\n", encoding="utf-8")
    pipeline = Pipeline(load_config(config))
    try:
        dead_file = pipeline.config.dead_letter_path
        assert dead_file is not None
        codec = JsonlCodec(SchemaConfig())
        pipeline.receive(RecordBatch(["not json"], codec, "test"))
        assert dead_file.read_text().count("\n") == 1  # on disk before any close
        for _ in range(40):
            pipeline.receive(RecordBatch(["x" * 200] * 5, codec, "test"))
        rotated = dead_file.with_name(dead_file.name + ".1")
        assert rotated.exists()
        assert dead_file.stat().st_size <= 4096 and rotated.stat().st_size <= 4096
        assert pipeline.dead.counts["invalid_json"] == 201
        assert pipeline.dead.rotations >= 1
    finally:
        pipeline.close()
