"""UBI records (``format: ubi``) into the ``clickhouse`` sink, against the session's real ClickHouse 18.16: query
records into ``table``, event records into ``events_table``, each in the UBI schema (one column per top-level
key, nested objects as JSON text, ``timestamp`` as its text with a ``parsed_timestamp`` ClickHouse computes).

The records are the UBI spec fixtures (tests/adapters/ubi/fixtures, written from the o19s/ubi schema) and their
golden outputs (a passthrough, a keyed chain); the rows read back (``SELECT *``) make the same records the file
sink writes. Protected chains and random records: test_clickhouse_ubi_chain.py."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT
from helpers.clickhouse import ClickHouse
from helpers.ubicodec import KEY, KEYED_CHAIN, KEYED_SCHEMA, golden_ubi
from helpers.ubipipe import EVENTS, QUERIES, feed, write_config

from adapters.clickhouse.config import ClickHouseSinkConfig
from adapters.clickhouse.schema import TableMismatch
from adapters.clickhouse.sink import ClickHouseSink
from adapters.clickhouse.ubi import UbiLayout
from sidecar.api import BuildContext, ConfigValueError
from sidecar.codecs import SchemaConfig
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

from .ubitables import EVENT_TYPES, FAST, QUERY_TYPES, clickhouse_sink, drain, records, split, with_clickhouse


@pytest.mark.parametrize("chain", ["passthrough", "keyed"])
def test_spec_records_round_trip_into_two_tables(
    clickhouse: ClickHouse, database: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chain: str
) -> None:
    """The spec fixtures through a passthrough and through the keyed chain (pseudonymized client_id, a scrubbed
    query and description): the query table's rows are the golden output's query records and the event table's
    its event records, key for key and in the schema's order, the same records the file sink wrote; the tables
    were created in the UBI schema, ``parsed_timestamp`` the instant of ``timestamp``."""
    monkeypatch.setenv("UBI_KEY", KEY)
    keyed = chain == "keyed"
    config = write_config(tmp_path, KEYED_CHAIN if keyed else "", KEYED_SCHEMA if keyed else "")
    pipe = Pipeline(load_config(with_clickhouse(config, clickhouse.url, database)), seed=1)
    try:
        feed(pipe, [*QUERIES, *EVENTS])
        drain(pipe)
    finally:
        pipe.close()
    golden = golden_ubi("pseudonymized.jsonl" if keyed else "passthrough.jsonl").splitlines()
    assert golden == (tmp_path / "out.ubi").read_text(encoding="utf-8").splitlines()  # the file sink's
    queries, events = split(golden)
    assert len(queries) == 4 and len(events) == 4
    assert records(clickhouse, f"{database}.ubi_queries") == queries
    assert records(clickhouse, f"{database}.ubi_events") == events
    assert clickhouse.columns(f"{database}.ubi_queries") == QUERY_TYPES
    assert clickhouse.columns(f"{database}.ubi_events") == EVENT_TYPES
    assert list(clickhouse.rows(f"SELECT * FROM {database}.ubi_events LIMIT 1")[0]) == list(EVENT_TYPES)[:-1]
    times = clickhouse.rows(
        f"SELECT timestamp, toUnixTimestamp(parsed_timestamp) AS t FROM {database}.ubi_queries ORDER BY t"
    )
    assert times[0] == {"timestamp": "2024-05-01T10:00:00.000Z", "t": 1714557600}
    assert times[1] == {"timestamp": "2024-05-01T10:00:05.120Z", "t": 1714557605}


def test_records_taken_while_clickhouse_was_down_go_into_tables_created_when_it_is_back(
    clickhouse: ClickHouse, database: str, tmp_path: Path
) -> None:
    """Cold start: ClickHouse is down at the first batch, so the records are acknowledged once in the two outboxes
    (the tables' types unknown); when it is back each sender creates its table from the first batch's records
    and converts the rows (nested objects to their JSON text): the same rows as with ClickHouse up, none
    refused."""
    config = write_config(tmp_path, "")
    pipe = Pipeline(load_config(with_clickhouse(config, clickhouse.url, database)), seed=1)
    with clickhouse.down():
        feed(pipe, [*QUERIES, *EVENTS])
        pending = [w.outbox.pending().events for w in clickhouse_sink(pipe).writers if w.outbox is not None]
        assert pending == [4, 4]
    try:
        drain(pipe)
        stats = clickhouse_sink(pipe).stats()
    finally:
        pipe.close()
    queries, events = split(golden_ubi("passthrough.jsonl").splitlines())
    assert records(clickhouse, f"{database}.ubi_queries") == queries
    assert records(clickhouse, f"{database}.ubi_events") == events
    assert stats["sent_events"] == 8 and stats.get("rejected_by_peer", 0) == 0
    assert clickhouse.columns(f"{database}.ubi_events") == EVENT_TYPES


def test_a_restart_delivers_what_both_outboxes_kept(clickhouse: ClickHouse, database: str, tmp_path: Path) -> None:
    """Records acknowledged while ClickHouse was down, then the sidecar closed with both tables' batches undelivered:
    the next run on the same state folder inserts them into their tables (made by hand) with no record fed to it,
    once each."""
    clickhouse.query(f"CREATE DATABASE {database}")
    for queries in (True, False):
        layout = UbiLayout(queries)
        name = "ubi_queries" if queries else "ubi_events"
        clickhouse.query(layout.create(f"{database}.{name}", [(c, c) for c in layout.known()], []))
    config = with_clickhouse(write_config(tmp_path, ""), clickhouse.url, database, ", close_drain_seconds: 0")
    with clickhouse.down():
        first = Pipeline(load_config(config), seed=1)
        try:
            feed(first, [*QUERIES, *EVENTS])
        finally:
            first.close()
    second = Pipeline(load_config(config), seed=1)
    try:
        drain(second)
        stats = clickhouse_sink(second).stats()
    finally:
        second.close()
    assert stats["sent_events"] == 8
    queries, events = split(golden_ubi("passthrough.jsonl").splitlines())
    assert records(clickhouse, f"{database}.ubi_queries") == queries
    assert records(clickhouse, f"{database}.ubi_events") == events


def test_existing_tables_a_bad_record_and_a_missing_column(
    clickhouse: ClickHouse, database: str, tmp_path: Path
) -> None:
    """Tables the user made (no create_table): a query whose hit ids are no list is refused by ClickHouse and
    dead-lettered alone (rejected_by_peer), an event with a key the table lacks is dead-lettered before it is
    sent (field_not_in_table, naming the key; so is one that carries a column ClickHouse computes), hit ids that
    are numbers go in as text, the others are inserted once. A table that lacks a column every record fills
    refuses the batch, naming it."""
    clickhouse.query(f"CREATE DATABASE {database}")
    qcols = (
        "query_id String, client_id String, user_query String, timestamp String, query_response_hit_ids Array(String)"
    )
    clickhouse.query(f"CREATE TABLE {database}.q ({qcols}) ENGINE = MergeTree ORDER BY query_id")
    clickhouse.query(
        f"CREATE TABLE {database}.e (action_name String, query_id String, client_id String, timestamp String, "
        "event_attributes Nullable(String), shout String MATERIALIZED upper(action_name)) ENGINE = MergeTree "
        "ORDER BY query_id"
    )
    config = tmp_path / "q.yaml"
    config.write_text(
        "state_dir: state\nschema: {format: ubi}\nsinks:\n"
        f"  - clickhouse: {{url: '{clickhouse.url}', table: {database}.q, events_table: e, {FAST}}}\n",
        encoding="utf-8",
    )

    def query(n: int, hits: Any) -> str:
        return json.dumps({"query_id": f"q{n}", "client_id": "c", "user_query": f"t{n}", "timestamp": "T", **hits})

    lines = [
        query(1, {"query_response_hit_ids": ["a", "b"]}),
        query(2, {"query_response_hit_ids": "not a list"}),
        query(3, {"query_response_hit_ids": [7, 8]}),
        query(4, {}),
        json.dumps({"action_name": "click", "query_id": "q1", "client_id": "c", "timestamp": "T"}),
        json.dumps({"action_name": "click", "query_id": "q3", "client_id": "c", "timestamp": "T", "dwell": 3}),
        json.dumps({"action_name": "click", "query_id": "q4", "client_id": "c", "timestamp": "T"}),
        json.dumps({"action_name": "click", "query_id": "q4", "client_id": "c", "timestamp": "T", "shout": "x"}),
    ]
    pipe = Pipeline(load_config(config), seed=1)
    try:
        feed(pipe, lines[:2])
        feed(pipe, lines[2:])
        drain(pipe)
        stats = clickhouse_sink(pipe).stats()
    finally:
        pipe.close()
    assert clickhouse.rows(f"SELECT query_id, query_response_hit_ids AS h FROM {database}.q ORDER BY query_id") == [
        {"query_id": "q1", "h": ["a", "b"]},
        {"query_id": "q3", "h": ["7", "8"]},
        {"query_id": "q4", "h": []},
    ]
    assert clickhouse.rows(f"SELECT query_id, shout FROM {database}.e ORDER BY query_id") == [
        {"query_id": "q1", "shout": "CLICK"},
        {"query_id": "q4", "shout": "CLICK"},
    ]
    assert stats["rejected_by_peer"] == 1 and stats["field_not_in_table"] == 2
    dead = [json.loads(x) for x in (tmp_path / "state" / "dead-letter.jsonl").read_text().splitlines()]
    assert sorted((d["reason"], d.get("field")) for d in dead) == [
        ("field_not_in_table", "dwell"),
        ("field_not_in_table", "shout"),
        ("rejected_by_peer", None),
    ]
    refused = {d.get("field") or d["reason"]: json.loads(d["record"]) for d in dead}
    assert refused["rejected_by_peer"]["query_id"] == "q2"  # the whole record, replayable
    assert refused["dwell"] == json.loads(lines[5]) and refused["shout"] == json.loads(lines[7])

    with_app = json.dumps({"application": "shop", **json.loads(lines[0])})
    pipe = Pipeline(load_config(config), seed=1)  # every record of the first batch has a key the table lacks
    try:
        with pytest.raises(TableMismatch, match=f"{database}.q does not match .*no column application"):
            feed(pipe, [with_app])
    finally:
        pipe.close()


def test_a_mismatched_events_table_refuses_the_batch_before_any_query_is_queued(
    clickhouse: ClickHouse, database: str, tmp_path: Path
) -> None:
    """The query table fits, the event table lacks a column every event fills: the batch of queries and events is
    refused (TableMismatch, naming the table and column), and no row of it waits in either table's outbox or
    batcher (a redelivered batch would otherwise put its queries in twice)."""
    clickhouse.query(f"CREATE DATABASE {database}")
    layout = UbiLayout(True)
    clickhouse.query(layout.create(f"{database}.ubi_queries", [(c, c) for c in layout.known()], []))
    clickhouse.query(f"CREATE TABLE {database}.ubi_events (query_id String) ENGINE = MergeTree ORDER BY query_id")
    config = with_clickhouse(write_config(tmp_path, ""), clickhouse.url, database)
    pipe = Pipeline(load_config(config), seed=1)
    try:
        with pytest.raises(
            TableMismatch,
            match=f"{database}.ubi_events does not match .*no column application, action_name.*Add the missing columns",
        ):
            feed(pipe, [*QUERIES, *EVENTS], batch=100)
        for writer in clickhouse_sink(pipe).writers:
            assert writer.outbox is not None and writer.outbox.pending().events == 0
            assert writer.batcher is not None and writer.batcher.pending() == 0
    finally:
        pipe.close()
    assert clickhouse.rows(f"SELECT count() AS n FROM {database}.ubi_queries") == [{"n": 0}]


@pytest.mark.parametrize(
    ("options", "schema", "problem"),
    [
        ({}, "ubi", "events_table"),
        ({"events_table": "e"}, "jsonl", "events_table"),
        ({"events_table": "e", "columns": {"a": "b"}}, "ubi", "columns"),
        ({"events_table": "e", "time_type": "String"}, "ubi", "time_type"),
        ({"events_table": "db.t"}, "ubi", "events_table"),
    ],
)
def test_ubi_options_are_checked(options: dict[str, Any], schema: str, problem: str) -> None:
    """events_table is required with format ubi and refused without it; columns and time_type do nothing there
    and are refused; the events table must be another table."""
    ctx = BuildContext(config_dir=Path("."), validate_only=True, schema=SchemaConfig(format=schema))
    with pytest.raises(ConfigValueError) as err:
        ClickHouseSink(ClickHouseSinkConfig(table="db.t", **options), ctx)
    assert err.value.key == problem


def test_a_bad_events_table_name_is_a_config_error() -> None:
    with pytest.raises(ConfigValueError, match=r"must be `name` or `database\.name`") as err:
        ClickHouseSinkConfig(table="t", events_table="a.b.c")
    assert err.value.key == "events_table"


def stack_page_blocks() -> dict[str, str]:
    """docs/STACK.md's ClickHouse blocks by their marker: the sink, the tables, the join."""
    text = (ROOT / "docs" / "STACK.md").read_text(encoding="utf-8")
    return {m[1]: m[2] for m in re.finditer(r"<!-- ubi-clickhouse: (.+?) -->\n```\w*\n(.*?)```", text, re.DOTALL)}


def test_the_stack_page_tables_sink_and_join_as_written(clickhouse: ClickHouse, database: str, tmp_path: Path) -> None:
    """docs/STACK.md's tables (made by hand, its database renamed) are the ones create_table makes; its sink
    writes the spec fixtures into them (the golden records read back); its join finds each click's query."""
    blocks = stack_page_blocks()
    assert set(blocks) == {"sink", "tables", "sql"}
    clickhouse.query(f"CREATE DATABASE {database}")
    statements = [x for x in blocks["tables"].replace("search.", f"{database}.").split(";") if x.strip()]
    assert len(statements) == 2
    for statement in statements:
        clickhouse.query(statement)
    q, ev = f"{database}.ubi_queries", f"{database}.ubi_events"
    assert clickhouse.columns(q) == QUERY_TYPES and clickhouse.columns(ev) == EVENT_TYPES
    (sink,) = yaml.safe_load(blocks["sink"])["sinks"]
    sink["clickhouse"].update(url=clickhouse.url, table=sink["clickhouse"]["table"].replace("search.", f"{database}."))
    config = write_config(tmp_path, "")
    doc = yaml.safe_load(config.read_text(encoding="utf-8"))
    doc["sinks"].append(sink)
    config.write_text(yaml.safe_dump(doc), encoding="utf-8")
    pipe = Pipeline(load_config(config), seed=1)
    try:
        feed(pipe, [*QUERIES, *EVENTS])
        drain(pipe)
    finally:
        pipe.close()
    queries, events = split(golden_ubi("passthrough.jsonl").splitlines())
    assert records(clickhouse, q) == queries and records(clickhouse, ev) == events
    assert clickhouse.rows(blocks["sql"].replace("search.", f"{database}.")) == [
        {"user_query": "notebook", "action_name": "add_to_cart", "object_id": "B0002", "n": 1},
        {"user_query": "notebook", "action_name": "click", "object_id": "B0002", "n": 1},
        {"user_query": "order status jane.roe@example.com", "action_name": "click", "object_id": "help-orders", "n": 1},
        {"user_query": "usb c charger 65w", "action_name": "click", "object_id": "B0100", "n": 1},
    ]
