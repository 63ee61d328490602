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
from typing import Any

from sqlite_utils import Database

from sidecar.state import StateStore

__all__ = ["DROPPED", "HeldRow", "JoinStore"]

DROPPED: Any = object()
"""The outcome of a query that was dropped (:meth:`JoinStore.outcome`)."""

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


class JoinStore:
    """The three tables; user values are kept as JSON (``user`` NULL: the query was dropped)."""

    def __init__(self, state: StateStore) -> None:
        state.migrate("joins", [_create])
        self.conn: sqlite3.Connection = state.conn

    # ---- outcomes ----------------------------------------------------------------------------------
    def outcome(self, key: str) -> Any:
        """The released user of query ``key``, :data:`DROPPED`, or None when no outcome is recorded."""
        row = self.conn.execute("SELECT user FROM join_outcome WHERE key = ?", (key,)).fetchone()
        if row is None:
            return None
        return DROPPED if row[0] is None else json.loads(row[0])

    def set_outcome(self, key: str, user: Any, at: float) -> None:
        """Record ``user`` (or :data:`DROPPED`) as query ``key``'s outcome; the query is no longer pending."""
        value = None if user is DROPPED else json.dumps(user)
        self.conn.execute(
            "INSERT INTO join_outcome(key, user, at) VALUES (?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET user = excluded.user, at = excluded.at",
            (key, value, at),
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
    def add_pending(self, keys: Iterable[str], since: float) -> None:
        self.conn.executemany(
            "INSERT INTO join_pending(key, since) VALUES (?, ?) ON CONFLICT(key) DO NOTHING",
            [(k, since) for k in keys],
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

    def take(self, key: str) -> list[HeldRow]:
        """The events held for ``key`` in arrival order, removed from the table."""
        rows: list[HeldRow] = self.conn.execute(
            "SELECT id, key, since, fmt, line, eol FROM join_held WHERE key = ? ORDER BY id", (key,)
        ).fetchall()
        if rows:
            self.conn.execute("DELETE FROM join_held WHERE key = ?", (key,))
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
        over = self.count("join_held") - keep
        if over <= 0:
            return []
        rows: list[HeldRow] = self.conn.execute(
            "SELECT id, key, since, fmt, line, eol FROM join_held ORDER BY id LIMIT ?", (over,)
        ).fetchall()
        self._delete(rows)
        return rows

    def _delete(self, rows: list[HeldRow]) -> None:
        self.conn.executemany("DELETE FROM join_held WHERE id = ?", [(r[0],) for r in rows])

    def count(self, table: str) -> int:
        """Rows of one of the three tables (``join_held``, ``join_pending``, ``join_outcome``)."""
        assert table in ("join_held", "join_pending", "join_outcome")
        return int(self.conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0])  # a fixed name (asserted)
