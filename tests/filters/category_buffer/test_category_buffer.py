"""category_buffer: paper 001 Algorithm 2, pair safety, k growth and decay, durability, policies."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filters.category_buffer import CategoryBufferConfig, CategoryBufferFilter
from filters.category_buffer.pairs import normalise_text
from sidecar.api import BuildContext, Event, compiled
from sidecar.codecs import JsonlCodec, RolesConfig, SchemaConfig, TsvCodec
from sidecar.pipeline import codec_lookup
from sidecar.state import StateStore


class FakeClock:
    """Wall-clock seconds that move only when a test advances them."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def make(tmp: Path, seed: int = 1, clock: Callable[[], float] | None = None, **options: object) -> CategoryBufferFilter:
    """The filter on a state store in ``tmp``, built as a pipeline builds it (its codec lookup; a seeded RNG)."""
    state = StateStore(tmp)
    ctx = BuildContext(
        config_dir=tmp, state=state, rng=random.Random(seed), seed=seed, codecs=codec_lookup(SchemaConfig())
    )
    if clock is not None:
        ctx.clock = clock
    return CategoryBufferFilter(CategoryBufferConfig(**options), ctx)  # options typed loosely


def ev(user: str, query: str, category: str | None, time: str = "t") -> Event:
    e = Event(user, query, time, "", "")
    if category is not None:
        e.annotate("category", category)
    return e


def stream(n: int, users: int, cats: int, seed: int) -> list[Event]:
    rng = random.Random(seed)
    return [
        ev(f"u{rng.randrange(users)}", f"q{rng.randrange(10 * n)}", f"C{rng.randrange(cats)}", f"{i:06d}")
        for i in range(n)
    ]


def run(f: CategoryBufferFilter, events: list[Event], batch: int = 50) -> list[Event]:
    out: list[Event] = []
    for i in range(0, len(events), batch):
        out += f.process(events[i : i + batch])
    return out


class TestAlgorithm2:
    def test_nothing_leaves_below_k(self, tmp_path: Path) -> None:
        """Four events of four users in one category, k=5: all held, none released early (also not on final flush)."""
        f = make(tmp_path, k=5)
        assert f.process([ev(f"u{i}", f"q{i}", "Sports") for i in range(4)]) == []
        assert f.held() == 4
        assert f.flush(final=True) == []
        assert f.held() == 4

    def test_kth_event_releases_one_repaired(self, tmp_path: Path) -> None:
        """The k-th arrival releases exactly one event: a held user with another user's held query."""
        f = make(tmp_path, k=5)
        events = [ev(f"u{i}", f"q{i}", "Sports") for i in range(5)]
        owner = {e.query: e.user for e in events}
        out = f.process(events)
        assert len(out) == 1 and f.held() == 4
        assert out[0].query in owner and out[0].user != owner[out[0].query]
        assert out[0].meta and out[0].meta["category"] == "Sports"

    def test_categories_do_not_mix(self, tmp_path: Path) -> None:
        """A query is only ever paired with a user of its own category bucket."""
        f = make(tmp_path, k=3)
        events = stream(3000, 40, 4, seed=3)
        users_by_cat: dict[str, set[str]] = {}
        for e in events:
            users_by_cat.setdefault(e.meta["category"], set()).add(e.user)
        for o in run(f, events):
            assert o.user in users_by_cat[o.meta["category"]]

    @settings(max_examples=30, deadline=None)
    @given(
        st.lists(st.tuples(st.integers(0, 6), st.integers(0, 8), st.integers(0, 2)), min_size=1, max_size=120),
        st.integers(2, 6),
    )
    def test_never_an_original_pair_and_nothing_lost(self, rows: list[tuple[int, int, int]], k: int) -> None:
        """Property: no output (user, query) was ever sent by that user before it left; users and queries are
        conserved per category (released + held = input), so every user keeps their category counts."""
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            f = make(Path(tmp), k=k)
            events = [ev(f"u{u}", f"query {q}", f"C{c}") for u, q, c in rows]
            seen: set[tuple[str, str]] = set()
            out: list[Event] = []
            for i in range(0, len(events), 7):
                for e in events[i : i + 7]:
                    seen.add((e.user, normalise_text(e.query)))
                got = f.process(events[i : i + 7])
                for o in got:
                    assert (o.user, normalise_text(o.query)) not in seen
                out += got
            users_in = Counter((e.user, e.meta["category"]) for e in events)
            users_out = Counter((o.user, o.meta["category"]) for o in out)
            assert users_out + f.held_users() == users_in
            queries_in = Counter((e.query, e.meta["category"]) for e in events)
            held_q = Counter((h.event.query, b.name) for b in f.buckets.values() for h in b.queries)
            assert Counter((o.query, o.meta["category"]) for o in out) + held_q == queries_in
            assert len(out) + f.held() == len(events)

    def test_same_text_from_another_user_is_not_given_to_a_user_who_sent_it(self, tmp_path: Path) -> None:
        """A user who searched "weather" never receives someone else's "Weather" (the matcher would count it)."""
        f = make(tmp_path, k=2)
        out = f.process([ev("a", "weather", "News"), ev("b", "Weather ", "News")])
        assert out == [] and f.counts["k_raised"] == 1
        out = f.process([ev("c", "news today", "News")])
        assert out and all(not (o.user in "ab" and normalise_text(o.query) == "weather") for o in out)


