"""The sidecar's SQLite state store: one database per sidecar in ``state_dir``.

WAL journal, ``synchronous=NORMAL``, file mode 0600. Components own tables and
migrate them through :meth:`StateStore.migrate`, which records a schema version
per component in ``schema_versions``. sqlite-utils is used for schema and
inspection; hot paths use plain ``executemany`` on :attr:`StateStore.conn`.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import ClassVar

import sqlite_utils

DB_NAME = "querylog.db"
LOCK_NAME = "querylog.lock"
Migration = Callable[[sqlite_utils.Database], None]


#: How SQLite and the OS word a full file system (SQLITE_FULL, ENOSPC, EDQUOT).
_DISK_FULL = ("database or disk is full", "no space left on device", "disk quota exceeded")


def is_disk_full(problem: str | BaseException) -> bool:
    """True when an error (or its text) says the file system is full: a state that is intact but cannot grow."""
    if isinstance(problem, sqlite3.Error) and getattr(problem, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return True
    if isinstance(problem, OSError) and problem.errno in (errno.ENOSPC, errno.EDQUOT):
        return True
    text = str(problem).lower()
    return any(words in text for words in _DISK_FULL)


#: How SQLite words a damaged database file (SQLITE_CORRUPT; a file that is no database at all is SQLITE_NOTADB).
_DAMAGED = ("disk image is malformed", "database corruption")


def is_damaged(problem: str | BaseException) -> bool:
    """True when an SQLite error (or its text) says the database file itself is damaged."""
    if isinstance(problem, sqlite3.Error) and getattr(problem, "sqlite_errorcode", None) == sqlite3.SQLITE_CORRUPT:
        return True
    text = str(problem).lower()
    return any(words in text for words in _DAMAGED)


class StateError(Exception):
    """The state database cannot be used as it is; the message names the file and what to do (no values).

    A full file system is not damage: its advice is to free space and run again (the database is intact),
    never to reset the state, which would throw held events and profiles away.
    """

    def __init__(self, path: Path, problem: str) -> None:
        if problem.startswith("cannot be written (") and is_damaged(problem):
            problem = "is damaged" + problem.removeprefix("cannot be written")  # not a write problem: the file
        if is_disk_full(problem):
            advice = (
                f"Free space on the file system of {path.parent} (or move state_dir to a bigger one) and run the "
                "same command again: the database is intact and keeps its held events and profiles."
            )
        else:
            advice = (
                "Restore it from a backup, or start from empty state with --reset-state (held events and "
                "profiles are then gone)."
            )
        super().__init__(f"state database {path} {problem}. {advice}")
        self.path = path
        self.disk_full = is_disk_full(problem)

    @classmethod
    def from_sqlite(cls, path: Path, exc: sqlite3.Error) -> StateError:
        """The error for an SQLite failure on ``path``: a full disk, or a database that is not usable."""
        if is_disk_full(exc):
            return cls(path, f"cannot be written ({exc})")
        if is_damaged(exc):
            return cls(path, f"is damaged ({exc})")
        return cls(path, f"is not a usable state database ({exc})")


class StateInUse(Exception):
    """Another process holds the state folder: one writer per state (two would double-spend budgets, deliver
    outbox batches twice and fight over held events). The message names the folder and the holder's pid."""

    def __init__(self, state_dir: Path, pid: str) -> None:
        holder = f"process {pid}" if pid else "another process"
        super().__init__(
            f"state folder {state_dir} is in use by {holder} (one writer per state folder): stop it, or give "
            "this run a state folder of its own (--state-dir, or state_dir in its config)"
        )
        self.state_dir = state_dir
        self.pid = pid


