"""category_buffer: k is bounded (``max_k``) with a policy when reached; k per category is a metric (issue 24 #3)."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from filters.category_buffer import CategoryBufferConfig, CategoryBufferFilter
from filters.category_buffer.config import MAX_K_FACTOR
from filters.category_buffer.store import HELD, KS
from sidecar.api import BuildContext, ConfigValueError, Event
from sidecar.codecs import SchemaConfig
from sidecar.pipeline import codec_lookup
from sidecar.state import StateStore

CATEGORIES = ("Health", "Sports")


def make(tmp: Path, **options: object) -> CategoryBufferFilter:
    state = StateStore(tmp)
    ctx = BuildContext(config_dir=tmp, state=state, rng=random.Random(7), seed=7, codecs=codec_lookup(SchemaConfig()))
    return CategoryBufferFilter(CategoryBufferConfig(**options), ctx)  # options typed loosely


def ev(user: str, query: str, category: str) -> Event:
    e = Event(user, query, "t", "", "")
    e.annotate("category", category)
    return e


def dominated_round(r: int) -> list[Event]:
    """One pass of a small stream: in Health a bot sends 30 queries for every one of four other users (five
    distinct users: enough for min_users = k = 5, so only the bot's excess is stuck); Sports is balanced."""
    events = [ev("bot", f"bot query {r}-{i}", "Health") for i in range(30)]
    events += [ev(f"h{i}", f"health {r}-{i}", "Health") for i in range(4)]
    events += [ev(f"s{i}", f"sports {r}-{i}", "Sports") for i in range(16)]
    random.Random(r).shuffle(events)
    return events


def loop(f: CategoryBufferFilter, rounds: int, every: int = 1) -> tuple[int, int, int, list[Event]]:
    """Run ``rounds`` passes in batches of 50; returns the largest k, held count and state rows seen after any
    batch (rows checked every ``every`` rounds) and the released events."""
    conn = f.ctx.state.conn  # make() gives a StateStore
    top_k = top_held = top_rows = 0
    out: list[Event] = []
    for r in range(rounds):
        out += f.process(dominated_round(r))
        top_k = max(top_k, *f.stats()["k_per_category"].values())
        top_held = max(top_held, f.held())
        if r % every == 0:
            top_rows = max(top_rows, conn.execute(f"SELECT COUNT(*) FROM {HELD}").fetchone()[0])
    return top_k, top_held, top_rows, out


class TestBound:
    def test_looped_dominated_stream_keeps_k_held_and_rows_bounded(self, tmp_path: Path) -> None:
        """400 passes (20,000 events) of a stream a bot dominates: with the defaults (k=5, max_k null = 64 x k,
        max_k_policy suppress) k never passes 320, held events never pass max_k per category, the state
        database never more rows than two per held event; the bot's excess is suppressed and counted.
        (Without the bound, k reached 14,266 and held events 12,019 here, growing with every pass.)"""
        f = make(tmp_path / "bounded", k=5, avoid_repeat_pairs=1000)
        top_k, top_held, top_rows, out = loop(f, 400, every=10)
        max_k = MAX_K_FACTOR * 5
        assert top_k <= max_k
        assert top_held <= max_k * len(CATEGORIES)
        assert top_rows <= 2 * max_k * len(CATEGORIES)
        assert f.counts["suppressed_max_k"] > 0
        assert len(out) + f.held() + f.counts["suppressed_max_k"] == 400 * 50

    def test_hold_policy_bounds_k_but_keeps_holding(self, tmp_path: Path) -> None:
        """max_k_policy: hold stops k at max_k and keeps every event held (bounded only by max_held), counting
        the arrivals that found their bucket at max_k and unable to release."""
        f = make(tmp_path, k=5, max_k=12, max_k_policy="hold", avoid_repeat_pairs=1000)
        top_k, top_held, _, out = loop(f, 40)
        assert top_k == 12
        assert top_held > 12 * len(CATEGORIES)  # held grows past the bound: nothing suppressed
        assert f.counts["held_at_max_k"] > 0 and f.counts["suppressed_max_k"] == 0
        assert len(out) + f.held() == 40 * 50

    def test_hold_tries_again_only_after_growth(self, tmp_path: Path) -> None:
        """hold: a bucket at max_k that cannot release tries again only once it grew by delta (a try costs
        O(held)): 20,000 arrivals of one user make about log(20000/40)/log(1.2) = 35 tries, not 20,000; a
        diverse arrival after that is released once the bucket reaches its next try."""
        f = make(tmp_path, k=5, max_k=40, max_k_policy="hold")
        for i in range(0, 20_000, 500):
            f.process([ev("solo", f"q{i + j}", "Arts") for j in range(500)])
        assert f.held() == 20_000 and f.stats()["k_per_category"]["Arts"] == 40
        assert 20 <= f.counts["held_at_max_k"] <= 40
        out = f.process([ev(f"u{i}", f"other {i}", "Arts") for i in range(4_100)])
        assert out and all(o.user != "solo" or o.query.startswith("other") for o in out)

    def test_python_heap_stays_flat(self, tmp_path: Path) -> None:
        """The filter's Python memory after 100 passes and after 400 differs by well under a megabyte (without
        the bound it grew by 18 MB between passes 100 and 800, with the held events)."""
        import gc
        import tracemalloc

        f = make(tmp_path, k=5, max_k=40, avoid_repeat_pairs=1000)
        tracemalloc.start()
        try:
            marks = []
            for r in range(400):
                f.process(dominated_round(r))
                if r in (99, 399):
                    gc.collect()
                    marks.append(tracemalloc.get_traced_memory()[0])
        finally:
            tracemalloc.stop()
        assert marks[1] - marks[0] < 500_000

    def test_suppress_takes_the_dominant_users_events(self, tmp_path: Path) -> None:
        """What is suppressed at max_k comes from whoever holds the most in the bucket (the bot): nearly every
        suppressed query and user half is the bot's. Another user's half goes only when the bot's excess sits on
        the other side alone (the bucket's query and user sets stay the same size): e.g. ten held user halves all
        the bot's (min_users = 5 not met) and ten queries of the others."""
        f = make(tmp_path, k=5, max_k=10, avoid_repeat_pairs=1000)
        events = [e for r in range(20) for e in dominated_round(r)]
        out: list[Event] = []
        for i in range(0, len(events), 50):
            out += f.process(events[i : i + 50])
        suppressed = f.counts["suppressed_max_k"]
        assert suppressed > 0
        users_in = Counter((e.user, e.meta["category"]) for e in events)
        users_out = Counter((o.user, o.meta["category"]) for o in out)
        left = users_in - users_out - f.held_users()
        assert left.total() == suppressed and left[("bot", "Health")] >= 0.9 * suppressed
        queries_in = Counter(e.query for e in events)
        held_q = Counter(h.event.query for b in f.buckets.values() for h in b.queries)
        gone = queries_in - Counter(o.query for o in out) - held_q
        assert gone.total() == suppressed
        assert sum(n for q, n in gone.items() if q.startswith("bot query")) >= 0.9 * suppressed

    def test_no_release_ever_draws_from_fewer_than_base_k(self, tmp_path: Path) -> None:
        """The bound changes when a stuck bucket gives up, not what a release needs: a bucket of one user
        alone, at max_k, releases nothing (suppress drops, hold keeps)."""
        for policy in ("suppress", "hold"):
            f = make(tmp_path / policy, k=3, max_k=6, max_k_policy=policy)
            out = f.process([ev("solo", f"q{i}", "Arts") for i in range(50)])
            assert out == [] and f.stats()["k_per_category"]["Arts"] == 6
            assert f.held() == (5 if policy == "suppress" else 50)

    def test_a_stored_k_above_max_k_is_capped_on_restart(self, tmp_path: Path) -> None:
        """A k inflated by an earlier version (stored in the state) comes back capped at max_k, and the first
        stuck arrival then suppresses that bucket's backlog down to below max_k."""
        f = make(tmp_path, k=5, max_k_policy="hold", max_k=10**6)
        f.process([ev("solo", f"q{i}", "Arts") for i in range(300)])
        assert f.stats()["k_per_category"]["Arts"] >= 290
        f.ctx.state.close()  # make() gives a StateStore
        g = make(tmp_path, k=5, max_k=40)
        assert g.stats()["k_per_category"]["Arts"] == 40
        g.process([ev("solo", "one more", "Arts")])
        assert g.held() == 39 and g.counts["suppressed_max_k"] == 262
        conn = g.ctx.state.conn  # make() gives a StateStore
        assert conn.execute(f"SELECT k FROM {KS} WHERE bucket = 'Arts'").fetchone()[0] == 40
        assert conn.execute(f"SELECT COUNT(*) FROM {HELD}").fetchone()[0] == 39


class TestConfig:
    @pytest.mark.parametrize(
        ("options", "key"),
        [
            ({"k": 5, "max_k": 4}, "max_k"),
            ({"k": 5, "k_per_category": {"Health": 20}, "max_k": 10}, "max_k"),
            ({"k": 5, "min_users": 12, "max_k": 10}, "min_users"),
            ({"k": 2, "min_users": 200}, "min_users"),  # max_k null: 64 x 2 = 128
        ],
    )
    def test_max_k_below_what_a_bucket_needs_is_an_error(self, options: dict[str, object], key: str) -> None:
        """max_k must be at least every base k and min_users (else a bucket could never release)."""
        with pytest.raises(ConfigValueError) as err:
            CategoryBufferConfig(**options)  # options typed loosely
        assert err.value.key == key


def test_k_per_category_is_a_metric(tmp_path: Path) -> None:
    """/metrics carries querylog_category_buffer_k{category=...}: the current k of each bucket (category names
    are taxonomy labels of the config, never a value of a record)."""
    from prometheus_client import CollectorRegistry, generate_latest

    from sidecar.metrics import PipelineCollector

    f = make(tmp_path, k=5)
    f.process([ev("solo", f"secret {i}", "Health") for i in range(5)] + [ev("u1", "secret x", "Sports")])
    stats = {
        "events_in": 7,
        "events_out": 0,
        "events_dropped": 0,
        "events_dead_lettered": 0,
        "events_held": f.held(),
        "dead_letters": {},
        "filters": [
            {"name": f.NAME, "events_in": 7, "events_out": 0, "held": f.held(), "counts": dict(f.counts), **f.stats()}
        ],
    }
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(lambda: stats))
    body = generate_latest(registry).decode()
    assert 'querylog_category_buffer_k{category="Health"} 6.0' in body
    assert 'querylog_category_buffer_k{category="Sports"} 5.0' in body
    assert "secret" not in body and "solo" not in body