class Interpreted(CategoryBufferFilter):
    """The filter with its core (filters/category_buffer/core.py) loaded from the source, whatever build runs."""

    CORE = compiled.source(CategoryBufferFilter.CORE)


@pytest.mark.skipif(
    not compiled.is_compiled(CategoryBufferFilter.CORE), reason="core.py has no current compiled build here"
)
class TestCompiledCore:
    @pytest.mark.parametrize(
        ("options", "batch", "prescan"),
        [
            ({"k": 3}, 37, False),
            ({"k": 5, "avoid_repeat_pairs": 10}, 37, False),
            ({"k": 3, "avoid_repeat_pairs": 40}, 3, False),
            ({"k": 4, "min_users": 2, "delta": 1.5}, 37, False),
            ({"k": 3, "user_draw": "slot"}, 37, False),
            ({"k": 3, "unknown": "drop"}, 37, False),
            ({"k": 3, "max_k": 6}, 37, True),
            ({"k": 3, "user_draw": "slot", "max_k": 9}, 37, True),
        ],
    )
    def test_the_compiled_core_releases_what_its_source_releases(
        self, tmp_path: Path, options: dict[str, object], batch: int, prescan: bool
    ) -> None:
        """With the same random words, the core as imported (compiled when built from its current source) and
        its source release exactly the same (same pairs, same order, same held halves, k and counts), also
        through rejections, exact draws, k growth and decay, the rotation of the recent-pairs memory,
        uncategorised events and, after a first pass, kept pairs and max_k suppressions."""
        rng = random.Random(11)
        events = [
            ev(
                f"u{rng.randrange(6)}",
                f"text {rng.randrange(12)}",
                rng.choice(["C0", "C1", "C2", "unknown", None]),
                f"{i:05d}",
            )
            for i in range(1500)
        ]
        events += [ev("solo", f"flood {i}", "C0") for i in range(20)] + events[:200]
        results = []
        for cls, sub in ((CategoryBufferFilter, "as-imported"), (Interpreted, "source")):
            state = StateStore(tmp_path / sub)
            ctx = BuildContext(config_dir=tmp_path, state=state, rng=random.Random(5), seed=5)
            f = cls(CategoryBufferConfig(**options), ctx)  # options typed loosely
            fresh = [ev(e.user, e.query, e.meta.get("category"), e.time) for e in events]
            if prescan:
                f.prescan([fresh])
            out = [(o.user, o.query, o.time, o.meta.get("category")) for o in run(f, fresh, batch=batch)]
            results.append((out, f.held_users(), f.stats(), dict(f.counts)))
        assert results[0] == results[1]
        assert results[0][3]["k_raised"] > 0 and results[0][0]


