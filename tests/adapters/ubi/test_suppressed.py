"""A query a filter drops releases its events at once (dropped with it, counted by the filter's name), in a chain
with a buffer too: dropped before the buffer (``drop``, ``hipaa_scrub`` ``emptied: drop``), or let go by the buffer
and dropped by a later filter. A query the buffer holds keeps its events held; a query the buffer itself drops is
not identified (the buffer does not say which): its events stay held, counted ``buffer_drops_unidentified``."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.ubipipe import EVENTS, QUERIES, dead, feed, output, query_id, released_ok, run, write_config
from helpers.ubistream import ubi_stream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sidecar.config import load_config
from sidecar.joins import JoinBounds, Joins
from sidecar.pipeline import Pipeline

CHARGER = query_id(QUERIES[1])  # "usb c charger 65w": EVENTS[2] is its click


@pytest.fixture
def pipelines() -> Iterator[list[Pipeline]]:
    made: list[Pipeline] = []
    yield made
    for p in made:
        p.close()


def build(folder: Path, filters: str, made: list[Pipeline]) -> tuple[Pipeline, Joins, list[float]]:
    p = Pipeline(load_config(write_config(folder, filters)), seed=1)
    made.append(p)
    assert isinstance(p.joins, Joins)
    now = [1_000_000.0]
    p.joins.clock = lambda: now[0]
    return p, p.joins, now


def test_a_query_dropped_before_the_buffer_drops_its_click_in_the_same_batch(
    tmp_path: Path, pipelines: list[Pipeline]
) -> None:
    filters = "  - drop: {rules: [{role: query, matches: charger}]}\n  - category_buffer: {k: 5}\n"
    p, joins, now = build(tmp_path, filters, pipelines)
    feed(p, [*QUERIES, *EVENTS[:4]])  # one batch: the click arrives with its query
    assert output(tmp_path) == []  # three queries held by the buffer (k=5), one dropped
    assert joins.stats()["queries_dropped"] == {"drop": 1}
    assert joins.stats()["counts"]["dropped_with_query"] == 1
    assert joins.held() == 3  # the clicks of the held queries wait with them; the charger's is gone
    feed(p, [EVENTS[2]])  # a later click of the dropped query: dropped on arrival
    assert joins.stats()["counts"]["dropped_with_query"] == 2 and joins.held() == 3
    now[0] += JoinBounds().hold_seconds + 1
    p.release(False)
    assert dead(tmp_path) == [] and joins.held() == 3  # held queries' clicks stay held: no query_unknown


def test_a_query_the_buffer_lets_go_and_a_later_filter_drops_takes_its_clicks(
    tmp_path: Path, pipelines: list[Pipeline]
) -> None:
    filters = "  - category_buffer: {k: 2}\n  - drop: {rules: [{role: query, matches: charger}]}\n"
    p, joins, _ = build(tmp_path, filters, pipelines)
    fillers = [
        json.dumps({"query_id": f"f-{i}", "client_id": f"u-{i % 7}", "user_query": f"filler {i}", "timestamp": i})
        for i in range(40)
    ]
    feed(p, [*QUERIES, *EVENTS[:4], *fillers], batch=10)
    out = output(tmp_path)
    assert joins.stats()["queries_dropped"] == {"drop": 1}  # released by the buffer, then dropped
    assert not [r for r in out if r["query_id"] == CHARGER]
    assert joins.stats()["counts"]["dropped_with_query"] == 1
    released = {r["query_id"]: r["client_id"] for r in out if "user_query" in r}
    held_clicks = sum(1 for line in EVENTS[:4] if query_id(line) != CHARGER and query_id(line) not in released)
    assert joins.held() == held_clicks  # only clicks of queries the buffer still holds wait
    for r in out:
        if "action_name" in r:
            assert released[r["query_id"]] == r["client_id"]


def test_a_query_hipaa_scrub_empties_drops_its_click(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    filters = "  - hipaa_scrub: {emptied: drop}\n  - category_buffer: {k: 5}\n"
    p, joins, _ = build(tmp_path, filters, pipelines)
    query = {"query_id": "q-mail", "client_id": "c-1", "user_query": "jane.roe@example.com", "timestamp": "t"}
    click = {"action_name": "click", "query_id": "q-mail", "client_id": "c-1", "timestamp": "t2"}
    feed(p, [json.dumps(click), json.dumps(query), QUERIES[0], EVENTS[0]])
    assert joins.stats()["queries_dropped"] == {"hipaa_scrub": 1}
    assert joins.stats()["counts"]["dropped_with_query"] == 1
    assert joins.held() == 1 and output(tmp_path) == []  # the notebook query is held, and its click with it


def test_a_query_the_buffer_itself_drops_is_named_and_its_click_dropped(
    tmp_path: Path, pipelines: list[Pipeline]
) -> None:
    """category_buffer names what it suppresses (here: no category with ``unknown: drop``): the query's click is
    dropped in the same batch, the held queries' clicks stay held with them."""
    filters = "  - category_buffer: {k: 5, category_field: query_attributes.category, unknown: drop}\n"
    p, joins, _ = build(tmp_path, filters, pipelines)

    def query(qid: str, category: str | None) -> str:
        attributes = {"category": category} if category else {}
        return json.dumps({"query_id": qid, "client_id": "c", "user_query": qid, "query_attributes": attributes})

    clicks = [json.dumps({"action_name": "click", "query_id": q, "client_id": "c"}) for q in ("a", "b", "x")]
    feed(p, [query("a", "shop"), query("b", "shop"), query("x", None), *clicks])
    assert joins.stats()["queries_dropped"] == {"category_buffer": 1}
    assert joins.stats()["counts"]["dropped_with_query"] == 1
    assert joins.stats()["counts"].get("buffer_drops_unidentified", 0) == 0
    assert joins.held() == 2 and output(tmp_path) == []  # a's and b's clicks wait with their held queries


