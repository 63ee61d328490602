"""The join stage's durable state (:mod:`sidecar.joins`): three tables of the state store.

* ``join_held``: attached events (a UBI click) waiting for their query's outcome, as the line their codec writes
  (after the field policies) with its format, so a restart reads them back;
* ``join_pending``: queries sent into the chain and neither released nor known to be dropped yet;
* ``join_outcome``: what became of a query (released under which user, or dropped), for the events that arrive
  after it.

Every write happens inside the runtime's batch transaction, so a batch's join state commits with its delivery.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from typing import Any, NamedTuple

from sqlite_utils import Database

from sidecar.state import StateStore

__all__ = ["DROPPED", "HeldRow", "JoinStore", "Released"]

DROPPED: Any = object()
"""The outcome of a query that was dropped (:meth:`JoinStore.outcome`)."""


class Released(NamedTuple):
    """The outcome of a released query: its released user, and its released time when the chain moved it (its
    events then take it too; ``moved`` false: the events keep their own times)."""

    user: Any
    time: Any = None
    moved: bool = False


HeldRow = tuple[int, str, float, str, str, str]
"""``(id, key, since, format, line, eol)`` of a held attached event."""


def _create(db: Database) -> None:
    db.execute(
        "CREATE TABLE join_held (id INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL, since REAL NOT NULL, "
        "fmt TEXT NOT NULL, line TEXT NOT NULL, eol TEXT NOT NULL)"
    )
    db.execute("CREATE INDEX join_held_key ON join_held(key)")
    db.execute("CREATE TABLE join_pending (key TEXT PRIMARY KEY, since REAL NOT NULL)")
    db.execute("CREATE INDEX join_pending_since ON join_pending(since)")
    db.execute("CREATE TABLE join_outcome (key TEXT PRIMARY KEY, user TEXT, at REAL NOT NULL)")
    db.execute("CREATE INDEX join_outcome_at ON join_outcome(at)")


def _add_times(db: Database) -> None:
    """The query's time as it entered the chain (pending) and as released when the chain moved it (outcome)."""
    db.execute("ALTER TABLE join_pending ADD COLUMN time TEXT")
    db.execute("ALTER TABLE join_outcome ADD COLUMN time TEXT")


def _dumps(value: Any) -> str:
    return json.dumps(value, default=str, sort_keys=True)