class TestKGrowth:
    def test_one_user_raises_k_by_delta_ceil(self, tmp_path: Path) -> None:
        """Paper 001: when every user in the bucket is the same, k <- k*delta (ceil: 5 -> 6 -> 8 -> 10)."""
        f = make(tmp_path, k=5, delta=1.2)
        ks = []
        for i in range(10):
            assert f.process([ev("solo", f"q{i}", "Health")]) == []
            ks.append(f.stats()["k_per_category"]["Health"])
        assert ks == [5, 5, 5, 5, 6, 8, 8, 10, 10, 12]
        assert f.held() == 10

    def test_k_decays_back_to_base_after_diversity(self, tmp_path: Path) -> None:
        """With decay, releases step an inflated k back to its base; each release still draws from >= k held."""
        f = make(tmp_path, k=3, delta=2.0)
        f.process([ev("solo", f"q{i}", "Arts") for i in range(6)])
        assert f.stats()["k_per_category"]["Arts"] > 3
        f.process([ev(f"o{i}", f"other {i}", "Arts") for i in range(60)])
        assert f.stats()["k_per_category"]["Arts"] == 3
        assert ("solo", "Arts") not in f.held_users()

    def test_no_decay_keeps_paper_behaviour(self, tmp_path: Path) -> None:
        """decay: false: an inflated k never comes back down, whatever is released afterwards (paper 001)."""
        f = make(tmp_path, k=3, delta=2.0, decay=False)
        f.process([ev("solo", f"q{i}", "Arts") for i in range(6)])
        raised = f.stats()["k_per_category"]["Arts"]
        f.process([ev(f"o{i}", f"other {i}", "Arts") for i in range(60)])
        assert f.stats()["k_per_category"]["Arts"] >= raised > 3

    def test_per_category_k(self, tmp_path: Path) -> None:
        """k_per_category sets the base k of the named bucket; other buckets keep k."""
        f = make(tmp_path, k=2, k_per_category={"Health": 4})
        assert len(f.process([ev("a", "x", "Arts"), ev("b", "y", "Arts")])) == 1
        assert f.process([ev(f"u{i}", f"h{i}", "Health") for i in range(3)]) == []
        assert f.stats()["k_per_category"]["Health"] == 4


