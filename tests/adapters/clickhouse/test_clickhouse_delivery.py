"""The ``clickhouse`` sink converts at delivery (issue 24, item 15), against the session's real ClickHouse 18.16:
rows accepted while ClickHouse was down are converted to the table's types when it is back (a cold start
rejected them all), RFC 3339 times (what Vector sends) go into a ``DateTime`` column, and a
``field_not_in_table`` dead letter names the key and keeps the record replayable."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers.clickhouse import ClickHouse
from helpers.httptest import lines

from adapters.clickhouse.sink import ClickHouseSink
from sidecar.api import RecordBatch
from sidecar.codecs import JsonlCodec, SchemaConfig
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

FAST = "retry_initial_seconds: 0.05, retry_max_seconds: 0.2"
TABLE = (
    "(AnonID String, Query String, QueryTime DateTime, ItemRank Nullable(UInt32), ClickURL Nullable(String)) "
    "ENGINE = MergeTree ORDER BY tuple()"
)
#: records as a Vector or HTTP client sends them: RFC 3339 times, a rank that is empty, null, text or a number
RECORDS: list[dict[str, Any]] = [
    {"AnonID": "1", "Query": "a", "QueryTime": "2024-05-01T12:00:00Z", "ItemRank": None, "ClickURL": None},
    {"AnonID": "2", "Query": "b", "QueryTime": "2024-05-01T12:00:01.123456789Z", "ItemRank": ""},
    {"AnonID": "3", "Query": "c", "QueryTime": "2024-05-01T14:00:02+02:00", "ItemRank": "3", "ClickURL": "x"},
    {"AnonID": "4", "Query": "d", "QueryTime": "2024-05-01 12:00:03", "ItemRank": 4, "ClickURL": ""},
]
#: what the table holds for them: (AnonID, unix seconds, rank, url)
EXPECTED = [
    {"AnonID": "1", "t": 1714564800, "ItemRank": None, "ClickURL": None},
    {"AnonID": "2", "t": 1714564801, "ItemRank": None, "ClickURL": None},
    {"AnonID": "3", "t": 1714564802, "ItemRank": 3, "ClickURL": "x"},
    {"AnonID": "4", "t": 1714564803, "ItemRank": 4, "ClickURL": ""},
]

ConfigFile = Callable[[str], Path]


def sink_of(pipeline: Pipeline) -> ClickHouseSink:
    sink = pipeline.sinks[0]
    assert isinstance(sink, ClickHouseSink)
    return sink


def receive_json(pipeline: Pipeline, records: list[dict[str, Any]]) -> None:
    codec = pipeline.ctx.codec_for("jsonl")
    assert codec is not None
    pipeline.receive(RecordBatch(lines(*records).decode().splitlines(), codec, "test"))


def drain(pipeline: Pipeline, timeout: float = 15) -> None:
    outbox = sink_of(pipeline).outbox
    assert outbox is not None and outbox.drain(timeout), "the outbox did not drain"


def stored(clickhouse: ClickHouse, table: str) -> list[dict[str, Any]]:
    return clickhouse.rows(
        f"SELECT AnonID, toUnixTimestamp(QueryTime) AS t, ItemRank, ClickURL FROM {table} ORDER BY AnonID"
    )


def dead_letters(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "state" / "dead-letter.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def test_rows_accepted_while_clickhouse_was_down_are_converted_when_it_is_back(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile, tmp_path: Path
) -> None:
    """Cold start: the table exists, ClickHouse is down at the first batch (its types unknown), so the rows wait
    in the outbox as they came; once it is back they are converted to the column types before the INSERT (an
    empty or null rank is NULL, RFC 3339 times are read), and none is refused."""
    clickhouse.query(f"CREATE DATABASE {database}")
    clickhouse.query(f"CREATE TABLE {database}.cold {TABLE}")
    config = config_file(
        f"schema: {{format: jsonl}}\nsinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.cold, "
        f"{FAST}}}\n"
    )
    pipeline = Pipeline(load_config(config))
    with clickhouse.down():
        receive_json(pipeline, RECORDS)
        outbox = sink_of(pipeline).outbox
        assert outbox is not None and outbox.pending().events == len(RECORDS)
    try:
        drain(pipeline)
        stats = sink_of(pipeline).stats()
    finally:
        pipeline.close()
    assert dead_letters(tmp_path) == [] and stats.get("rejected_by_peer", 0) == 0
    assert stored(clickhouse, f"{database}.cold") == EXPECTED


def test_rfc3339_times_go_into_a_datetime_column(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile, tmp_path: Path
) -> None:
    """ClickHouse up: RFC 3339 times (``Z``, an offset, nanoseconds) are read into ``DateTime`` as the instant
    they name (to the second), beside the AOL format, which goes in as it is."""
    clickhouse.query(f"CREATE DATABASE {database}")
    clickhouse.query(f"CREATE TABLE {database}.times {TABLE}")
    config = config_file(
        f"schema: {{format: jsonl}}\nsinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.times, "
        f"{FAST}}}\n"
    )
    pipeline = Pipeline(load_config(config))
    try:
        receive_json(pipeline, RECORDS)
        drain(pipeline)
    finally:
        pipeline.close()
    assert dead_letters(tmp_path) == []
    assert stored(clickhouse, f"{database}.times") == EXPECTED


def test_field_not_in_table_names_the_key_and_keeps_the_record_replayable(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile, tmp_path: Path
) -> None:
    """A record with a key the table lacks, before and after the table is known: the dead letter says which key
    (a name, never a value), and its record is the whole record as a JSON line, which a JSON-lines replay reads."""
    clickhouse.query(f"CREATE DATABASE {database}")
    clickhouse.query(f"CREATE TABLE {database}.extra {TABLE}")
    config = config_file(
        f"schema: {{format: jsonl}}\nsinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.extra, "
        f"{FAST}}}\n"
    )
    pipeline = Pipeline(load_config(config))
    extra = {**RECORDS[0], "AnonID": "9", "session": "s-1"}
    with clickhouse.down():
        receive_json(pipeline, [RECORDS[0], extra])  # the table's columns not known yet
    try:
        drain(pipeline)
        receive_json(pipeline, [{**extra, "AnonID": "8"}])  # known now
        drain(pipeline)
    finally:
        pipeline.close()
    dead = dead_letters(tmp_path)
    assert [d["reason"] for d in dead] == ["field_not_in_table"] * 2
    assert all(d["field"] == "session" for d in dead)
    records = [json.loads(d["record"]) for d in dead]
    assert records == [extra, {**extra, "AnonID": "8"}]
    codec = JsonlCodec(SchemaConfig())
    assert [e.user for e in codec.decode_many([d["record"] for d in dead], "\n", [])] == ["9", "8"]
    assert [r["AnonID"] for r in stored(clickhouse, f"{database}.extra")] == ["1"]