class JoinStore:
    """The three tables; user values are kept as JSON (``user`` NULL: the query was dropped)."""

    def __init__(self, state: StateStore) -> None:
        state.migrate("joins", [_create, _add_times])
        self.conn: sqlite3.Connection = state.conn
        #: rows of ``join_held``, kept in step by every write (read once per batch: no COUNT per batch)
        self.held = self.count("join_held")

    # ---- outcomes ----------------------------------------------------------------------------------
    def outcome(self, key: str) -> Released | Any:
        """Query ``key``'s :class:`Released`, :data:`DROPPED`, or None when no outcome is recorded."""
        row = self.conn.execute("SELECT user, time FROM join_outcome WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        if row[0] is None:
            return DROPPED
        return Released(json.loads(row[0]), *((json.loads(row[1]), True) if row[1] is not None else ()))

    def released(self, key: str, user: Any, time: Any, at: float) -> Released:
        """Record query ``key`` released under ``user`` at ``time``: the time is kept (moved) when it is not the
        one the query entered the chain with; the query is no longer pending."""
        row = self.conn.execute("SELECT time FROM join_pending WHERE key = ?", (key,)).fetchone()
        moved = row is not None and row[0] != _dumps(time)
        self._set(key, json.dumps(user, default=str), _dumps(time) if moved else None, at)
        return Released(user, time if moved else None, moved)

    def dropped(self, key: str, at: float) -> None:
        """Record query ``key`` dropped; it is no longer pending."""
        self._set(key, None, None, at)

    def _set(self, key: str, user: str | None, time: str | None, at: float) -> None:
        self.conn.execute(
            "INSERT INTO join_outcome(key, user, time, at) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET user = excluded.user, time = excluded.time, at = excluded.at",
            (key, user, time, at),
        )
        self.conn.execute("DELETE FROM join_pending WHERE key = ?", (key,))

    def forget_outcomes(self, before: float, keep: int) -> int:
        """Forget outcomes recorded before ``before``, and the oldest beyond the ``keep`` newest."""
        n = self.conn.execute("DELETE FROM join_outcome WHERE at < ?", (before,)).rowcount
        over = self.count("join_outcome") - keep
        if over > 0:
            n += self.conn.execute(
                "DELETE FROM join_outcome WHERE key IN (SELECT key FROM join_outcome ORDER BY at LIMIT ?)", (over,)
            ).rowcount
        return n

    # ---- pending queries ---------------------------------------------------------------------------
    def add_pending(self, queries: Iterable[tuple[str, Any]], since: float) -> None:
        """Queries ``(key, time)`` sent into the chain (a key already pending keeps its first entry)."""
        self.conn.executemany(
            "INSERT INTO join_pending(key, since, time) VALUES (?, ?, ?) ON CONFLICT(key) DO NOTHING",
            [(k, since, _dumps(t)) for k, t in queries],
        )

    def is_pending(self, key: str) -> bool:
        return self.conn.execute("SELECT 1 FROM join_pending WHERE key = ?", (key,)).fetchone() is not None

    def pending_before(self, before: float, keep: int) -> list[str]:
        """Pending queries older than ``before``, and the oldest beyond the ``keep`` newest."""
        keys = [r[0] for r in self.conn.execute("SELECT key FROM join_pending WHERE since < ?", (before,))]
        over = self.count("join_pending") - len(keys) - keep
        if over > 0:
            rows = self.conn.execute(
                "SELECT key FROM join_pending WHERE since >= ? ORDER BY since LIMIT ?", (before, over)
            )
            keys += [r[0] for r in rows]
        return keys

    def all_pending(self) -> list[str]:
        return [r[0] for r in self.conn.execute("SELECT key FROM join_pending")]

    # ---- held attached events ----------------------------------------------------------------------
    def hold(self, key: str, since: float, fmt: str, line: str, eol: str) -> None:
        self.conn.execute(
            "INSERT INTO join_held(key, since, fmt, line, eol) VALUES (?, ?, ?, ?, ?)", (key, since, fmt, line, eol)
        )
        self.held += 1

    def take(self, key: str) -> list[HeldRow]:
        """The events held for ``key`` in arrival order, removed from the table."""
        rows: list[HeldRow] = self.conn.execute(
            "SELECT id, key, since, fmt, line, eol FROM join_held WHERE key = ? ORDER BY id", (key,)
        ).fetchall()
        if rows:
            self.conn.execute("DELETE FROM join_held WHERE key = ?", (key,))
            self.held -= len(rows)
        return rows

    def unknown_before(self, before: float) -> list[HeldRow]:
        """Held events older than ``before`` whose query is neither pending nor has an outcome, removed."""
        rows: list[HeldRow] = self.conn.execute(
            "SELECT id, key, since, fmt, line, eol FROM join_held h WHERE since < ? "
            "AND NOT EXISTS (SELECT 1 FROM join_pending p WHERE p.key = h.key) "
            "AND NOT EXISTS (SELECT 1 FROM join_outcome o WHERE o.key = h.key) ORDER BY id",
            (before,),
        ).fetchall()
        self._delete(rows)
        return rows

    def oldest_beyond(self, keep: int) -> list[HeldRow]:
        """The oldest held events beyond the ``keep`` newest, removed."""
        over = self.held - keep
        if over <= 0:
            return []
        rows: list[HeldRow] = self.conn.execute(
            "SELECT id, key, since, fmt, line, eol FROM join_held ORDER BY id LIMIT ?", (over,)
        ).fetchall()
        self._delete(rows)
        return rows

    def _delete(self, rows: list[HeldRow]) -> None:
        self.conn.executemany("DELETE FROM join_held WHERE id = ?", [(r[0],) for r in rows])
        self.held -= len(rows)

    def count(self, table: str) -> int:
        """Rows of one of the three tables (``join_held``, ``join_pending``, ``join_outcome``)."""
        assert table in ("join_held", "join_pending", "join_outcome")
        return int(self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # a fixed name (asserted)