class TestRolesTimeUnknown:
    def test_time_release_query_user(self, tmp_path: Path) -> None:
        """time: release writes the triggering arrival's time, query the query's time, user the user's time."""
        events = [ev(f"u{i}", f"q{i}", "Sports", time=f"T{i}") for i in range(5)]
        checks: tuple[tuple[str, Callable[[Event, str, str], bool]], ...] = (
            ("release", lambda o, q_time, u_time: o.time == "T4"),
            ("query", lambda o, q_time, u_time: o.time == q_time),
            ("user", lambda o, q_time, u_time: o.time == u_time),
        )
        for mode, check in checks:
            f = make(tmp_path / mode, k=5, time=mode)
            fresh = [ev(e.user, e.query, "Sports", e.time) for e in events]
            qtime = {e.query: e.time for e in fresh}
            utime = {e.user: e.time for e in fresh}
            (o,) = f.process(fresh)
            assert check(o, qtime[o.query], utime[o.user]), mode

    def test_unknown_bucket_and_drop(self, tmp_path: Path) -> None:
        """Uncategorised events are re-paired among themselves (`unknown` bucket) or dropped and counted."""
        f = make(tmp_path / "b", k=2)
        out = f.process([ev("a", "xq", None), ev("b", "yq", "unknown")])
        assert len(out) == 1 and f.stats()["held_per_category"] == {"unknown": 1}
        g = make(tmp_path / "d", k=2, unknown="drop")
        assert g.process([ev("a", "xq", None), ev("b", "yq", None)]) == []
        assert g.held() == 0 and g.counts["dropped_unknown"] == 2

    def test_empty_queries_are_held_in_unknown_and_never_pass_through(self, tmp_path: Path) -> None:
        """Empty and blank queries (no category) are held in the `unknown` bucket and released re-paired like any
        uncategorised query, never with their sender, and never given to a user who sent an empty query too (same
        text); they survive a restart; with unknown: drop they are dropped and counted."""
        path = tmp_path / "b"
        f = make(path, k=3)
        # the rank travels with the query: it tells which event a released query is
        events = [Event(f"u{i}", q, "t", str(i), "") for i, q in enumerate(["", "  ", "", "zq", "", " "])]
        out = f.process(events)
        assert out and f.held() + len(out) == 6
        assert set(f.stats()["held_per_category"]) <= {"unknown"}
        empty_senders = {e.user for e in events if not e.query.strip()}
        sender = {e.rank: e.user for e in events}
        for o in out:
            assert o.user != sender[o.rank]
            if not o.query.strip():
                assert o.user not in empty_senders, "a user who sent an empty query is not given one"
        held = f.held()
        f.ctx.state.close()  # make() gives a StateStore
        assert make(path, k=3).held() == held  # restored from the state store
        g = make(tmp_path / "d", k=2, unknown="drop")
        assert g.process([ev("a", "", None), ev("b", "  ", None)]) == []
        assert g.counts["dropped_unknown"] == 2

    def test_user_fields_travel_with_the_user_in_json(self, tmp_path: Path) -> None:
        """A JSON `ip` key configured as a user field stays with its user; url stays with its query."""
        codec = JsonlCodec(SchemaConfig(roles=_roles()))
        lines = [
            json.dumps(
                {
                    "uid": f"u{i}",
                    "q": f"query {i}",
                    "ip": f"10.0.0.{i}",
                    "url": f"http://s{i}.com",
                    "category": "Shopping",
                }
            )
            for i in range(3)
        ]
        events = [codec.decode(line, "\n") for line in lines]
        f = make(tmp_path, k=3, user_fields=("ip",), category_field="category", time="query")
        (o,) = f.process(events)
        rec = json.loads(codec.encode(o))
        i_user, i_query = int(rec["uid"][1:]), int(rec["q"].split()[1])
        assert i_user != i_query
        assert rec["ip"] == f"10.0.0.{i_user}" and rec["url"] == f"http://s{i_query}.com"

    def test_tsv_output_keeps_schema(self, tmp_path: Path) -> None:
        """The released record is the query's own row with the user column swapped, in the same columns."""
        codec = TsvCodec(SchemaConfig())
        codec.accept_header("AnonID\tQuery\tQueryTime\tItemRank\tClickURL")
        rows = [f"{100 + i}\tquery {i}\t2006-03-0{i + 1} 10:00:00\t{i + 1}\thttp://r{i}.com" for i in range(3)]
        events = [codec.decode(r, "\n") for r in rows]
        for e in events:
            e.annotate("category", "Arts")
        f = make(tmp_path, k=3, time="query")
        (o,) = f.process(events)
        cols = codec.encode(o).split("\t")
        qi = int(cols[1].split()[1])
        assert cols[2:] == rows[qi].split("\t")[2:] and cols[0] != rows[qi].split("\t")[0]

    @pytest.mark.parametrize("time", ["release", "query"])
    def test_a_released_event_shares_nothing_with_a_held_one(self, tmp_path: Path, time: str) -> None:
        """The output the core makes (only the user id travels, the event has its codec): the query's record, raw
        line, codec and annotations with the drawn user and the time rule, in an event of its own (the runtime
        tells a request's own events from released ones by identity) to which the annotations move (the user half
        left held needs its user, not them): no input event is the output or shares its meta dict, so annotating
        the output changes nothing held (a held event is written to the state store as it came)."""
        codec = TsvCodec(SchemaConfig())
        codec.accept_header("AnonID\tQuery\tQueryTime\tItemRank\tClickURL")
        rows = [f"{100 + i}\tquery {i}\t2006-03-0{i + 1} 10:00:00\t{i + 1}\thttp://r{i}.com" for i in range(9)]
        events = [codec.decode(r, "\n") for r in rows]
        for e in events:
            e.annotate("category", "Arts")
        came = {e.query: (e.user, e.time, e.record, e.raw, e.rank, e.url) for e in events}
        f = make(tmp_path, k=3, time=time)
        out = f.process(events)
        assert out
        queries = [h.event for b in f.buckets.values() for h in b.queries]
        users = [h.event for b in f.buckets.values() for hs in b.by_name.values() for h in hs]
        held = queries + users
        assert queries and any(e not in queries for e in users)  # a user half held after its query half left
        for o in out:
            user, t, record, raw, rank, url = came[o.query]
            assert all(o is not e and o.meta is not e.meta for e in events)
            assert o.meta == {"category": "Arts"} and (o.record, o.raw, o.codec, o.eol) == (record, raw, codec, "\n")
            assert (o.rank, o.url) == (rank, url)
            assert o.user != user and o.user in {u for u, *_ in came.values()}
            # release: the time of the arrival that released it (at or after the query's own)
            assert o.time == t if time == "query" else t <= o.time
            o.annotate("profile", "x")
        for e in held:
            assert (e.user, e.time) == came[e.query][:2] and dict(e.meta) in ({"category": "Arts"}, {})
        assert all(dict(e.meta) == {"category": "Arts"} for e in queries)


