"""The journal of held rows (``store.Journal``): between two writes it keeps no event that has fully left (it is
freed when it leaves, not at the write), and a write stores exactly the arrivals that still have a half held."""

from __future__ import annotations

from typing import Any

from filters.category_buffer.buckets import Held
from filters.category_buffer.store import Journal
from sidecar.api import Event


class Store:
    """Records what a write would store (a duck-typed ``HeldStore``)."""

    def __init__(self) -> None:
        self.writes: list[tuple[list[Any], list[Any], list[Any], list[Any]]] = []

    def write(self, inserts: Any, updates: Any, deletes: Any, ks: Any) -> None:
        self.writes.append((list(inserts), list(updates), list(deletes), list(ks)))


def held(row: int) -> Held:
    ev = Event(f"u{row}", f"q{row}", "t", None, None, None, None, None, "\n")
    h = Held(row, ev, f"u{row}", f"q{row}", hash((f"u{row}", f"q{row}")), 0.0, None, (ev.user,), True)
    h.ubucket = h.qbucket = "A"
    return h


def leave(journal: Journal, h: Held) -> None:
    h.ubucket = h.qbucket = None
    journal.rows.left(h)


def test_an_arrival_that_left_is_dropped_at_once_and_not_written() -> None:
    journal = Journal()
    journal.every = 3
    store = Store()
    first = [held(row) for row in range(1, 7)]
    for h in first:
        journal.rows.arrived(h)
    leave(journal, first[1])
    leave(journal, first[4])
    assert [h.row if h is not None else None for h in journal.rows.new] == [1, None, 3, 4, None, 6]
    first[2].qbucket = None  # a half still held: kept
    journal.rows.left(first[2])  # told so by mistake: a half is still held, so it stays
    assert journal.rows.new[2] is first[2]
    assert journal.commit(store, {}) == 0 and journal.commit(store, {}) == 0 and not store.writes  # deferred
    journal.commit(store, {})
    ((inserts, updates, deletes, _),) = store.writes
    assert [row[0] for row in inserts] == [1, 3, 4, 6] and not updates and not deletes
    assert journal.rows.new == [] and not any(h.new for h in first if h.ubucket or h.qbucket)
    # the next window's rows start where the last ended; an older row that leaves is deleted
    second = [held(row) for row in range(7, 10)]
    for h in second:
        journal.rows.arrived(h)
    leave(journal, second[0])
    leave(journal, first[0])
    assert journal.rows.new[0] is None and journal.rows.new[1:] == second[1:]
    journal.commit(store, {}, final=True)
    inserts, updates, deletes, _ = store.writes[1]
    assert [row[0] for row in inserts] == [8, 9] and deletes == [(1,)]


def test_arrivals_out_of_row_order_are_never_dropped_by_mistake() -> None:
    """Should rows not be consecutive, an entry is dropped only when it is the event that left; others stay (and
    are skipped at the write when both halves are gone)."""
    journal = Journal()
    store = Store()
    hs = [held(row) for row in (1, 2, 5, 6)]
    for h in hs:
        journal.rows.arrived(h)
    leave(journal, hs[2])  # row 5 at index 2: 5 - 1 = 4 is out of range
    leave(journal, hs[0])
    assert journal.rows.new[0] is None and journal.rows.new[2] is hs[2]
    journal.commit(store, {})
    assert [row[0] for row in store.writes[0][0]] == [2, 6]
