"""category_buffer's buckets: what ``max_k_policy: suppress`` and ``max_hold``/``max_held`` take, on any history.

A bucket's history here is random arrivals and random releases (the draw's pops); after it, what
``take_most_held`` takes must be what the rule in the README says, computed the slow way: the heaviest user
(query and user halves together; ties: the smaller name) gives one half at a time, each user's first-arrived
half first. The bucket's per-sender index (``sent``) must agree with its query list throughout.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from filters.category_buffer.buckets import Bucket, Held, heaviest_first, take_all, take_most_held, take_oldest
from sidecar.api import Event

USERS = ("a", "b", "c", "d")


def held(row: int, user: str, arrived: float) -> Held:
    ev = Event(user, f"q{row}", None, None, None, None, None, None, "\n")
    return Held(row, ev, user, f"q{row}", hash((user, f"q{row}")), arrived, None, (user,), new=True)


#: a history: per step, an arrival (user index, clock tick) or a release (query pick, user pick)
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("arrive"), st.integers(0, len(USERS) - 1), st.integers(0, 3)),
        st.tuples(st.just("release"), st.integers(0, 10**6), st.integers(0, 10**6)),
    ),
    min_size=1,
    max_size=120,
)


def build(steps: list[tuple[str, int, int]]) -> Bucket:
    b = Bucket("Health", 5, 40)
    clock = 0.0
    for row, (kind, x, y) in enumerate(steps):
        if kind == "arrive":
            clock += y  # several arrivals share a time (one batch), as in the filter
            h = held(row, USERS[x], clock)
            b.add_user(h)
            b.add_query(h)
        elif b.queries:
            names = b.names
            name = names[y % len(names)]
            b.pop_user(name, x % len(b.by_name[name]))
            b.pop_query(x % len(b.queries))
        check_index(b)
    return b


def check_index(b: Bucket) -> None:
    """``sent`` holds exactly the held query halves, per sender, in arrival order; qidx is each one's place."""
    assert all(b.queries[i].qidx == i for i in range(len(b.queries)))
    by_sender: dict[str, list[Held]] = {}
    for h in sorted(b.queries, key=lambda h: h.row):
        by_sender.setdefault(h.sender, []).append(h)
    assert {name: list(hs) for name, hs in b.sent.items()} == by_sender
    assert all(slots == sorted(slots, key=lambda h: h.row) for slots in b.by_name.values())
    assert sorted(b.names) == sorted(b.by_name) and all(b.names[b.name_pos[n]] == n for n in b.names)


def slow_most_held(groups: dict[str, list[Held]], n: int, other: Counter[str]) -> list[Held]:
    """The rule, the slow way: n times, the heaviest user with a half here gives their oldest one."""
    left = {name: sorted(hs, key=lambda h: h.row) for name, hs in groups.items() if hs}
    out: list[Held] = []
    while left and len(out) < n:
        name = min(left, key=lambda u: (-(len(left[u]) + other[u]), u))
        out.append(left[name].pop(0))
        if not left[name]:
            del left[name]
    return out


@settings(max_examples=300, deadline=None)
@given(steps=STEPS, n=st.integers(1, 12))
def test_take_most_held_takes_the_heaviest_users_oldest_halves(steps: list[tuple[str, int, int]], n: int) -> None:
    b = build(steps)
    n = min(n, len(b.queries))
    senders: dict[str, list[Held]] = {}
    for h in b.queries:
        senders.setdefault(h.sender, []).append(h)
    users = {name: list(hs) for name, hs in b.by_name.items()}
    want_q = slow_most_held(senders, n, Counter({u: len(hs) for u, hs in users.items()}))
    sent_after = Counter({u: len(hs) for u, hs in senders.items()}) - Counter(h.sender for h in want_q)
    want_u = slow_most_held(users, n, sent_after)
    before = len(b.queries)
    queries, slots = take_most_held(b, n)
    assert queries == want_q and slots == want_u
    assert all(h.qbucket is None for h in queries) and all(h.ubucket is None for h in slots)
    assert len(b.queries) == before - n == sum(len(s) for s in b.by_name.values())
    check_index(b)


@settings(max_examples=150, deadline=None)
@given(steps=STEPS, n=st.integers(1, 12))
def test_take_oldest_and_take_all_keep_the_index(steps: list[tuple[str, int, int]], n: int) -> None:
    b = build(steps)
    n = min(n, len(b.queries))
    queries, users = take_oldest(b, n)
    assert len(queries) == len(users) == n
    check_index(b)
    queries, users = take_all(b)
    assert [h.row for h in queries] == sorted(h.row for h in queries)
    assert [h.row for h in users] == sorted(h.row for h in users)
    assert not b.queries and not b.sent and not b.by_name and not b.names
    parent = Bucket("*", 5, 40)
    for h in queries:
        parent.add_query(h)
    for h in users:
        parent.add_user(h)
    check_index(parent)


def test_heaviest_first_counts_both_sides_and_breaks_ties_by_name() -> None:
    """``b`` holds 3 + 2, ``a`` 2 + 3: a tie, so ``a`` gives first; then ``b`` (5 against a's 4)."""
    other = {"a": [1, 2, 3], "b": [1, 2]}
    assert heaviest_first({"a": 2, "b": 3}, 3, other) == ["a", "b", "a"]
    assert heaviest_first({"a": 2, "b": 3, "c": 0}, 10, other) == ["a", "b", "a", "b", "b"]
    assert heaviest_first({}, 2, other) == []


@settings(max_examples=200, deadline=None)
@given(STEPS)
def test_one_suppression_takes_what_the_heaviest_first_order_gives(steps: list[tuple[str, int, int]]) -> None:
    """``take_most_held(bucket, 1)`` (every arrival over max_k: its own loop, no dict or heap) takes the query
    half and the user half that :func:`heaviest_first` names first, ties to the smaller name, the user's weight
    counted after the query half left."""
    b = build(steps)
    if not b.queries:
        return
    sender = heaviest_first({n: len(hs) for n, hs in b.sent.items()}, 1, b.by_name)[0]
    query = next(iter(b.sent[sender]))
    after = build(steps)
    after.pop_query(next(iter(after.sent[sender])).qidx)
    user = heaviest_first({n: len(hs) for n, hs in after.by_name.items()}, 1, after.sent)[0]
    (q,), (u,) = take_most_held(b, 1)
    assert (q.row, u.row) == (query.row, after.by_name[user][0].row)
    check_index(b)