def _roles() -> RolesConfig:

    return RolesConfig(user="uid", query="q", time=None, rank=None, url="url")


class TestDurability:
    def test_restart_restores_held_events_and_k(self, tmp_path: Path) -> None:
        """Held halves, their buckets and raised k survive close/reopen; released ones are gone from SQLite."""
        f = make(tmp_path, k=4)
        events = stream(500, 9, 3, seed=5) + [ev("solo", f"s{i}", "Solo") for i in range(6)]
        out1 = run(f, events)
        before = (f.held(), f.held_users(), f.stats())
        f.ctx.state.close()  # make() gives a StateStore
        g = make(tmp_path, k=4)
        assert (g.held(), g.held_users(), g.stats()) == before
        conn = g.ctx.state.conn  # make() gives a StateStore
        rows = conn.execute("SELECT COUNT(*) FROM category_buffer_held").fetchone()[0]
        assert rows >= g.held()
        more = stream(300, 9, 3, seed=6)
        out2 = run(g, more)
        assert len(out1) + len(out2) + g.held() == len(events) + len(more)

    def test_restored_tsv_event_encodes_like_the_original(self, tmp_path: Path) -> None:
        """A TSV event held across a restart is written back in its original columns once released."""
        codec = TsvCodec(SchemaConfig())
        codec.accept_header("AnonID\tQuery\tQueryTime\tItemRank\tClickURL")
        rows = [f"{100 + i}\tquery {i}\t2006-03-01 10:00:0{i}\t\t" for i in range(2)]
        f = make(tmp_path, k=3, time="query")
        held = [codec.decode(r, "\n") for r in rows]
        for e in held:
            e.annotate("category", "Arts")
        assert f.process(held) == []
        f.ctx.state.close()  # make() gives a StateStore
        g = make(tmp_path, k=3, time="query")
        late = codec.decode("200\tquery late\t2006-03-02 10:00:00\t\t", "\n")
        late.annotate("category", "Arts")
        (o,) = g.process([late])
        line = codec.encode(o)
        originals = {r.split("\t")[1]: r for r in [*rows, "200\tquery late\t2006-03-02 10:00:00\t\t"]}
        assert line.split("\t")[1:] == originals[o.query].split("\t")[1:]

    def test_released_rows_are_deleted_in_the_same_commit(self, tmp_path: Path) -> None:
        """After each batch the stored halves are exactly the held ones: no row with both halves released."""
        f = make(tmp_path, k=2)
        run(f, stream(400, 20, 2, seed=7))
        conn = f.ctx.state.conn  # make() gives a StateStore
        user_halves = conn.execute("SELECT COUNT(*) FROM category_buffer_held WHERE user_bucket IS NOT NULL")
        query_halves = conn.execute("SELECT COUNT(*) FROM category_buffer_held WHERE query_bucket IS NOT NULL")
        assert user_halves.fetchone()[0] == query_halves.fetchone()[0] == f.held()
        assert (
            conn.execute(
                "SELECT COUNT(*) FROM category_buffer_held WHERE user_bucket IS NULL AND query_bucket IS NULL"
            ).fetchone()[0]
            == 0
        )


