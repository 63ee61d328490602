"""category_buffer's exact draw (issue 28 item 7): grouped by text, the same distribution as listing every pair.

``exact_draw`` maps one random number in [0, total) to a pair. Fed every number of that range once, it must
give every valid pair exactly once (``user_draw: user``: uniform) or exactly slots(user) times (``slot``:
weighted by held slots), and nothing else: that is the distribution of the enumeration it replaces
(``enumerated_draw``), whatever the bucket and whatever the pair memory avoids.
"""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from filters.category_buffer.buckets import CORE, Bucket, Held
from filters.category_buffer.pairs import PairMemory, draw, enumerated_draw, exact_draw, pair_of
from filters.category_buffer.rand import RandomPool
from sidecar.api import Event, compiled

USERS = ("a", "b", "c", "d", "e")
TEXTS = ("google", "ebay", "weather", "myspace")


def Scripted(words: list[int]) -> RandomPool:  # read as a pool class
    """A pool whose words are given: ``below(n)`` is the next word modulo n."""
    pool = RandomPool(lambda n: bytes(n))
    pool.words = list(words)
    return pool


def bucket_and_memory(events: list[tuple[int, int]], known: list[tuple[int, int]]) -> tuple[Bucket, PairMemory]:
    """A bucket holding ``events`` (user, text) and a memory that also knows the ``known`` (user, text) pairs
    (sent earlier, or later in the archive), as the filter builds them."""
    b = Bucket("Shopping", 5, 320)
    memory = PairMemory(1000)
    for row, (u, t) in enumerate(events):
        user, text = USERS[u], TEXTS[t]
        ev = Event(user, text, None, None, None, None, None, None, "\n")
        h = Held(row, ev, user, text, pair_of(user, text), float(row), None, (user,), new=True)
        b.add_user(h)
        b.add_query(h)
        memory.hold(h.pair)
    memory.learn_future(pair_of(USERS[u], TEXTS[t]) for u, t in known)
    return b, memory


def valid_pairs(b: Bucket, memory: PairMemory, by_user: bool) -> Counter[tuple[int, str]]:
    """Every valid (query index, user), counted by its weight: 1, or the user's held slots."""
    return Counter(
        {
            (qi, name): 1 if by_user else len(b.by_name[name])
            for qi, q in enumerate(b.queries)
            for name in b.names
            if name != q.sender and not memory.avoided(name, q.text)
        }
    )


EVENTS = st.lists(st.tuples(st.integers(0, len(USERS) - 1), st.integers(0, len(TEXTS) - 1)), min_size=1, max_size=40)
KNOWN = st.lists(st.tuples(st.integers(0, len(USERS) - 1), st.integers(0, len(TEXTS) - 1)), max_size=12)


@settings(max_examples=300, deadline=None)
@given(events=EVENTS, known=KNOWN, by_user=st.booleans())
def test_exact_draw_gives_each_valid_pair_its_weight(
    events: list[tuple[int, int]], known: list[tuple[int, int]], by_user: bool
) -> None:
    b, memory = bucket_and_memory(events, known)
    want = valid_pairs(b, memory, by_user)
    total = sum(want.values())
    if not total:
        assert exact_draw(b, Scripted([0, 0]), memory, by_user) is None
        assert enumerated_draw(b, Scripted([0, 0]), memory, by_user) is None
        return
    got: Counter[tuple[int, str]] = Counter()
    for pick in range(total):
        drawn = exact_draw(b, Scripted([pick, 0]), memory, by_user)
        assert drawn is not None
        qi, name, slot = drawn
        assert slot == 0
        got[(qi, name)] += 1
    assert got == want


@settings(max_examples=100, deadline=None)
@given(events=EVENTS, known=KNOWN, by_user=st.booleans(), seed=st.integers(0, 2**32))
def test_draw_returns_only_valid_pairs(
    events: list[tuple[int, int]], known: list[tuple[int, int]], by_user: bool, seed: int
) -> None:
    """Rejection tries then the exact draw: a pair it returns is valid, and None only when none is."""
    b, memory = bucket_and_memory(events, known)
    words = [(seed * 6364136223846793005 + i * 1442695040888963407) % 2**64 for i in range(64)]
    drawn = draw(b, Scripted(words), memory, by_user)
    want = valid_pairs(b, memory, by_user)
    if drawn is None:
        assert not want
    else:
        qi, name, slot = drawn
        assert (qi, name) in want and 0 <= slot < len(b.by_name[name])


def test_a_bucket_stuck_on_a_popular_text_checks_each_text_once() -> None:
    """29 queries of 2 texts from 13 users, every user a known sender of both: no valid pair, found with 26
    checks of the pair memory (one per text and user), not 377. Counted on the core's source: compiled code
    looks a dict up without its subclass's ``__contains__``."""
    src = compiled.source(CORE)
    Bucket, Held, PairMemory, RandomPool, exact_draw = (
        src.Bucket,
        src.Held,
        src.PairMemory,
        src.RandomPool,
        src.exact_draw,
    )
    users = [f"u{i}" for i in range(13)]
    b = Bucket("Computers", 5, 320)
    memory = PairMemory(1000)
    memory.held = counting = CountingDict()
    for row in range(29):
        user, text = users[row % 13], ("google", "yahoo")[row % 2]
        ev = Event(user, text, None, None, None, None, None, None, "\n")
        h = Held(row, ev, user, text, pair_of(user, text), float(row), None, (user,), new=True)
        b.add_user(h)
        b.add_query(h)
        memory.hold(h.pair)
    memory.learn_future(pair_of(u, t) for u in users for t in ("google", "yahoo"))
    pool = RandomPool(lambda n: bytes(n))
    pool.words = [0, 0]
    assert exact_draw(b, pool, memory, True) is None
    assert counting.checks == 2 * 13


class CountingDict(dict[int, int]):
    """The held pairs, counting look-ups (every check of a pair looks here first)."""

    checks = 0

    def __contains__(self, key: object) -> bool:
        self.checks += 1
        return super().__contains__(key)