def test_max_k_suppressions_are_named(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    """A bucket at max_k that cannot release suppresses its heaviest sender's oldest queries (``max_k_policy:
    suppress``): they are named, their clicks dropped at once; no click is released."""
    filters = "  - category_buffer: {k: 2, max_k: 2, max_k_policy: suppress, min_users: 2}\n"
    p, joins, _ = build(tmp_path, filters, pipelines)
    queries = [
        json.dumps({"query_id": f"q{i}", "client_id": "solo", "user_query": f"cheap flights {i}"}) for i in range(4)
    ]
    clicks = [json.dumps({"action_name": "click", "query_id": f"q{i}", "client_id": "solo"}) for i in range(4)]
    feed(p, [*queries, *clicks])
    stats = joins.stats()
    suppressed = p.chain.filters[0].counts["suppressed_max_k"]
    assert suppressed > 0
    assert stats["queries_dropped"] == {"category_buffer": suppressed}
    assert stats["counts"]["dropped_with_query"] == suppressed
    assert stats["counts"].get("buffer_drops_unidentified", 0) == 0
    assert output(tmp_path) == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    batches=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    where=st.sampled_from(["before", "after"]),
)
def test_property_a_dropped_query_leaves_no_click_behind(seed: int, batches: list[int], where: str) -> None:
    """Random streams and batchings, a topic dropped before or after a buffer: no click of a dropped query is
    released or still held, no click leaves before or without its query, and every pending query is held by the
    buffer (it drops nothing of its own here)."""
    rule = "  - drop: {rules: [{role: query, matches: 'weather|pizza'}]}\n"
    chain = "  - drop: {rules: [{role: query, empty: true}]}\n  - category_buffer: {k: 2}\n"
    folder = Path(tempfile.mkdtemp(prefix="ubi-drop-"))
    try:
        stream = ubi_stream(seed, users=6, queries=40, early=0.2, empty=0.1, unknown=0)
        p = run(write_config(folder, rule + chain if where == "before" else chain + rule), stream.lines, batches)
        try:
            assert isinstance(p.joins, Joins)
            store = p.joins.store
            held_rows = store.conn.execute("SELECT key FROM join_held").fetchall()
            assert all(store.is_pending(key) for (key,) in held_rows)  # none waits for a query known dropped
            assert p.joins.stats()["pending_queries"] == p.chain.held()
        finally:
            p.close()
        lines = (folder / "out.ubi").read_text(encoding="utf-8").splitlines() if (folder / "out.ubi").exists() else []
        assert released_ok(lines).get("violations", 0) == 0
        dropped = {q for q, text in stream.query_text.items() if not text or "weather" in text or "pizza" in text}
        assert not {json.loads(x)["query_id"] for x in lines} & dropped
    finally:
        shutil.rmtree(folder, ignore_errors=True)
