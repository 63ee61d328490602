"""``profile``: paper 001's profiler — per-user category counts in SQLite.

Every event that reaches this filter adds one to (its user, its category). A
profile is the user's counts and their weights (count / user's total), as in
paper 001 §3.3.1 ("Arts: 40%, Health: 10%, ..."). Placed after
``category_buffer`` it profiles the protected stream; the invariant paper 001
checks (same counts per category before and after anonymisation) then holds per
user once that user's held events are counted too, and is tested.

The profile reads the ``category`` annotation only, never the query text. An
event with an empty query (``classify`` gives it no category) counts under
``unknown`` like any uncategorised event, or is skipped with ``unknown: skip``.

State lives in the SQLite store (one row per user and category, upserted once
per batch), so memory does not grow with the number of users; paper 001's
profiler reached 3,745 events/s on MongoDB, this one aggregates each batch in a
dict and upserts the distinct pairs with one ``executemany``. A file replay
aggregates many batches before it writes (``defer_commits``).
"""

from __future__ import annotations

import csv
import json
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import sqlite_utils

from sidecar.api import BuildContext, ConfigValueError, Event, Filter, FilterConfig, StateStoreLike, option

COMPONENT = "profile"
#: (user, category) counts a deferring run keeps at most before it writes them (about 150 bytes each)
PENDING_MAX = 100_000
TABLE = "profile_counts"
UNKNOWN = "unknown"


def _create(db: sqlite_utils.Database) -> None:
    db.execute(
        f"CREATE TABLE IF NOT EXISTS {TABLE} ("
        " user TEXT NOT NULL, category TEXT NOT NULL, count INTEGER NOT NULL,"
        " PRIMARY KEY (user, category)) WITHOUT ROWID"
    )


MIGRATIONS = [_create]


@dataclass(frozen=True)
class ProfileConfig(FilterConfig):
    """Options of ``profile``."""

    level: int = option(1, "Taxonomy level counted: 1 = the 16 ODP top-level categories.", min=1, max=5)
    unknown: Literal["count", "skip"] = option(
        "count", "Events without a category: `count` them under `unknown`, or `skip` them (counted)."
    )


