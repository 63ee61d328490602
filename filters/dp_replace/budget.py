"""The per-user budget ledger (paper 004 §3.2), exact and durable, **charged before anything is released**.

One row per (user, window): the epsilon the user has spent (an exact fraction,
stored as text: ``"1/3"``), the concepts replaced, and how many of the user's
events were replaced, suppressed (budget spent), dropped (no concept) or let
through unprotected (``no_concept: keep``). Users are stored as keyed hashes
(HMAC-SHA256 with a random per-ledger salt, first 16 bytes), never as ids; the
audit reads the ledger for its per-user epsilon figures.

**Accounting is exact.** Each concept costs ``eps_q`` = epsilon/m (batch) or
epsilon/max_queries (stream) as a :class:`fractions.Fraction`; a user may spend
while ``spent + n * eps_q <= epsilon`` holds exactly, so a budget is never
exceeded by rounding. The sampler gets the largest float not above ``eps_q``.

**Durability: charge first, release after.** The ledger is its own SQLite
database, ``dp_ledger.db`` beside the sidecar's state database (WAL,
``synchronous=FULL``, mode 0600), and each batch's spending is committed there
*before* ``process`` returns, i.e. before any sink sees the batch. The runtime's
own transaction (held events, outbox, source position) commits after delivery,
and a crash or a failed delivery rolls it back, so the same events are processed
again after a restart: the mechanism then draws afresh, and a second,
independent draw of a query is a second release of it. With the charge already
durable, that second draw is paid for again (the user's budget runs out sooner:
fail-safe); had the charge rolled back with the runtime's transaction (the first
version did), the second release would have been free and the user's real
privacy loss above the ledger's. A kill -9 therefore never lets a user spend more
than epsilon per window; it may waste budget on output that was never delivered.

A state directory whose database still holds the ledger tables (the first
version kept them there) has them copied into ``dp_ledger.db`` on first start.
``meta`` keeps the salt and the configuration last used (epsilon, budget mode,
window...), for the audit.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import os
import re
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path

from sidecar.api import StateStoreLike

LEDGER = "dp_replace_ledger"
META = "dp_replace_meta"
OUTCOMES = ("replaced", "suppressed", "dropped", "unprotected")


def _create(conn: sqlite3.Connection) -> None:
    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {LEDGER} ("
        " user BLOB NOT NULL, window INTEGER NOT NULL, spent TEXT NOT NULL, units INTEGER NOT NULL,"
        " replaced INTEGER NOT NULL, suppressed INTEGER NOT NULL, dropped INTEGER NOT NULL,"
        " unprotected INTEGER NOT NULL, PRIMARY KEY (user, window)) WITHOUT ROWID"
    )
    conn.execute(f"CREATE TABLE IF NOT EXISTS {META} (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")


def float_below(x: Fraction) -> float:
    """The largest float not above ``x`` (the sampler never uses more epsilon than is accounted)."""
    f = float(x)
    if Fraction(f) > x:
        f = math.nextafter(f, 0.0)
    return f


class Account:
    """One user's spending in one window, exact.

    The stored spending is ``num/den``; on top of it, this run charges ``used``
    concepts at ``cost`` each (one price per user: epsilon/max_queries, or
    epsilon/m). ``allowed`` = how many concepts at ``cost`` still fit in the budget,
    computed once per price, so a charge is one integer comparison.
    """

    __slots__ = ("allowed", "cost", "den", "dirty", "eps_q", "num", "outcomes", "units", "used")

    def __init__(self, spent: Fraction, units: int = 0, outcomes: list[int] | None = None) -> None:
        self.num, self.den = spent.numerator, spent.denominator
        self.units = units
        self.outcomes = outcomes if outcomes is not None else [0, 0, 0, 0]
        self.dirty = False
        self.cost: Fraction | None = None
        self.eps_q = 0.0  # the sampler's epsilon per concept at ``cost``: the largest float not above it
        self.allowed = 0
        self.used = 0

    @property
    def spent(self) -> Fraction:
        return Fraction(self.num, self.den) + (self.used * self.cost if self.cost is not None else 0)

    def price(self, cost: Fraction, budget: Fraction, eps_q: float) -> None:
        """Charge at ``cost`` per concept from now on, within ``budget``; draw with ``eps_q`` (<= ``cost``)."""
        self.settle()
        self.cost = cost
        self.eps_q = eps_q
        # floor((budget - num/den) / cost) in integers (exact, and no Fraction objects per user)
        bn, bd, cn, cd = budget.numerator, budget.denominator, cost.numerator, cost.denominator
        rem = bn * self.den - self.num * bd  # (budget - spent) * bd * den
        self.allowed = (rem * cd) // (bd * self.den * cn) if rem > 0 else 0

    def can_spend(self, n: int) -> bool:
        return self.used + n <= self.allowed

    def spend(self, n: int) -> None:
        self.used += n
        self.units += n
        self.dirty = True

    def count(self, outcome: int) -> None:
        self.outcomes[outcome] += 1
        self.dirty = True

    def settle(self) -> None:
        """Fold this run's charges into ``num/den`` (integers: exact, and cheaper than Fraction objects)."""
        if self.used and self.cost is not None:
            cn, cd = self.cost.numerator, self.cost.denominator
            num = self.num * cd + self.used * cn * self.den
            den = self.den * cd
            g = math.gcd(num, den)
            self.num, self.den = num // g, den // g
            self.allowed -= self.used
            self.used = 0


