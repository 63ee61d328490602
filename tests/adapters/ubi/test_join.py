"""UBI events follow their query through the runtime (the join stage, sidecar/joins.py): released with it under its
released user (pseudonymized, reassigned by category_buffer), dropped with it, held with it (across a restart),
dead-lettered when their query never comes; the clicked object goes through its field policy."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.ubipipe import feed, write_config

from sidecar.api import RecordBatch
from sidecar.config import load_config
from sidecar.joins import JoinBounds
from sidecar.pipeline import Pipeline
from sidecar.textcodecs import text_codec

FIXTURES = Path(__file__).parent / "fixtures"
QUERIES = (FIXTURES / "queries.jsonl").read_text(encoding="utf-8").splitlines()
EVENTS = (FIXTURES / "events.jsonl").read_text(encoding="utf-8").splitlines()
KEY = "k" * 32


def output(folder: Path) -> list[dict[str, object]]:
    out = folder / "out.ubi"
    return [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()] if out.exists() else []


def dead(folder: Path) -> list[str]:
    path = folder / "state" / "dead.jsonl"
    return [json.loads(x)["reason"] for x in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


@pytest.fixture
def open_pipeline(tmp_path: Path) -> Iterator[list[Pipeline]]:
    made: list[Pipeline] = []
    yield made
    for p in made:
        p.close()


def test_passthrough_releases_every_event_with_its_query_byte_for_byte(
    tmp_path: Path, open_pipeline: list[Pipeline]
) -> None:
    p = Pipeline(load_config(write_config(tmp_path, "")), seed=1)
    open_pipeline.append(p)
    lines = [EVENTS[2], *QUERIES, *EVENTS]  # a click before its query; one of a query never seen; one with no id
    feed(p, lines)
    written = (tmp_path / "out.ubi").read_text(encoding="utf-8").splitlines()
    assert sorted(written) == sorted([*QUERIES, *EVENTS[:4], EVENTS[2]])  # unchanged events: their own bytes
    assert written.index(EVENTS[2]) > written.index(QUERIES[1])  # the early click leaves after its query
    assert p.joins.held() == 1  # the click of the unknown query waits
    assert dead(tmp_path) == ["missing_query_id"]


def test_a_dropped_query_drops_its_events_then_and_later(tmp_path: Path, open_pipeline: list[Pipeline]) -> None:
    filters = "  - drop: {rules: [{role: query, matches: charger}]}\n"
    p = Pipeline(load_config(write_config(tmp_path, filters)), seed=1)
    open_pipeline.append(p)
    feed(p, [*QUERIES, *EVENTS[:4]])
    feed(p, [EVENTS[2]])  # arrives after the outcome is known
    out = output(tmp_path)
    qid = json.loads(QUERIES[1])["query_id"]
    assert [r for r in out if r["query_id"] == qid] == []
    assert p.joins.stats()["counts"]["dropped_with_query"] == 2
    assert p.joins.held() == 0


def test_pseudonymized_query_gives_its_events_the_same_pseudonym_and_policies_apply(
    tmp_path: Path, open_pipeline: list[Pipeline], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UBI_KEY", KEY)
    monkeypatch.setenv("UBI_FIELD_KEY", KEY)
    filters = "  - hipaa_scrub: {}\n  - pseudonymize: {key_env: UBI_KEY}\n"
    schema = (
        "  field_key_env: UBI_FIELD_KEY\n  fields:\n    session_id: hash\n"
        "    event_attributes.object.object_id: keep\n    event_attributes.object.description: scrub\n"
    )
    p = Pipeline(load_config(write_config(tmp_path, filters, schema)), seed=1)
    open_pipeline.append(p)
    feed(p, [*QUERIES, *EVENTS[:4]])
    out = output(tmp_path)
    users = {r["query_id"]: r["client_id"] for r in out if "user_query" in r}
    events = [r for r in out if "action_name" in r]
    assert len(events) == 4
    for r in events:
        assert r["client_id"] == users[r["query_id"]]
        assert not str(r["client_id"]).startswith("5e3b7c10")  # pseudonymized
        assert r["session_id"] != "sess-aaaa-0001"
    text = (tmp_path / "out.ubi").read_text(encoding="utf-8")
    assert "jane.roe@example.com" not in text  # the query's and the clicked object's
    assert "B0002" in text  # object_id kept by policy


def test_an_event_of_an_unknown_query_is_dead_lettered_after_the_hold(
    tmp_path: Path, open_pipeline: list[Pipeline]
) -> None:
    p = Pipeline(load_config(write_config(tmp_path, "")), seed=1)
    open_pipeline.append(p)
    now = [1000.0]
    p.joins.clock = lambda: now[0]  # type: ignore[union-attr]
    feed(p, [EVENTS[4]])
    p.release(False)
    assert p.joins.held() == 1 and dead(tmp_path) == []
    now[0] += JoinBounds().hold_seconds + 1
    p.release(False)
    assert p.joins.held() == 0 and dead(tmp_path) == ["query_unknown"]
    assert output(tmp_path) == []


def test_held_events_survive_a_restart_and_follow_their_query(tmp_path: Path) -> None:
    config = write_config(tmp_path, "")
    p = Pipeline(load_config(config), seed=1)
    receipt = p.receive(RecordBatch(EVENTS[:2], text_codec(p.config.sidecar.schema, None), "test"))
    assert (receipt.held, receipt.dropped) == (2, 0)  # the query is not there yet: held (durably), not dropped
    assert p.joins.held() == p.held() == 2
    p.close()
    p = Pipeline(load_config(config), seed=1)
    try:
        assert p.joins.held() == 2
        feed(p, [QUERIES[0]])
        out = output(tmp_path)
        assert [r.get("action_name") for r in out] == [None, "click", "add_to_cart"]
        assert p.joins.held() == 0
    finally:
        p.close()


def test_the_held_count_is_bounded(tmp_path: Path, open_pipeline: list[Pipeline]) -> None:
    p = Pipeline(load_config(write_config(tmp_path, "")), seed=1)
    open_pipeline.append(p)
    p.joins.bounds = JoinBounds(max_held=3)  # type: ignore[union-attr]
    lines = [json.dumps({"action_name": "click", "query_id": f"nope-{i}", "client_id": "c"}) for i in range(5)]
    feed(p, lines)
    p.release(False)
    assert p.joins.held() == 3 and dead(tmp_path) == ["query_unknown"] * 2
