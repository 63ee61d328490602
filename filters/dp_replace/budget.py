"""The per-user budget ledger in the SQLite state store (paper 004 §3.2), exact and durable.

One row per (user, window): the epsilon the user has spent (an exact fraction,
stored as text: ``"1/3"``), the concepts replaced, and how many of the user's
events were replaced, suppressed (budget spent), dropped (no concept) or let
through unprotected (``no_concept: keep``). Users are stored as keyed hashes
(HMAC-SHA256 with a random per-database salt, first 16 bytes), never as ids; the
audit reads the ledger for its per-user epsilon figures.

**Accounting is exact.** Each concept costs ``eps_q`` = epsilon/m (batch) or
epsilon/max_queries (stream) as a :class:`fractions.Fraction`; a user may spend
while ``spent + n * eps_q <= epsilon`` holds exactly, so a budget is never
exceeded by rounding. The sampler gets the largest float not above ``eps_q``.

**Durability.** A batch's spending is written in ``SAVEPOINT dp_replace`` inside
the runtime's transaction when there is one, so it commits together with the
output it paid for; a restart (even kill -9) resumes with the spending of every
batch that was delivered. ``meta`` keeps the salt and the configuration last
used (epsilon, budget mode, window...), for the audit.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from fractions import Fraction

import sqlite_utils

from sidecar.api import StateStoreLike

COMPONENT = "dp_replace"
LEDGER = "dp_replace_ledger"
META = "dp_replace_meta"
OUTCOMES = ("replaced", "suppressed", "dropped", "unprotected")


def _create(db: sqlite_utils.Database) -> None:
    db.execute(
        f"CREATE TABLE IF NOT EXISTS {LEDGER} ("
        " user BLOB NOT NULL, window INTEGER NOT NULL, spent TEXT NOT NULL, units INTEGER NOT NULL,"
        " replaced INTEGER NOT NULL, suppressed INTEGER NOT NULL, dropped INTEGER NOT NULL,"
        " unprotected INTEGER NOT NULL, PRIMARY KEY (user, window)) WITHOUT ROWID"
    )
    db.execute(f"CREATE TABLE IF NOT EXISTS {META} (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID")


MIGRATIONS: list[Callable[[sqlite_utils.Database], None]] = [_create]


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
        remaining = budget - Fraction(self.num, self.den)
        self.allowed = math.floor(remaining / cost) if remaining > 0 else 0

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


class Ledger:
    """Accounts by (hashed user, window), cached in memory (bounded) and written once per batch."""

    def __init__(self, state: StateStoreLike, token_bytes: Callable[[int], bytes], cache_size: int = 200_000) -> None:
        self.state = state
        state.migrate(COMPONENT, MIGRATIONS)
        with state.lock:
            row = state.conn.execute(f"SELECT value FROM {META} WHERE key = 'salt'").fetchone()
            if row is None:
                salt = token_bytes(16).hex()
                with self._savepoint() as conn:
                    conn.execute(f"INSERT INTO {META}(key, value) VALUES ('salt', ?)", (salt,))
            else:
                salt = row[0]
        self._salt = bytes.fromhex(salt)
        self._keys: dict[str, bytes] = {}
        self._accounts: dict[tuple[bytes, int], Account] = {}
        self._batch: dict[bytes, Account] = {}  # the accounts of the batch being processed
        self.cache_size = cache_size

    @contextmanager
    def _savepoint(self) -> Iterator[sqlite3.Connection]:
        conn = self.state.conn
        with self.state.lock:
            conn.execute("SAVEPOINT dp_replace")
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK TO dp_replace")
                conn.execute("RELEASE dp_replace")
                raise
            conn.execute("RELEASE dp_replace")

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
        """The accounts of ``keys`` in ``window`` (loaded from the store when not cached; new ones empty)."""
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
            conn = self.state.conn
            with self.state.lock:
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
        """Write every changed account (one savepoint) and bound the cache."""
        rows = []
        for k, a in self._batch.items():
            if a.dirty:
                a.settle()
                rows.append((k, window, f"{a.num}/{a.den}", a.units, *a.outcomes))
        if rows:
            with self._savepoint() as conn:
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
        """Drop cached accounts of other windows (they are in the store)."""
        self._accounts = {kw: a for kw, a in self._accounts.items() if kw[1] == window}

    def write_meta(self, values: dict[str, str]) -> None:
        with self._savepoint() as conn:
            conn.executemany(
                f"INSERT INTO {META}(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                sorted(values.items()),
            )


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
