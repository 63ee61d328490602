"""The durable side of ``category_buffer``: held events in the SQLite state store.

One row per buffered event. Paper 001's buffers split an event in two halves —
its user (in the category's user set) and its query (in the query set) — that
leave at different times, so a row records in which bucket each half is still
held (``user_bucket``, ``query_bucket``; NULL once released) and is deleted when
both halves are gone. The row's ``event`` blob is enough to rebuild the Event:
role values, the original record (TSV fields / JSON object), the raw line, the
line end, the codec's format name and the annotations (category...).

Writes happen once per batch inside ``SAVEPOINT`` so they nest in a runtime
transaction when there is one (the runtime can then commit delivery and state
together) and commit on their own otherwise. A row created and fully released
within one batch is never written: the state on disk is the state after the
batch, which is all a restart needs (:class:`Journal` collects a batch's changes).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import msgpack
import sqlite_utils

from filters.category_buffer.buckets import CORE, Bucket, Rows
from sidecar.api import Codec, Event, StateStoreLike

RECORD_EXT = 1  # msgpack extension type of a record packed by its codec (``Codec.pack_record`` bytes)

COMPONENT = "category_buffer"
HELD = "category_buffer_held"
KS = "category_buffer_k"


def _create(db: sqlite_utils.Database) -> None:
    db.execute(
        f"CREATE TABLE IF NOT EXISTS {HELD} ("
        " id INTEGER PRIMARY KEY,"
        " user_bucket TEXT,"
        " query_bucket TEXT,"
        " arrived REAL NOT NULL,"
        " event BLOB NOT NULL)"
    )
    db.execute(f"CREATE TABLE IF NOT EXISTS {KS} (bucket TEXT PRIMARY KEY, k INTEGER NOT NULL) WITHOUT ROWID")


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [_create]


def _fallback(obj: Any) -> Any:
    """msgpack ``default``: tuples/sets become lists; anything else is not kept."""
    if isinstance(obj, tuple | set | frozenset):
        return list(obj)
    return None


ROLE_COUNT = 5  # user, query, time, rank, url: the head of a packed event


class EventPacker:
    """Serialises held events for the state store (not thread-safe: one per filter).

    A row is ``[user, query, time, rank, url, record, raw, eol, format, meta]``. A record that is a list of
    fields (TSV) is written compactly, with an 11th item: per role, the index of the field that *is* the
    role's value (the same object: decoding took it from there), or -1; such a role's own slot is then
    empty, and ``raw`` is ``true`` when it is the fields joined by tabs. That halves what the role values,
    record and raw line repeated of each other (a third of a generated archive's bytes per row, and as
    much of the state database's writes and checkpoints). Rows without the 11th item (written before) are
    read as they are.
    """

    def __init__(self) -> None:
        self._pack = msgpack.Packer(default=_fallback, use_bin_type=True, autoreset=True).pack
        #: per format, the field index where each role's value was last found
        self._where: dict[str | None, list[int]] = {}
        #: per format, those indices when the last lookup found every role, and the largest of them
        self._found: dict[str | None, tuple[int, ...]] = {}
        self._top: dict[str | None, int] = {}

    def pack(self, ev: Event) -> tuple[bytes, bool]:
        """The row's blob; the flag is False when the record could not be kept (then rebuilt from roles).

        TSV (list of fields) and JSON (dict) records are kept; another record is kept as the bytes its
        codec's ``pack_record`` gives (a gRPC ``QueryEvent`` as its wire bytes, with ``seq`` and
        ``attributes``); a record its codec cannot pack is not: such an event is re-encoded from its roles
        after a restart.
        """
        ev = at_rest(ev)
        pack = self._pack
        codec = ev.codec
        fmt = codec.format if codec is not None else None
        meta = ev.meta or None
        record = ev.record
        if type(record) is list:
            raw: str | bool | None = ev.raw
            if raw is not None and raw == "\t".join(record):
                raw = True
            try:
                found = self._found.get(fmt)
                if found is not None:  # the usual case: every role where it was last time, five identity checks
                    u, q, t, r, li = found
                    if (
                        len(record) > self._top[fmt]
                        and record[u] is ev.user
                        and record[q] is ev.query
                        and record[t] is ev.time
                        and record[r] is ev.rank
                        and record[li] is ev.url
                    ):
                        return pack([None, None, None, None, None, record, raw, ev.eol, fmt, meta, found]), True
                head = [ev.user, ev.query, ev.time, ev.rank, ev.url]
                refs = self._refer(head, record, fmt)
                return pack([*head, record, raw, ev.eol, fmt, meta, refs]), True
            except (TypeError, ValueError, OverflowError):
                return pack([ev.user, ev.query, ev.time, ev.rank, ev.url, None, None, ev.eol, fmt, meta]), False
        head = [ev.user, ev.query, ev.time, ev.rank, ev.url]
        if type(record) is dict:  # a JSON object: kept as it is
            try:
                return pack([*head, record, ev.raw, ev.eol, fmt, meta]), True
            except (TypeError, ValueError, OverflowError):
                return pack([*head, None, None, ev.eol, fmt, meta]), False
        if codec is not None and not isinstance(record, list | dict | None):
            packed = codec.pack_record(record)
            if isinstance(packed, bytes):
                return pack([*head, msgpack.ExtType(RECORD_EXT, packed), None, ev.eol, fmt, meta]), True
        if not isinstance(record, list | dict | None):  # another record type: roles only
            return pack([*head, None, None, ev.eol, fmt, meta]), False
        try:
            return pack([*head, record, ev.raw, ev.eol, fmt, meta]), True
        except (TypeError, ValueError, OverflowError):
            return pack([*head, None, None, ev.eol, fmt, meta]), False

    def _refer(self, head: list[Any], fields: list[Any], fmt: str | None) -> list[int]:
        """Per role, the index of the field that is its value (-1: none); such a role is emptied in ``head``."""
        where = self._where.get(fmt)
        if where is None:
            where = self._where[fmt] = [-1] * ROLE_COUNT
        refs = [-1] * ROLE_COUNT
        n = len(fields)
        for r, value in enumerate(head):
            j = where[r]
            if not (0 <= j < n and fields[j] is value):  # identity: the same object, so the same value and type
                j = next((i for i in range(n) if fields[i] is value), -1)
                if j < 0:
                    continue
                where[r] = j
            refs[r] = j
            head[r] = None
        if min(refs) >= 0:  # every role found: the next event of this format is checked against these first
            self._found[fmt] = tuple(refs)
            self._top[fmt] = max(refs)
        return refs


def at_rest(ev: Event) -> Event:
    """``ev`` as a held row may keep it: a changed text-line event (TSV, JSON lines) is re-read from its encoded
    line, so its record and raw line no longer carry what an earlier filter removed (hipaa_scrub's identifiers
    stay out of the state database). An unchanged event is itself (the identity rule: ``encode`` gives ``raw``
    back); so is an event its codec cannot write (it is dead-lettered when released)."""
    codec = ev.codec
    if codec is None or type(ev.record) not in (list, dict):
        return ev
    try:
        line = codec.encode(ev)
    except Exception:  # a record the codec cannot write is kept as it is: its release dead-letters it
        return ev
    if line is ev.raw or not isinstance(line, str):
        return ev
    bad: list[tuple[int, str]] = []
    fresh = codec.decode_many([line], ev.eol, bad)
    if bad or len(fresh) != 1:
        return ev
    out = fresh[0]
    out.meta = ev.meta
    return out


def pack_event(ev: Event, packer: EventPacker | None = None) -> tuple[bytes, bool]:
    """Serialise an event (see :class:`EventPacker`); the flag is False when its record could not be kept."""
    return (packer or EventPacker()).pack(ev)


def unpack_event(
    blob: bytes, codec_for: Callable[[str | None], Codec | None] = lambda fmt: None
) -> tuple[Event, str | None]:
    """Rebuild an event and its format name.

    A record packed by its codec is unpacked by the codec ``codec_for`` gives
    for its format (which the event then carries); otherwise the codec is left
    None and the filter attaches the runtime's codec of that format.
    """
    items = msgpack.unpackb(blob, raw=False)
    if len(items) == 11:  # compact fields (EventPacker): roles by field index, raw rebuilt
        *head, record, raw, eol, fmt, meta, refs = items
        for r, j in enumerate(refs):
            if j >= 0:
                head[r] = record[j]
        if raw is True:
            raw = "\t".join(record)
        user, query, time, rank, url = head
    else:
        user, query, time, rank, url, record, raw, eol, fmt, meta = items
    codec: Codec | None = None
    if isinstance(record, msgpack.ExtType):
        codec = codec_for(fmt) if record.code == RECORD_EXT else None
        record = codec.unpack_record(record.data) if codec is not None else None
        if record is None:
            codec = None
    ev = Event(user, query, time, rank, url, record, raw, codec, eol)
    if meta:
        path = meta.get("category_path")
        if isinstance(path, list):
            meta["category_path"] = tuple(path)
        ev.meta = meta
    return ev, fmt


class HeldStore:
    """Rows of held events and the current k of each bucket."""

    def __init__(self, state: StateStoreLike) -> None:
        self.state = state
        state.migrate(COMPONENT, MIGRATIONS)

    def load(self) -> tuple[list[tuple[int, str | None, str | None, float, bytes]], dict[str, int]]:
        with self.state.lock:
            rows = self.state.conn.execute(
                f"SELECT id, user_bucket, query_bucket, arrived, event FROM {HELD} ORDER BY id"
            ).fetchall()
            ks = dict(self.state.conn.execute(f"SELECT bucket, k FROM {KS}").fetchall())
        return rows, ks

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A savepoint: nests in an open transaction, commits on its own otherwise."""
        conn = self.state.conn
        with self.state.lock:
            conn.execute("SAVEPOINT category_buffer")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK TO category_buffer")
                conn.execute("RELEASE category_buffer")
                raise
            conn.execute("RELEASE category_buffer")

    def write(
        self,
        inserts: Iterable[tuple[int, str | None, str | None, float, bytes]],
        updates: Iterable[tuple[str | None, str | None, int]],
        deletes: Iterable[tuple[int]],
        ks: Iterable[tuple[str, int]],
    ) -> None:
        """Apply one batch's changes atomically."""
        with self.transaction() as conn:
            conn.executemany(
                f"INSERT INTO {HELD}(id, user_bucket, query_bucket, arrived, event) VALUES (?, ?, ?, ?, ?)", inserts
            )
            conn.executemany(f"UPDATE {HELD} SET user_bucket = ?, query_bucket = ? WHERE id = ?", updates)
            conn.executemany(f"DELETE FROM {HELD} WHERE id = ?", deletes)
            conn.executemany(
                f"INSERT INTO {KS}(bucket, k) VALUES (?, ?) ON CONFLICT(bucket) DO UPDATE SET k = excluded.k", ks
            )


