"""Giving the state database's free space back to the file system after an outbox drains.

SQLite keeps the pages a deleted row used (an outbox that held 156 MB while a peer was down stays 156 MB on disk).
With ``auto_vacuum=INCREMENTAL`` the pages can be given back (``PRAGMA incremental_vacuum``); that mode can only be
set on a new database or by rewriting it once (``VACUUM``). The rule:

* When an outbox opens on a database without it, a database of at most :data:`CONVERT_MAX_BYTES` (every new one,
  and most: the state is small when no outbox is backed up) is rewritten once into the mode, at start, before any
  sender runs (a fraction of a second).
* A larger one is left as it is (a rewrite needs as much free space again and takes long at a start): one warning
  (``state_database_does_not_shrink``) names the file and the command to run once, with the sidecar stopped:
  ``sqlite3 FILE 'PRAGMA auto_vacuum=INCREMENTAL; VACUUM'``.
* When an outbox drains to empty, its sender runs ``PRAGMA incremental_vacuum`` and a WAL checkpoint, if at least
  :data:`SHRINK_MIN_PAGES` pages are free (an idle outbox that empties after every batch costs nothing).
"""

from __future__ import annotations

import sqlite3
import threading
import time
from pathlib import Path

import structlog

log = structlog.get_logger("querylog.state")

INCREMENTAL = 2  # PRAGMA auto_vacuum's value for INCREMENTAL
#: Largest database (with its WAL) rewritten into incremental mode at start.
CONVERT_MAX_BYTES = 64 * 1024 * 1024
#: Free pages (4 KiB each by default) from which a drained outbox gives space back.
SHRINK_MIN_PAGES = 256
#: seconds between two shrinks of the state database by one outbox. Under a steady stream an outbox drains after
#: nearly every batch, and each shrink (an incremental vacuum and a WAL checkpoint) holds the state lock that every
#: batch needs. A drain within the interval leaves the shrink owed: it runs once the interval has passed, when the
#: sender is idle or at its next drain. (With forward's inline parse threshold, it took ``querylog bench forward``
#: from 0.96x to 1.02x of the pre-runtime code, 5 interleaved rounds.)
SHRINK_INTERVAL = 5.0


def make_incremental(conn: sqlite3.Connection, path: Path) -> bool:
    """Put the database of ``conn`` (the file ``path``) in ``auto_vacuum=INCREMENTAL`` mode if it is not and is
    small (see the module docstring); True when it is in that mode. Call it with no transaction open and no
    other connection reading (at an outbox's open, under the store's lock)."""
    if conn.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL:
        return True
    if conn.in_transaction:
        return False
    size = sum(p.stat().st_size for p in (path, Path(f"{path}-wal")) if p.exists())
    if size > CONVERT_MAX_BYTES:
        log.warning(
            "state_database_does_not_shrink",
            bytes=size,
            hint=f"stop the sidecar and run once: sqlite3 {path} 'PRAGMA auto_vacuum=INCREMENTAL; VACUUM'",
        )
        return False
    try:
        conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        conn.execute("VACUUM")
    except sqlite3.Error as exc:  # busy, or no room for the copy: the database is as it was
        log.warning("state_database_vacuum_failed", error=type(exc).__name__)
        return False
    return bool(conn.execute("PRAGMA auto_vacuum").fetchone()[0] == INCREMENTAL)


def shrink(conn: sqlite3.Connection) -> int:
    """Give the free pages back to the file system (incremental vacuum, then a WAL checkpoint) when there are at
    least :data:`SHRINK_MIN_PAGES`; returns how many were free. No transaction may be open on ``conn``."""
    free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    if free < SHRINK_MIN_PAGES or conn.execute("PRAGMA auto_vacuum").fetchone()[0] != INCREMENTAL:
        return 0
    conn.executescript("PRAGMA incremental_vacuum;")  # execute() would free one page per step: this runs it whole
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return free


def after_drain(lock: threading.RLock, conn: sqlite3.Connection, outbox: str) -> None:
    """An outbox drained: :func:`shrink` on its sender's connection under the store's ``lock`` (no runtime
    transaction is open while it is held); a failure only costs disk space (logged by type)."""
    try:
        with lock:
            freed = shrink(conn)
    except sqlite3.Error as exc:
        log.warning("outbox_vacuum_failed", outbox=outbox, error=type(exc).__name__)
        return
    if freed:
        log.info("outbox_space_returned", outbox=outbox, pages=freed)


class Shrinker:
    """One outbox sender's shrinks of the state database: at most one per :data:`SHRINK_INTERVAL`."""

    def __init__(self, lock: threading.RLock, conn: sqlite3.Connection, outbox: str) -> None:
        self.lock, self.conn, self.outbox = lock, conn, outbox
        self.owed = False
        self.last = -SHRINK_INTERVAL

    def owe(self) -> None:
        """The outbox drained: shrink now, or once the interval since the last shrink has passed."""
        self.owed = True
        self.if_owed()

    def if_owed(self) -> None:
        """Shrink if a drain owes it and the interval has passed."""
        if self.owed and time.monotonic() - self.last >= SHRINK_INTERVAL:
            self.owed = False
            self.last = time.monotonic()
            after_drain(self.lock, self.conn, self.outbox)
