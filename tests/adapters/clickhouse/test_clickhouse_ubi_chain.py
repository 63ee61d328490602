"""Protected UBI streams into the ``clickhouse`` sink, against the session's real ClickHouse 18.16: a generated
stream and one built from the real AOL excerpt's queries and clicks (skipped when the shared data is absent)
through config/k-anonymity.yaml, checked by a join in ClickHouse (every event under its query's released
client_id); and random query records read back as themselves (hypothesis)."""

from __future__ import annotations

import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers.clickhouse import ClickHouse
from helpers.ubi_aol import AOL, aol_ubi
from helpers.ubipipe import feed, k_anonymity_config, run, write_config
from helpers.ubistream import ubi_stream
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.clickhouse.ubi import QUERY_COLUMNS
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

from .ubitables import drain, records, split, with_clickhouse


def k_anonymity_into(
    clickhouse: ClickHouse, database: str, folder: Path, lines: list[str], fields: Any, batches: list[int]
) -> None:
    """``lines`` through config/k-anonymity.yaml (format ubi, ``fields``) into its file sink and the clickhouse
    sink, in ``batches`` (released after each, restarted once), drained and closed."""
    config = k_anonymity_config(folder, fields)
    doc = yaml.safe_load(config.read_text(encoding="utf-8"))
    doc["sinks"].append(
        {
            "clickhouse": {
                "url": clickhouse.url,
                "table": f"{database}.ubi_queries",
                "events_table": "ubi_events",
                "create_table": True,
            }
        }
    )
    config.write_text(yaml.safe_dump(doc), encoding="utf-8")
    pipe = run(config, lines, batches, restart_at=3)
    try:
        drain(pipe, 120)
    finally:
        pipe.close()


def event_users(clickhouse: ClickHouse, database: str) -> dict[str, int]:
    """The events, and those whose query is not in the query table or has another client_id there."""
    q, ev = f"{database}.ubi_queries", f"{database}.ubi_events"
    (joined,) = clickhouse.rows(
        f"SELECT count() AS n, countIf(released = '' OR released != client_id) AS wrong FROM {ev} "
        f"ANY LEFT JOIN (SELECT query_id, client_id AS released FROM {q}) USING query_id"
    )
    return joined


def test_the_k_anonymity_chain_into_clickhouse(clickhouse: ClickHouse, database: str, tmp_path: Path) -> None:
    """A generated stream through config/k-anonymity.yaml (format ubi; session dropped, descriptions scrubbed):
    the tables hold what the file sink released; joined in ClickHouse, every event has its query, under the
    query's released (reassigned) client_id; no e-mail address and no session is left."""
    stream = ubi_stream(11, users=60, queries=600)
    fields = {"session_id": "drop", "event_attributes.object.description": "scrub"}
    k_anonymity_into(clickhouse, database, tmp_path, stream.lines, fields, [100, 37, 250])
    released = (tmp_path / "out.ubi").read_text(encoding="utf-8").splitlines()
    queries, events = split(released)
    assert len(queries) > 100 and len(events) > 100
    q, ev = f"{database}.ubi_queries", f"{database}.ubi_events"
    assert records(clickhouse, q) == queries
    assert records(clickhouse, ev) == events
    assert event_users(clickhouse, database) == {"n": len(events), "wrong": 0}
    reassigned = sum(json.loads(x)["client_id"] != stream.query_client[json.loads(x)["query_id"]] for x in queries)
    assert reassigned > len(queries) // 2
    assert clickhouse.rows(f"SELECT countIf(session_id IS NOT NULL) AS s FROM {ev}") == [{"s": 0}]
    text = clickhouse.query(f"SELECT user_query FROM {q}") + clickhouse.query(f"SELECT event_attributes FROM {ev}")
    assert "@example.com" not in text and any("@example.com" in x for x in stream.lines)


@pytest.mark.skipif(not AOL.is_file(), reason="shared data absent")
def test_real_queries_and_clicks_through_the_k_anonymity_chain(
    clickhouse: ClickHouse, database: str, tmp_path: Path
) -> None:
    """UBI records built from the real AOL excerpt's queries and clicks (data the sink was not written from)
    through the same chain: the tables hold what the file sink released (a list the record did not have reads
    back as []), and no event is in ClickHouse without its query or under another client_id. Counts printed."""
    stream = aol_ubi()
    k_anonymity_into(clickhouse, database, tmp_path, stream.lines, {}, [1000])
    released = (tmp_path / "out.ubi").read_text(encoding="utf-8").splitlines()
    queries, events = split(released)
    stored = records(clickhouse, f"{database}.ubi_queries", empty_lists=False)
    assert stored == queries and records(clickhouse, f"{database}.ubi_events") == events
    users = event_users(clickhouse, database)
    print(f"ubi into clickhouse, AOL-derived: queries={len(queries)} events={users['n']} wrong_user={users['wrong']}")
    assert users == {"n": len(events), "wrong": 0} and len(events) > 1000


_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | _TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TEXT, inner, max_size=3),
    max_leaves=6,
)
_OPTIONAL = {
    "timestamp": _TEXT,
    "query_attributes": st.dictionaries(_TEXT, _JSON_VALUES, max_size=3),
    "query_response_id": _TEXT,
}


@st.composite
def ubi_queries(draw: st.DrawFn) -> list[dict[str, Any]]:
    """Query records of any text (quotes, control and non-ASCII characters), optional keys left out at random,
    open-ended attributes; hit ids a non-empty list when present (an empty one reads back as a left-out one)."""
    out = []
    for n in range(draw(st.integers(1, 5))):
        record: dict[str, Any] = {"query_id": f"q{n}", "client_id": draw(_TEXT), "user_query": draw(_TEXT)}
        for key, values in _OPTIONAL.items():
            if draw(st.booleans()):
                record[key] = draw(values)
        if draw(st.booleans()):
            record["query_response_hit_ids"] = draw(st.lists(_TEXT, min_size=1, max_size=4))
        out.append(record)
    return out


_rounds = itertools.count(1)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(queries=ubi_queries())
def test_property_any_query_record_reads_back_as_itself(clickhouse: ClickHouse, queries: list[dict[str, Any]]) -> None:
    """Random UBI query records through a passthrough into a created table: ``SELECT *`` (NULL left out, the
    attributes parsed) gives each record back, its keys in the schema's order."""
    database = f"prop{next(_rounds)}"
    clickhouse.query(f"DROP DATABASE IF EXISTS {database}")
    with tempfile.TemporaryDirectory(prefix="ch-ubi-") as folder:
        config = with_clickhouse(write_config(Path(folder), ""), clickhouse.url, database)
        pipe = Pipeline(load_config(config), seed=1)
        try:
            feed(pipe, [json.dumps(r, ensure_ascii=False) for r in queries])
            drain(pipe)
        finally:
            pipe.close()
    order = [name for name, _ in QUERY_COLUMNS]
    want = sorted(json.dumps({k: r[k] for k in order if k in r}, ensure_ascii=False) for r in queries)
    got = [
        json.dumps(json.loads(x), ensure_ascii=False)
        for x in records(clickhouse, f"{database}.ubi_queries", empty_lists=False)
    ]
    assert sorted(got) == want
    clickhouse.query(f"DROP DATABASE {database}")
