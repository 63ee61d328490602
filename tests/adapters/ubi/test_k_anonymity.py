"""UBI through config/k-anonymity.yaml (format ubi): no click is released whose query was dropped or is still held,
and every released click carries its query's released (reassigned) user, after its query. A hypothesis property
checks the same invariant on random streams, batchings and restarts through a buffering chain."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from pathlib import Path

import pytest
from helpers.ubipipe import k_anonymity_config, released_ok, run
from helpers.ubistream import ubi_stream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st


def test_the_k_anonymity_chain_releases_clicks_only_with_their_query_and_its_user(tmp_path: Path) -> None:
    stream = ubi_stream(11, users=60, queries=1500)
    p = run(k_anonymity_config(tmp_path), stream.lines, [100, 37, 250], restart_at=5)
    try:
        stats = p.stats()
        joins = stats["joins"]
        held_queries = stats["events_held"]
    finally:
        p.close()
    lines = (tmp_path / "out.ubi").read_text(encoding="utf-8").splitlines()
    counts = released_ok(lines)
    assert counts["violations"] == 0
    assert counts["queries"] > 0 and counts["clicks"] > 0 and held_queries > 0 and joins["held"] > 0
    reassigned = sum(
        json.loads(x)["client_id"] != stream.query_client[json.loads(x)["query_id"]] for x in lines if "user_query" in x
    )
    assert reassigned > counts["queries"] // 2  # category_buffer gave most queries another user: clicks follow it
    assert "session_id" not in "".join(lines)
    times = {r["query_id"]: r["timestamp"] for r in map(json.loads, lines) if "user_query" in r}
    clicks = [r for r in map(json.loads, lines) if "action_name" in r]
    moved = [r for r in clicks if times[r["query_id"]] != stream.query_time[r["query_id"]]]
    assert moved and all(r["timestamp"] == times[r["query_id"]] for r in moved)  # time: release moved the query's
    kept = [r for r in clicks if times[r["query_id"]] == stream.query_time[r["query_id"]]]
    assert kept and all(r["timestamp"] > times[r["query_id"]] for r in kept)  # released at once: own times
    print(f"ubi k-anonymity: {dict(counts)} queries_held={held_queries} joins={joins} reassigned={reassigned}")


BUFFERED = "filters:\n  - drop: {rules: [{role: query, empty: true}]}\n  - category_buffer: {k: 2}\n"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 10_000),
    batches=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    restart_at=st.none() | st.integers(1, 6),
    early=st.floats(0, 0.5),
)
def test_property_no_click_leaves_before_or_without_its_query_or_under_another_user(
    seed: int, batches: list[int], restart_at: int | None, early: float
) -> None:
    folder = Path(tempfile.mkdtemp(prefix="ubi-prop-"))
    try:
        config = folder / "q.yaml"
        config.write_text(
            f"state_dir: state\nschema: {{format: ubi}}\n{BUFFERED}sinks:\n  - file: {{path: out.ubi}}\n",
            encoding="utf-8",
        )
        stream = ubi_stream(seed, users=6, queries=40, early=early, empty=0.1)
        head = stream.lines[: len(stream.lines) // 4]
        random.Random(seed).shuffle(head)  # the start out of order: clicks long before their query
        stream.lines[: len(head)] = head
        p = run(config, stream.lines, batches, restart_at)
        p.close()
        out = folder / "out.ubi"
        lines = out.read_text(encoding="utf-8").splitlines() if out.exists() else []
        assert released_ok(lines)["violations"] == 0
        released = {json.loads(x)["query_id"] for x in lines if "user_query" in x}
        assert not released & stream.empty_queries
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("broken", ["click_before_query", "other_user"])
def test_the_invariant_check_catches_a_leak(broken: str) -> None:
    query = {"query_id": "q", "client_id": "released", "user_query": "x"}
    click = {"query_id": "q", "client_id": "released" if broken == "click_before_query" else "orig", "action_name": "c"}
    lines = (
        [json.dumps(click), json.dumps(query)]
        if broken == "click_before_query"
        else [json.dumps(query), json.dumps(click)]
    )
    assert released_ok(lines)["violations"] == 1
