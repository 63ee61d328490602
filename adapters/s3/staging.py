"""Records staged for the next object, in the state database (durable once the runtime's batch commits).

One table per sink, ``s3_staging_<name>``: rows ``(id, created, events, bytes, header, lines)`` in write order.
:meth:`Staging.add` runs in the sink's ``flush`` on the runtime's connection (a SAVEPOINT: it commits with the
batch); the sink's closer reads rows only while it holds the store's lock (no runtime transaction open: it sees
committed rows only) and deletes the rows of an object in the same SAVEPOINT that puts the object into the
outbox. Nothing else deletes rows, so the rows it read are still there when it deletes them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sidecar.api import StateStoreLike


@dataclass(frozen=True)
class Staged:
    """What is staged: bytes of records, and when the oldest row was written (None: nothing)."""

    bytes: int
    oldest: float | None


@dataclass
class ObjectRows:
    """The rows of one object: their ids, records' header, lines, event count and first write time."""

    header: str
    created: float
    ids: list[int] = field(default_factory=list)
    lines: list[bytes] = field(default_factory=list)
    events: int = 0


class Staging:
    """The staging table of one sink (see the module docstring)."""

    def __init__(self, state: StateStoreLike, name: str) -> None:
        self.state = state
        self.table = f"s3_staging_{name}"
        table = self.table

        def create(db: Any) -> None:
            db.execute(
                f"CREATE TABLE IF NOT EXISTS {table} (id INTEGER PRIMARY KEY AUTOINCREMENT, created REAL NOT NULL,"
                " events INTEGER NOT NULL, bytes INTEGER NOT NULL, header TEXT NOT NULL, lines BLOB NOT NULL)"
            )

        state.migrate(table, [create])

    def add(self, created: float, events: int, header: str, lines: bytes) -> None:
        """Stage encoded lines (in the caller's transaction, if one is open)."""
        with self.state.lock:
            conn = self.state.conn
            conn.execute(f"SAVEPOINT {self.table}")
            conn.execute(
                f"INSERT INTO {self.table}(created, events, bytes, header, lines) VALUES (?, ?, ?, ?, ?)",
                (created, events, len(lines), header, lines),
            )
            conn.execute(f"RELEASE {self.table}")

    def staged(self) -> Staged:
        """Committed staged bytes and the oldest row's time (call it holding ``state.lock``, outside a transaction)."""
        size, oldest = self.state.conn.execute(
            f"SELECT COALESCE(SUM(bytes), 0), MIN(created) FROM {self.table}"
        ).fetchone()
        return Staged(int(size), None if oldest is None else float(oldest))

    def next_object(self, max_bytes: int) -> ObjectRows | None:
        """The oldest rows that make one object: in order, of the first row's header, until ``max_bytes`` is reached
        (the row that reaches it included). None when nothing is staged."""
        rows: ObjectRows | None = None
        size = 0
        query = f"SELECT id, created, events, bytes, header, lines FROM {self.table} ORDER BY id"
        cursor = self.state.conn.execute(query)
        try:
            for row_id, created, events, nbytes, header, lines in cursor:
                if rows is None:
                    rows = ObjectRows(str(header), float(created))
                elif header != rows.header or size >= max_bytes:
                    break
                rows.ids.append(int(row_id))
                rows.lines.append(bytes(lines))
                rows.events += int(events)
                size += int(nbytes)
        finally:
            cursor.close()
        return rows

    def delete(self, ids: list[int]) -> None:
        """Delete the rows of an object (in the caller's SAVEPOINT)."""
        conn = self.state.conn
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            conn.execute(f"DELETE FROM {self.table} WHERE id IN ({','.join('?' * len(chunk))})", chunk)