LEDGER_FILE = "dp_ledger.db"


#: the state folder of one partition of a partitioned replay: ``STATE_DIR/partitions/PPPP-of-NNNN``
#: (``adapters.file.scale.job.partition_dir``)
PARTITION_DIR = re.compile(r"\d{4,}-of-\d{4,}")


def ledger_folder(state_dir: Path) -> Path:
    """The folder whose ``dp_ledger.db`` charges a state folder's users: the folder itself, or, for a partition's
    state folder (``STATE_DIR/partitions/PPPP-of-NNNN``), the base ``STATE_DIR``.

    A user's budget is the user's whatever the partitioning: every partition task of every partition count, and
    a replay without workers, charge the one ledger of the base folder. The partitions of a run hold disjoint
    users, so their rows never conflict; SQLite's WAL and ``busy_timeout`` serialise their commits. The base
    folder's single-writer lock is held by the run's parent process (the lock guards against *other* runs);
    the partition tasks open only the ledger file there, never the base state database."""
    if PARTITION_DIR.fullmatch(state_dir.name) and state_dir.parent.name == "partitions":
        return state_dir.parent.parent
    return state_dir


def ledger_file(conn: sqlite3.Connection) -> Path | None:
    """``dp_ledger.db`` of the state database of ``conn`` (:func:`ledger_folder`; None for an in-memory one)."""
    for _, name, file in conn.execute("PRAGMA database_list"):
        if name == "main":
            return ledger_folder(Path(file).parent) / LEDGER_FILE if file else None
    return None


def _open(path: Path) -> sqlite3.Connection:
    if not path.exists():
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    os.chmod(path, 0o600)
    conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=60.0)
    conn.execute("PRAGMA busy_timeout=60000")  # first: partition tasks of one run open and commit it together
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")  # a committed charge survives a power cut, not only a kill
    for suffix in ("-wal", "-shm"):
        side = Path(str(path) + suffix)
        if side.exists():
            os.chmod(side, 0o600)
    _create(conn)
    return conn


