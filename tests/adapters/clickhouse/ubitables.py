"""What the UBI tests of the clickhouse sink share: a clickhouse sink beside a helpers.ubipipe config's file sink,
draining it, and the rows of a UBI table read back as UBI record lines."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers.clickhouse import ClickHouse

from adapters.clickhouse.sink import ClickHouseSink
from sidecar.pipeline import Pipeline

FAST = "retry_initial_seconds: 0.05, retry_max_seconds: 0.2"
QUERY_TYPES = {
    "application": "Nullable(String)",
    "query_id": "String",
    "client_id": "String",
    "user_query": "String",
    "timestamp": "Nullable(String)",
    "query_attributes": "Nullable(String)",
    "query_response_id": "Nullable(String)",
    "query_response_hit_ids": "Array(String)",
    "parsed_timestamp": "DateTime",
}
EVENT_TYPES = {
    "application": "Nullable(String)",
    "action_name": "String",
    "query_id": "String",
    "client_id": "String",
    "session_id": "Nullable(String)",
    "timestamp": "Nullable(String)",
    "message_type": "Nullable(String)",
    "message": "Nullable(String)",
    "event_attributes": "Nullable(String)",
    "parsed_timestamp": "DateTime",
}


def with_clickhouse(config: Path, url: str, database: str, extra: str = "") -> Path:
    """``config`` (a helpers.ubipipe config, a file sink) with a clickhouse sink beside its file sink."""
    text = config.read_text(encoding="utf-8")
    sink = (
        f"  - clickhouse: {{url: '{url}', table: {database}.ubi_queries, events_table: ubi_events, "
        f"create_table: true, {FAST}{extra}}}\n"
    )
    config.write_text(text.replace("sinks:\n", "sinks:\n" + sink, 1), encoding="utf-8")
    return config


def clickhouse_sink(pipe: Pipeline) -> ClickHouseSink:
    (sink,) = (s for s in pipe.sinks if isinstance(s, ClickHouseSink))
    return sink


def drain(pipe: Pipeline, timeout: float = 15) -> None:
    for writer in clickhouse_sink(pipe).writers:
        assert writer.outbox is not None and writer.outbox.drain(timeout), f"{writer.table_label} did not drain"


def records(clickhouse: ClickHouse, table: str, *, empty_lists: bool = True) -> list[str]:
    """The rows of ``table`` (``SELECT *``) as UBI record lines, sorted: a NULL is a key the record left out (and
    so is an empty list, unless ``empty_lists``), an attributes column's JSON text is its object again."""
    out = []
    text = clickhouse.query(f"SELECT * FROM {table} FORMAT JSONEachRow", output_format_json_quote_64bit_integers=0)
    rows = [json.loads(line) for line in text.split("\n") if line]  # not splitlines: a value may hold U+0085
    for row in rows:
        record: dict[str, Any] = {}
        for key, value in row.items():
            if value is None or (value == [] and not empty_lists):
                continue
            record[key] = json.loads(value) if key in ("query_attributes", "event_attributes") else value
        out.append(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
    return sorted(out)


def split(lines: list[str]) -> tuple[list[str], list[str]]:
    """UBI lines as (query records, event records), each sorted."""
    return sorted(x for x in lines if '"user_query"' in x), sorted(x for x in lines if '"user_query"' not in x)