class _FolderLock:
    """An exclusive ``flock`` on ``state_dir/querylog.lock`` holding the owner's pid, shared within the process.

    The kernel drops it when the process ends (even by ``kill -9``), so a crash never leaves a stale lock.
    Opened twice in one process (a pipeline and an outbox store on the same folder), it is counted, not retaken.
    """

    _held: ClassVar[dict[Path, tuple[int, int]]] = {}  # folder -> (fd, users)
    _guard = threading.Lock()

    @classmethod
    def acquire(cls, state_dir: Path) -> Path:
        key = state_dir.resolve()
        with cls._guard:
            if key in cls._held:
                fd, users = cls._held[key]
                cls._held[key] = (fd, users + 1)
                return key
            try:
                fd = os.open(key / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            except OSError as exc:  # a full or read-only file system: the state cannot be written at all
                raise StateError(key / DB_NAME, f"cannot be written ({exc.strerror})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
                os.close(fd)
                raise StateInUse(key, pid) from None
            with contextlib.suppress(OSError):  # the pid only names the holder; a full disk is found later
                os.ftruncate(fd, 0)
                os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
            cls._held[key] = (fd, 1)
            return key

    @classmethod
    def release(cls, key: Path) -> None:
        with cls._guard:
            held = cls._held.pop(key, None)
            if held is None:  # a forked child: it never held it (:meth:`forget_in_child`)
                return
            fd, users = held
            if users > 1:
                cls._held[key] = (fd, users - 1)
            else:
                os.close(fd)  # closing the descriptor drops the flock

    @classmethod
    def forget_in_child(cls) -> None:
        """Right after a fork, in the child: close its copies of the lock descriptors. The flock belongs to the
        open file description parent and child share, so the parent keeps it; but a child still holding a copy
        would keep it after the parent died (``replay``'s forked first pass, a kill -9 of the replay: its rerun
        was refused until the child ended). The child is one thread: the guard is made anew, not taken."""
        held, cls._held, cls._guard = cls._held, {}, threading.Lock()
        for fd, _ in held.values():
            with contextlib.suppress(OSError):
                os.close(fd)


os.register_at_fork(after_in_child=_FolderLock.forget_in_child)


@contextlib.contextmanager
def state_lock(state_dir: Path | str) -> Iterator[None]:
    """Hold the state folder's single-writer lock for the block (:class:`StateInUse` when another process has it)."""
    folder = Path(state_dir)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = _FolderLock.acquire(folder)
    try:
        yield
    finally:
        _FolderLock.release(key)


class StateStore:
    """One SQLite database; thread-safe through a lock held by callers via :attr:`lock`.

    Opening it takes the state folder's single-writer lock (:class:`StateInUse` when another process holds it);
    :meth:`close` lets it go."""

    def __init__(self, state_dir: Path | str) -> None:
        self.dir = Path(state_dir)
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._lock_key: Path | None = _FolderLock.acquire(self.dir)
        try:
            self._open()
        except BaseException:
            self._unlock()
            raise

    def _unlock(self) -> None:
        if self._lock_key is not None:
            _FolderLock.release(self._lock_key)
            self._lock_key = None

    def _open(self) -> None:
        self.path = self.dir / DB_NAME
        created = not self.path.exists()
        if created:
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
            if not created:
                self._check()
        except sqlite3.DatabaseError as exc:
            self.conn.close()
            if created:  # a database this call could not set up (a full disk) must not look truncated later
                for suffix in ("", "-wal", "-shm"):
                    Path(str(self.path) + suffix).unlink(missing_ok=True)
            raise StateError.from_sqlite(self.path, exc) from None

    def _check(self) -> None:
        """Refuse a damaged database before any of it is used: ``PRAGMA quick_check`` reads every page once
        (about a second per few hundred MB), so damage in a page read only later (held events, an index)
        is a clear error at the start, not a failure in the middle of a run after events were acknowledged."""
        rows = self.conn.execute("PRAGMA quick_check(1)").fetchall()
        if rows != [("ok",)]:
            raise sqlite3.DatabaseError("database disk image is malformed")

    def version(self, component: str) -> int:
        row = self.conn.execute("SELECT version FROM schema_versions WHERE component = ?", (component,)).fetchone()
        return int(row[0]) if row else 0

    def migrate(self, component: str, migrations: Sequence[Migration]) -> int:
        """Apply the migrations ``component`` has not had yet, each in a transaction.

        A database that cannot take them (a full disk, damage found on the way) raises :class:`StateError`.
        """
        with self.lock:
            try:
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
            except sqlite3.DatabaseError as exc:
                raise StateError.from_sqlite(self.path, exc) from None
            return len(migrations)

    def close(self) -> None:
        with self.lock:
            with contextlib.suppress(sqlite3.Error):
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            self.conn.close()
            self._unlock()


def remove_state_database(state_dir: Path | str) -> bool:
    """Delete the state database (and its WAL files) in ``state_dir``; True when there was one.

    Only for an explicit operator choice (``replay --fresh-state``): held events and profiles are gone. Never
    under a running process: :class:`StateInUse` when another one holds the folder.
    """
    path = Path(state_dir) / DB_NAME
    with state_lock(state_dir):
        found = path.exists()
        for suffix in ("", "-wal", "-shm"):
            Path(str(path) + suffix).unlink(missing_ok=True)
    return found
