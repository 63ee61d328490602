"""category_buffer keeps a bucket's valid pairs while they are few (issue 28 item 7): after a first pass over the
whole archive a pair's validity never changes, so the kept pairs, updated as queries and users come and leave,
are at every moment exactly the pairs an enumeration of the bucket finds valid, and a draw among them has the
exact draw's distribution."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filters.category_buffer import CategoryBufferConfig, CategoryBufferFilter
from filters.category_buffer.buckets import Bucket, Held
from filters.category_buffer.pairs import kept_draw, pair_of
from filters.category_buffer.rand import RandomPool
from sidecar.api import BuildContext, Event
from sidecar.codecs import SchemaConfig
from sidecar.pipeline import codec_lookup
from sidecar.state import StateStore


def make(tmp: Path, seed: int, **options: object) -> CategoryBufferFilter:
    ctx = BuildContext(
        config_dir=tmp, state=StateStore(tmp), rng=random.Random(seed), seed=seed, codecs=codec_lookup(SchemaConfig())
    )
    return CategoryBufferFilter(CategoryBufferConfig(**options), ctx)  # options typed loosely


def stream(n: int, users: int, texts: int, seed: int) -> list[Event]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        e = Event(f"u{rng.randrange(users)}", f"q{rng.randrange(texts)}", f"{i:06d}", "", "")
        e.annotate("category", f"C{rng.randrange(2)}")
        out.append(e)
    return out


def enumerated(f: CategoryBufferFilter, b: Bucket) -> Counter[tuple[int, str]]:
    """The bucket's valid pairs as the pair memory says (every set it keeps), by the query's row."""
    return Counter((q.row, n) for q in b.queries for n in b.names if n != q.sender and not f.memory.avoided(n, q.text))


def kept(b: Bucket) -> Counter[tuple[int, str]]:
    assert b.open is not None
    return Counter((q.row, n) for q, n in b.open)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    users=st.integers(6, 16),
    texts=st.integers(15, 60),
    k=st.sampled_from([2, 3, 5]),
    user_draw=st.sampled_from(["user", "slot"]),
    batch=st.integers(1, 60),
)
def test_kept_pairs_are_the_valid_pairs_at_every_batch(
    tmp_path_factory: pytest.TempPathFactory, seed: int, users: int, texts: int, k: int, user_draw: str, batch: int
) -> None:
    """Each user sends a good share of few texts (many pairs avoided, buckets often stuck), small max_k
    (suppressions): after every batch each bucket that keeps its pairs keeps exactly the valid ones, and no
    release re-creates a pair of the archive."""
    evs = stream(300, users, texts, seed)
    batches = [evs[i : i + batch] for i in range(0, len(evs), batch)]
    f = make(tmp_path_factory.mktemp("s"), seed, k=k, max_k=3 * k, avoid_repeat_pairs=30, user_draw=user_draw)
    f.prescan(batches)
    assert f.memory.static
    sent = {(e.user, " ".join(e.query.split())) for e in evs}
    for b in batches:
        for out in f.process(b):
            assert (out.user, out.query) not in sent  # no pair of the archive re-created
        for bucket in f.buckets.values():
            if bucket.open is not None:
                assert kept(bucket) == enumerated(f, bucket)


def test_a_stuck_bucket_keeps_its_pairs_and_releases_as_they_open(tmp_path: Path) -> None:
    """Eight users all sending the same two texts: no valid pair, the bucket keeps none (and draws nothing);
    a user with texts of their own opens pairs, kept and drawn."""
    f = make(tmp_path, 3, k=3, avoid_repeat_pairs=0)
    common = [Event(f"u{i}", t, "t", "", "") for i in range(8) for t in ("google", "yahoo")]
    fresh = [Event("new", f"own {i}", "t", "", "") for i in range(3)]
    for e in common + fresh:
        e.annotate("category", "Computers")
    f.prescan([common + fresh])
    assert f.process(common) == []
    (bucket,) = f.buckets.values()
    assert bucket.open == [] and len(bucket.queries) == 16
    out = f.process(fresh)
    assert out and all(e.user != "new" for e in out if e.query.startswith("own"))
    assert bucket.open is not None and kept(bucket) == enumerated(f, bucket)


def test_no_pairs_are_kept_without_a_first_pass_or_after_a_restart(tmp_path: Path) -> None:
    """Without a first pass (a stream) validity changes with time: pairs are never kept; nor after a restart
    with held events (they may be of another archive)."""
    evs = stream(600, 5, 2, 1)
    f = make(tmp_path / "a", 1, k=3)
    f.process(evs)
    assert not f.memory.static and all(b.open is None for b in f.buckets.values())
    g = make(tmp_path / "b", 1, k=3)
    g.prescan([evs[:300]])
    g.process(evs[:300])
    g.flush(final=True)
    assert g.held() and any(b.open is not None for b in g.buckets.values())
    g.ctx.state.close()  # type: ignore[union-attr]
    h = make(tmp_path / "b", 1, k=3)  # restored from g's state
    h.prescan([evs[300:]])
    h.process(evs[300:])
    assert h.held() and not h.memory.static and all(b.open is None for b in h.buckets.values())


def test_more_events_than_the_first_pass_read_end_the_static_memory(tmp_path: Path) -> None:
    """The input grew between the two passes (a log still written): once more events arrive than the first pass
    read, its shared pairs no longer decide alone. The memory holds every held event's pair again, no bucket keeps
    its pairs, and no release gives a query to a user who sent that text while it is held or arrived since."""
    evs = stream(600, 6, 20, 3)
    f = make(tmp_path, 3, k=3)
    f.prescan([evs[:300]])
    out = f.process(evs[:300])
    assert f.memory.static
    out += f.process(evs[300:301])
    held = {h for b in f.buckets.values() for h in b.queries}
    held.update(h for b in f.buckets.values() for hs in b.by_name.values() for h in hs)
    assert not f.memory.static and all(b.open is None for b in f.buckets.values())
    assert Counter(h.pair for h in held) == Counter(f.memory.held)
    for e in evs[301:]:
        sent_now = {(h.sender, h.text) for b in f.buckets.values() for h in b.queries} | {(e.user, e.query)}
        for o in f.process([e]):
            assert (o.user, o.query) not in sent_now


def Scripted(words: list[int]) -> RandomPool:  # read as a pool class
    """A pool whose words are given: ``below(n)`` is the next word modulo n."""
    pool = RandomPool(lambda n: bytes(n))
    pool.words = list(words)
    return pool


@pytest.mark.parametrize("by_user", [True, False])
def test_a_kept_draw_gives_each_kept_pair_its_weight(by_user: bool) -> None:
    b = Bucket("Shopping", 3, 30)
    for row, (user, text) in enumerate([("a", "x"), ("a", "y"), ("b", "x"), ("c", "z"), ("c", "z")]):
        h = Held(row, Event(user, text, None, None, None), user, text, pair_of(user, text), 0.0, None, (user,), True)
        b.add_user(h)
        b.add_query(h)
    q = b.queries
    b.open = [(q[0], "b"), (q[3], "a"), (q[3], "b"), (q[1], "c")]
    weight = {"a": 2, "b": 1, "c": 2}
    want = Counter({(q[0].qidx, "b"): 1, (q[3].qidx, "a"): 1, (q[3].qidx, "b"): 1, (q[1].qidx, "c"): 1})
    if not by_user:
        want = Counter({pair: weight[pair[1]] for pair in want})
    got: Counter[tuple[int, str]] = Counter()
    for pick in range(sum(want.values())):
        drawn = kept_draw(b, Scripted([pick, 0]), by_user)
        assert drawn is not None and drawn[2] == 0
        got[drawn[:2]] += 1
    assert got == want
    b.open = []
    assert kept_draw(b, Scripted([0, 0]), by_user) is None