class Journal:
    """One batch's changes to the held rows, written in one transaction by :meth:`commit`.

    A held event that arrived in this batch (``Held.new``) is inserted at commit
    if a half of it is still held; an older one is updated when a half moved or
    left, and deleted once both halves are gone. The bookkeeping between writes is
    :class:`.core.Rows` (compiled with the loops that call it; ``rows``).
    """

    def __init__(self, rows: Rows | None = None) -> None:
        #: Batches per transaction (:meth:`commit`); 1 unless a replay that promises nothing before its end
        #: defers (``CategoryBufferFilter.defer_commits``).
        self.every = 1
        self._pending = 0
        self.rows: Rows = rows if rows is not None else CORE.Rows()
        self.packer = EventPacker()

    def commit(self, store: HeldStore, buckets: Mapping[str, Bucket], final: bool = False) -> int:
        """Write the batch's changes atomically and start a new batch; returns the events whose record
        could not be kept (they are rebuilt from their roles after a restart).

        With :attr:`every` ``> 1`` only every ``every``-th call (and a ``final`` one) writes, the changes of
        all the batches since the last write together: an event that arrived and left in between is never
        written, and what is released is the same. For ``replay`` without ``--resume`` only, which
        promises nothing before its end (a rerun reads the whole input again); ``serve`` and ``--resume``
        acknowledge or checkpoint each batch with its held rows."""
        self._pending += 1
        if not final and self._pending < self.every:
            return 0
        self._pending = 0
        inserts = []
        not_kept = 0
        rows = self.rows
        for h in rows.new:
            if h is None or (h.ubucket is None and h.qbucket is None):
                continue  # arrived and left within the batch: nothing to store
            blob, kept = pack_event(h.event, self.packer)
            if not kept:
                not_kept += 1
            inserts.append((h.row, h.ubucket, h.qbucket, h.arrived, blob))
            h.new = False
        updates = [(h.ubucket, h.qbucket, h.row) for h in rows.touched]
        deletes = [(row,) for row in rows.gone]
        ks = [(name, buckets[name].k) for name in rows.dirty_k]
        if inserts or updates or deletes or ks:
            store.write(inserts, updates, deletes, ks)
        rows.reset()
        return not_kept