class Ledger:
    """Accounts by (hashed user, window), cached in memory (bounded), committed to ``dp_ledger.db`` per batch."""

    def __init__(self, state: StateStoreLike, token_bytes: Callable[[int], bytes], cache_size: int = 200_000) -> None:
        path = ledger_file(state.conn)
        if path is None:
            raise ValueError("the budget ledger needs a state database on disk (state_dir)")
        self.path = path
        self.conn = _open(path)
        self.lock = threading.RLock()
        self._adopt_old(state)
        with self._transaction() as conn:  # partition tasks may start together: the first one's salt wins
            conn.execute(f"INSERT OR IGNORE INTO {META}(key, value) VALUES ('salt', ?)", (token_bytes(16).hex(),))
            salt = conn.execute(f"SELECT value FROM {META} WHERE key = 'salt'").fetchone()[0]
        self._salt = bytes.fromhex(salt)
        self._keys: dict[str, bytes] = {}
        self._accounts: dict[tuple[bytes, int], Account] = {}
        self._batch: dict[bytes, Account] = {}  # the accounts of the batch being processed
        self.cache_size = cache_size

    def _adopt_old(self, state: StateStoreLike) -> None:
        """Copy a first-version ledger (tables in the state database) into this file, once."""
        with state.lock:
            tables = {r[0] for r in state.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if LEDGER not in tables or self.conn.execute(f"SELECT COUNT(*) FROM {META}").fetchone()[0]:
                return
            meta = state.conn.execute(f"SELECT key, value FROM {META}").fetchall()
            rows = state.conn.execute(f"SELECT * FROM {LEDGER}").fetchall()
        with self._transaction() as conn:
            conn.executemany(f"INSERT INTO {META}(key, value) VALUES (?, ?)", meta)
            conn.executemany(f"INSERT INTO {LEDGER} VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        conn = self.conn
        with self.lock:
            conn.execute("BEGIN IMMEDIATE")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def key(self, user: str) -> bytes:
        k = self._keys.get(user)
        if k is None:
            if len(self._keys) >= self.cache_size:
                self._keys.clear()
            k = self._keys[user] = hmac.new(self._salt, user.encode("utf-8", "surrogatepass"), hashlib.sha256).digest()[
                :16
            ]
        return k

    def accounts(self, keys: Iterable[bytes], window: int) -> dict[bytes, Account]:
        """The accounts of ``keys`` in ``window`` (loaded from the ledger when not cached; new ones empty)."""
        out: dict[bytes, Account] = {}
        self._batch = out
        missing = []
        for k in set(keys):
            acc = self._accounts.get((k, window))
            if acc is None:
                missing.append(k)
            else:
                out[k] = acc
        if missing:
            conn = self.conn
            with self.lock:
                for i in range(0, len(missing), 500):
                    chunk = missing[i : i + 500]
                    marks = ",".join("?" * len(chunk))
                    for user, spent, units, *outcomes in conn.execute(
                        f"SELECT user, spent, units, replaced, suppressed, dropped, unprotected FROM {LEDGER} "
                        f"WHERE window = ? AND user IN ({marks})",
                        (window, *chunk),
                    ):
                        out[bytes(user)] = Account(Fraction(spent), int(units), [int(v) for v in outcomes])
            for k in missing:
                acc = out.setdefault(k, Account(Fraction(0)))
                self._accounts[(k, window)] = acc
        return out

    def commit(self, window: int) -> None:
        """Write every changed account and commit (durably, before the batch is released); bound the cache."""
        rows = []
        for k, a in self._batch.items():
            if a.dirty:
                a.settle()
                rows.append((k, window, f"{a.num}/{a.den}", a.units, *a.outcomes))
        if rows:
            with self._transaction() as conn:
                conn.executemany(
                    f"INSERT INTO {LEDGER}(user, window, spent, units, replaced, suppressed, dropped, unprotected) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(user, window) DO UPDATE SET spent = excluded.spent, "
                    "units = excluded.units, replaced = excluded.replaced, suppressed = excluded.suppressed, "
                    "dropped = excluded.dropped, unprotected = excluded.unprotected",
                    rows,
                )
            for a in self._batch.values():
                a.dirty = False
        self._batch = {}
        if len(self._accounts) >= self.cache_size:
            self._accounts.clear()

    def forget_other_windows(self, window: int) -> None:
        """Drop cached accounts of other windows (they are in the ledger)."""
        self._accounts = {kw: a for kw, a in self._accounts.items() if kw[1] == window}

    def write_meta(self, values: dict[str, str]) -> None:
        with self._transaction() as conn:
            conn.executemany(
                f"INSERT INTO {META}(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                sorted(values.items()),
            )

    def close(self) -> None:
        self.conn.close()


#: Users of a window whose spending the ledger's figures (/metrics) read at most: the first by hashed user, a
#: uniform sample since the hash is keyed with the ledger's random salt
SPENT_SAMPLE = 5000
SPENT_QUANTILES = (0.5, 0.9, 0.99, 1.0)


def spending(ledger: Ledger, window: int, epsilon: Fraction, cost: Fraction | None) -> dict[str, object]:
    """The users of ``window`` in the ledger, the estimated number at their budget (one more concept at ``cost``
    does not fit; ``cost`` None, batch mode: spent all of ``epsilon``) and the epsilon-spent quantiles, from
    up to :data:`SPENT_SAMPLE` users (counts and epsilon figures only)."""
    with ledger.lock:
        users = ledger.conn.execute(f"SELECT COUNT(*) FROM {LEDGER} WHERE window = ?", (window,)).fetchone()[0]
        rows = ledger.conn.execute(
            f"SELECT spent FROM {LEDGER} WHERE window = ? ORDER BY user LIMIT ?", (window, SPENT_SAMPLE)
        ).fetchall()
    spent = sorted(Fraction(r[0]) for r in rows)
    if not spent:
        return {"users": 0, "users_at_budget": 0, "spent_quantiles": {}}
    full = sum(1 for s in spent if (epsilon - s < cost if cost is not None else s >= epsilon))
    quantiles = {str(q): float(spent[min(len(spent) - 1, math.ceil(q * len(spent)) - 1)]) for q in SPENT_QUANTILES}
    return {"users": users, "users_at_budget": round(full * users / len(spent)), "spent_quantiles": quantiles}


def read_ledger(conn: sqlite3.Connection) -> tuple[dict[str, str], list[tuple[bytes, int, Fraction, int, list[int]]]]:
    """The meta values (the salt left out) and every (hashed user, window, spent, units, outcomes) row, for the
    audit: hashed users let it add up a user's windows, and are never shown."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if LEDGER not in tables:
        return {}, []
    meta = {k: v for k, v in conn.execute(f"SELECT key, value FROM {META}") if k != "salt"}
    rows = [
        (bytes(user), int(w), Fraction(s), int(u), [int(x) for x in rest])
        for user, w, s, u, *rest in conn.execute(
            f"SELECT user, window, spent, units, replaced, suppressed, dropped, unprotected FROM {LEDGER} "
            "ORDER BY user, window"
        )
    ]
    return meta, rows
