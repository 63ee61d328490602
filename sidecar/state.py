"""The sidecar's SQLite state store: one database per sidecar in ``state_dir``.

WAL journal, ``synchronous=NORMAL``, file mode 0600. Components own tables and
migrate them through :meth:`StateStore.migrate`, which records a schema version
per component in ``schema_versions``. sqlite-utils is used for schema and
inspection; hot paths use plain ``executemany`` on :attr:`StateStore.conn`.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import sqlite_utils

DB_NAME = "querylog.db"
Migration = Callable[[sqlite_utils.Database], None]


class StateError(Exception):
    """The state database cannot be used as it is; the message names the file and what to do (no values)."""

    def __init__(self, path: Path, problem: str) -> None:
        super().__init__(
            f"state database {path} {problem}. Restore it from a backup, or start from empty state with "
            "--reset-state (held events and profiles are then gone)."
        )
        self.path = path


class StateStore:
    """One SQLite database; thread-safe through a lock held by callers via :attr:`lock`."""

    def __init__(self, state_dir: Path | str) -> None:
        self.dir = Path(state_dir)
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.path = self.dir / DB_NAME
        if not self.path.exists():
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY, 0o600))
        elif self.path.stat().st_size == 0 and not Path(str(self.path) + "-wal").exists():
            # sqlite would take an empty file for a new database: held events and profiles would be gone
            raise StateError(self.path, "is empty (0 bytes): it may have been truncated, and its held events lost")
        os.chmod(self.path, 0o600)
        self.conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=NORMAL")
            self.conn.execute("PRAGMA busy_timeout=5000")
            for suffix in ("-wal", "-shm"):
                side = Path(str(self.path) + suffix)
                if side.exists():
                    os.chmod(side, 0o600)
            self.db = sqlite_utils.Database(self.conn)
            self.lock = threading.RLock()
            self.db.table("schema_versions").create(
                {"component": str, "version": int}, pk="component", if_not_exists=True
            )
            self.conn.execute("SELECT COUNT(*) FROM schema_versions").fetchone()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            raise StateError(self.path, f"is not a usable state database ({exc})") from None

    def version(self, component: str) -> int:
        row = self.conn.execute("SELECT version FROM schema_versions WHERE component = ?", (component,)).fetchone()
        return int(row[0]) if row else 0

    def migrate(self, component: str, migrations: Sequence[Migration]) -> int:
        """Apply the migrations ``component`` has not had yet, each in a transaction."""
        with self.lock:
            current = self.version(component)
            for number, step in enumerate(migrations[current:], start=current + 1):
                with self.conn:
                    self.conn.execute("BEGIN")
                    step(self.db)
                    self.conn.execute(
                        "INSERT INTO schema_versions(component, version) VALUES (?, ?) "
                        "ON CONFLICT(component) DO UPDATE SET version = excluded.version",
                        (component, number),
                    )
            return len(migrations)

    def close(self) -> None:
        with self.lock:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.conn.close()


def remove_state_database(state_dir: Path | str) -> bool:
    """Delete the state database (and its WAL files) in ``state_dir``; True when there was one.

    Only for an explicit operator choice (``replay --fresh-state``): held events and profiles are gone.
    """
    path = Path(state_dir) / DB_NAME
    found = path.exists()
    for suffix in ("", "-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    return found