class ProfileFilter(Filter[ProfileConfig]):
    """Count each user's events per category in SQLite (paper 001's profiler); events pass unchanged."""

    NAME = "profile"
    STATEFUL = True
    Config = ProfileConfig
    SUMMARY = "per-user category counts and weights in SQLite (paper 001 profiler); GetProfile, profiles export"

    def __init__(self, config: ProfileConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        if ctx.state is None:
            raise ConfigValueError("level", "profile needs the state store (state_dir)")
        self.state = ctx.state
        self.state.migrate(COMPONENT, MIGRATIONS)
        #: counts not yet written (a deferring run: :meth:`defer_commits`), and the batches they come from
        self._pending: dict[tuple[str, str], int] = {}
        self._batches = 0
        self._every = 1

    def category(self, ev: Event) -> str | None:
        meta = ev.meta
        cat = meta.get("category") if meta else None
        if not cat or cat == UNKNOWN:
            return None
        if self.config.level > 1 and meta:
            path = meta.get("category_path")
            if path:
                return "/".join(str(p) for p in tuple(path)[: self.config.level])
        return str(cat)

    def process(self, batch: list[Event]) -> list[Event]:
        counts = self._pending
        skip = self.config.unknown == "skip"
        skipped = 0
        category = self.category
        for ev in batch:
            cat = category(ev)
            if cat is None:
                if skip:
                    skipped += 1
                    continue
                cat = UNKNOWN
            key = (str(ev.user), cat)
            counts[key] = counts.get(key, 0) + 1
        self._batches += 1
        if self._batches >= self._every or len(counts) > PENDING_MAX:
            self._write()
        self.counts["profiled"] += len(batch) - skipped
        if skipped:
            self.counts["skipped_unknown"] += skipped
        return batch

    def _write(self) -> None:
        """Add the pending counts to the stored ones, in the caller's transaction (a savepoint of its own)."""
        counts, self._pending, self._batches = self._pending, {}, 0  # a failed write: its batches are retried
        if not counts:
            return
        conn = self.state.conn
        with self.state.lock:
            conn.execute("SAVEPOINT profile")
            try:
                conn.executemany(
                    f"INSERT INTO {TABLE}(user, category, count) VALUES (?, ?, ?) "
                    "ON CONFLICT(user, category) DO UPDATE SET count = count + excluded.count",
                    [(u, c, n) for (u, c), n in counts.items()],
                )
            except BaseException:
                conn.execute("ROLLBACK TO profile")
                conn.execute("RELEASE profile")
                raise
            conn.execute("RELEASE profile")

    def defer_commits(self, batches: int) -> None:
        """Write the counts every ``batches`` batches (or :data:`PENDING_MAX` of them) and at the final flush
        instead of with every batch (a file replay, which promises nothing before its end or its commit group's
        commit: :meth:`commit_deferred`). Until then :meth:`get_profile` and :meth:`stats` read what was written."""
        self._every = max(1, batches)

    def commit_deferred(self) -> None:
        """Write the pending counts now (``replay --resume`` commits them with its checkpoint)."""
        self._write()

    def flush(self, final: bool) -> list[Event]:
        """On the final flush, write what a deferring run still counts (after the events released upstream)."""
        if final:
            self._write()
        return []

    def get_profile(self, user: str) -> dict[str, int] | None:
        """A user's category counts (None: no such user). Used by the gRPC GetProfile RPC."""
        with self.state.lock:
            rows = self.state.conn.execute(
                f"SELECT category, count FROM {TABLE} WHERE user = ?", (str(user),)
            ).fetchall()
        return {c: int(n) for c, n in rows} if rows else None

    def stats(self) -> dict[str, Any]:
        with self.state.lock:
            (users,) = self.state.conn.execute(f"SELECT COUNT(DISTINCT user) FROM {TABLE}").fetchone()
        return {"profiles": int(users)}


# --- export ------------------------------------------------------------------------


def iter_profiles(conn: sqlite3.Connection) -> Iterator[tuple[str, dict[str, int]]]:
    """(user, {category: count}) for every profiled user, users in order."""
    current: str | None = None
    counts: dict[str, int] = {}
    for user, category, count in conn.execute(f"SELECT user, category, count FROM {TABLE} ORDER BY user, category"):
        if user != current:
            if current is not None:
                yield current, counts
            current, counts = user, {}
        counts[category] = int(count)
    if current is not None:
        yield current, counts


def weights(counts: dict[str, int]) -> dict[str, float]:
    total = sum(counts.values())
    return {c: n / total for c, n in counts.items()} if total else {}


def export_profiles(state: StateStoreLike, fmt: Literal["json", "csv", "sqlite"], out: Path) -> int:
    """Write every profile (counts and weights) to ``out``; returns the number of users."""
    state.migrate(COMPONENT, MIGRATIONS)
    conn = state.conn
    n = 0
    with state.lock:
        if fmt == "json":
            with out.open("w", encoding="utf-8") as fh:
                fh.write("{")
                for user, counts in iter_profiles(conn):
                    w = weights(counts)
                    entry = {c: {"count": counts[c], "weight": round(w[c], 6)} for c in counts}
                    line = json.dumps(user) + ": " + json.dumps(entry, ensure_ascii=False)
                    fh.write(("," if n else "") + "\n" + line)
                    n += 1
                fh.write("\n}\n")
        elif fmt == "csv":
            with out.open("w", encoding="utf-8", newline="") as fh:
                writer = csv.writer(fh)
                writer.writerow(["user", "category", "count", "weight"])
                for user, counts in iter_profiles(conn):
                    w = weights(counts)
                    for c in sorted(counts):
                        writer.writerow([user, c, counts[c], f"{w[c]:.6f}"])
                    n += 1
        else:
            if out.exists():
                out.unlink()
            target = sqlite3.connect(out)
            try:
                target.execute(
                    "CREATE TABLE profiles (user TEXT NOT NULL, category TEXT NOT NULL, count INTEGER NOT NULL,"
                    " weight REAL NOT NULL, PRIMARY KEY (user, category)) WITHOUT ROWID"
                )
                for user, counts in iter_profiles(conn):
                    w = weights(counts)
                    target.executemany(
                        "INSERT INTO profiles VALUES (?, ?, ?, ?)", [(user, c, counts[c], w[c]) for c in counts]
                    )
                    n += 1
                target.commit()
            finally:
                target.close()
    return n