class TestPolicies:
    def test_suppress_after_max_hold(self, tmp_path: Path) -> None:
        """max_hold: suppress drops (and counts) events held longer than max_hold_seconds of wall clock."""
        clock = FakeClock()
        f = make(tmp_path, clock=clock, k=5, max_hold="suppress", max_hold_seconds=60)
        f.process([ev("a", "x", "Arts"), ev("b", "y", "Arts")])
        clock.now += 61
        assert f.flush(final=False) == []
        assert f.held() == 0 and f.counts["suppressed_max_hold"] == 2

    def test_merge_moves_overdue_bucket_to_root(self, tmp_path: Path) -> None:
        """Two overdue small buckets merge into the root bucket, which then reaches k and releases."""
        clock = FakeClock()
        f = make(tmp_path, clock=clock, k=3, max_hold="merge", max_hold_seconds=60)
        f.process([ev("a", "x", "Arts"), ev("b", "y", "Arts"), ev("c", "z", "Home")])
        clock.now += 61
        out = f.flush(final=False)
        assert len(out) == 1 and f.counts["merged"] == 3
        assert f.stats()["held_per_category"] == {"*": 2}

    def test_hold_never_releases_early(self, tmp_path: Path) -> None:
        """max_hold: hold (default) keeps a bucket below k held however long it waits."""
        clock = FakeClock()
        f = make(tmp_path, clock=clock, k=5)
        f.process([ev("a", "x", "Arts")])
        clock.now += 10**7
        assert f.flush(final=False) == [] and f.held() == 1

    def test_max_held_bounds_a_single_user_flood(self, tmp_path: Path) -> None:
        """One user alone in a bucket inflates k; max_held caps what is held (oldest suppressed, counted).
        (max_k_policy: hold, so that max_held, not max_k, is what bounds it here.)"""
        f = make(tmp_path, k=2, max_held=50, max_k_policy="hold", max_k=10**6)
        run(f, [ev("bot", f"spam {i}", "Computers") for i in range(400)])
        assert f.held() <= 50 and f.counts["suppressed_overflow"] >= 350


def test_grpc_events_keep_their_message_across_a_restart(tmp_path: Path) -> None:
    """Held gRPC events come back after a restart with their seq and attributes, encoded by any ProtoCodec."""
    from adapters.grpc.codec import ProtoCodec, QueryEvent

    def proto_events(codec: ProtoCodec, start: int, n: int) -> list[Event]:
        msgs = [
            QueryEvent(
                user=f"u{i}",
                query=f"q{i}",
                time=f"t{i}",
                seq=1000 + i,
                attributes={"session": f"s{i}", "ip": f"10.0.0.{i}"},
            )
            for i in range(start, start + n)
        ]
        events = codec.decode_batch(msgs)
        for e in events:
            e.annotate("category", "Sports")
        return list(events)

    first = make(tmp_path, k=5)
    assert first.process(proto_events(ProtoCodec(), 0, 4)) == []
    first.close()
    first.ctx.state.close()  # make() gives a StateStore
    second = make(tmp_path, k=5)
    assert second.held() == 4
    out = second.process(proto_events(ProtoCodec(), 4, 6))
    assert len(out) >= 1
    server_codec = ProtoCodec()  # the serving process's own instance
    for m in server_codec.encode_batch(out):
        i = m.seq - 1000
        assert m.query == f"q{i}"  # the query side travels with its message
        assert dict(m.attributes) == {"session": f"s{i}", "ip": f"10.0.0.{i}"}
        assert m.user != f"u{i}"
    assert second.counts["record_not_kept"] == 0
