"""The ``clickhouse`` sink against a real ClickHouse 18.16 (the session's server): replay and an HTTP source
through a chain into it, rows read back with ``SELECT ... FORMAT JSONEachRow``; create_table; a mismatched
table; a bad row; authentication; ClickHouse stopped mid-run (batches wait in the outbox, none lost)."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
from helpers import QUERYLOG, GeneratedLog, cli_env, wait_until
from helpers.clickhouse import PASSWORD, USER, ClickHouse
from helpers.httptest import lines, post

from adapters.clickhouse.schema import TableMismatch
from adapters.clickhouse.sink import ClickHouseSink
from adapters.http.config import HttpSourceConfig
from adapters.http.source import HttpSource
from filters.truncate_url import truncate
from sidecar.api import RecordBatch
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

AOL_COLUMNS = ("AnonID", "Query", "QueryTime", "ItemRank", "ClickURL")
FAST = "retry_initial_seconds: 0.05, retry_max_seconds: 0.2"

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


def test_replay_cli_into_clickhouse_reads_back_the_input(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile, generated_log: GeneratedLog
) -> None:
    """`querylog replay` of an 8,000-line AOL log through the passthrough chain into a table it creates:
    every row reads back equal to its input line (QueryTime as DateTime, the rest String)."""
    config = config_file(
        f"sinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.aol, create_table: true, "
        "batch_max_events: 3000}\n"
    )
    done = subprocess.run(
        [QUERYLOG, "replay", "--config", str(config), str(generated_log.path)],
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert clickhouse.columns(f"{database}.aol") == {
        "AnonID": "String",
        "Query": "String",
        "QueryTime": "DateTime",
        "ItemRank": "String",
        "ClickURL": "String",
    }
    got = sorted(tuple(r[c] for c in AOL_COLUMNS) for r in clickhouse.rows(f"SELECT * FROM {database}.aol"))
    want = sorted(tuple(line.split("\t")) for line in generated_log.text.splitlines()[1:] if line)
    assert len(got) == len(want) > 8000
    assert got == want


def test_http_source_through_a_chain_into_mapped_columns(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile
) -> None:
    """NDJSON POSTed to the http source → truncate_url → the sink, into an existing table whose columns are named
    otherwise (`columns:`): the 200 comes once the rows are in the outbox, the rows arrive as the chain left them,
    and the bad line of the body is dead-lettered without the others."""
    clickhouse.query(f"CREATE DATABASE {database}")
    clickhouse.query(
        f"CREATE TABLE {database}.events (user_id String, query String, ts Nullable(DateTime), url String, "
        "inserted DateTime DEFAULT now()) ENGINE = MergeTree ORDER BY tuple()"
    )
    config = config_file(
        "schema: {format: jsonl}\nfilters:\n  - truncate_url: {}\n"
        f"sinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.events, "
        "columns: {user_id: AnonID, query: Query, ts: QueryTime, url: ClickURL}}\n"
    )
    pipeline = Pipeline(load_config(config))
    source = HttpSource(HttpSourceConfig(listen="127.0.0.1:0"), pipeline.ctx)
    source.start(pipeline)
    records = [
        {"AnonID": "142", "Query": "rentdirect.com", "QueryTime": "2006-03-01 07:17:12", "ClickURL": ""},
        {"AnonID": "217", "Query": "lottery", "QueryTime": "", "ClickURL": "http://www.calottery.com/play?x=1"},
        {"AnonID": "993", "Query": 'ünïcode 😀 "quoted"', "QueryTime": "2006-03-02 14:20:33", "ClickURL": "x"},
    ]
    try:
        answer = post(source.port, lines(*records[:2]) + b"{broken\n" + lines(records[2]))
        assert answer.status == 200 and answer.body["accepted"] == 3 and answer.body["dead_lettered"] == 1
        drain(pipeline)
    finally:
        source.stop(grace=2)
        pipeline.close()
    got = clickhouse.rows(f"SELECT user_id, query, ts, url FROM {database}.events ORDER BY user_id")
    assert got == [
        {"user_id": r["AnonID"], "query": r["Query"], "ts": r["QueryTime"] or None, "url": truncate(r["ClickURL"])}
        for r in records
    ]
    assert got[1]["url"] == "http://www.calottery.com"


def test_create_table_infers_types_from_the_first_batch(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile
) -> None:
    """JSON lines with the record's own keys: text roles String, times DateTime (Nullable: one is empty),
    numbers and booleans typed, a missing key Nullable, an object as its JSON text."""
    config = config_file(
        f"schema: {{format: jsonl}}\nsinks:\n  - clickhouse: {{url: '{clickhouse.url}', "
        f"table: {database}.inferred, create_table: true}}\n"
    )
    records = [
        {"AnonID": 142, "Query": "a", "QueryTime": "2006-03-01 07:17:12", "clicks": 3, "score": 0.5, "mobile": True,
         "extra": {"k": [1, 2]}},
        {"AnonID": 217, "Query": "b", "QueryTime": "", "clicks": 4, "score": 2, "mobile": False, "extra": "plain"},
    ]  # fmt: skip
    pipeline = Pipeline(load_config(config))
    try:
        receive_json(pipeline, records)
        drain(pipeline)
    finally:
        pipeline.close()
    assert clickhouse.columns(f"{database}.inferred") == {
        "AnonID": "String",
        "Query": "String",
        "QueryTime": "Nullable(DateTime)",
        "clicks": "Int64",
        "score": "Float64",
        "mobile": "UInt8",
        "extra": "String",
    }
    assert clickhouse.rows(f"SELECT * FROM {database}.inferred ORDER BY AnonID") == [
        {"AnonID": "142", "Query": "a", "QueryTime": "2006-03-01 07:17:12", "clicks": 3, "score": 0.5, "mobile": 1,
         "extra": '{"k":[1,2]}'},
        {"AnonID": "217", "Query": "b", "QueryTime": None, "clicks": 4, "score": 2, "mobile": 0, "extra": "plain"},
    ]  # fmt: skip


def test_mismatched_table_is_a_clear_error(clickhouse: ClickHouse, database: str, config_file: ConfigFile) -> None:
    """A table that lacks the records' columns (and has one nothing fills) refuses every batch with an error
    naming the columns and the table, never a value; nothing is acknowledged, queued or inserted."""
    clickhouse.query(f"CREATE DATABASE {database}")
    clickhouse.query(
        f"CREATE TABLE {database}.narrow (AnonID String, Query String, region String) ENGINE = MergeTree "
        "ORDER BY tuple()"
    )
    config = config_file(f"sinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.narrow}}\n")
    pipeline = Pipeline(load_config(config))
    codec = pipeline.ctx.codec_for("tsv")
    assert codec is not None
    codec.accept_header("\t".join(AOL_COLUMNS))
    batch = RecordBatch(["u-31337\tsecret words\t2006-03-01 07:17:12\t1\thttp://x.org"], codec, "t")
    try:
        with pytest.raises(TableMismatch) as err:
            pipeline.receive(batch)
        with pytest.raises(TableMismatch):  # and the next batch too, until the table is fixed
            pipeline.receive(batch)
        outbox = sink_of(pipeline).outbox
        assert outbox is not None and outbox.pending().events == 0
    finally:
        pipeline.close()
    message = str(err.value)
    assert f"ClickHouse table {database}.narrow does not match" in message
    assert "no column QueryTime, ItemRank, ClickURL" in message and "fills column region" in message
    for value in ("u-31337", "secret words", "x.org"):
        assert value not in message
    assert clickhouse.rows(f"SELECT count() AS n FROM {database}.narrow") == [{"n": 0}]


def test_missing_table_without_create_table_is_a_clear_error(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile
) -> None:
    config = config_file(
        f"schema: {{format: jsonl}}\nsinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.nope}}\n"
    )
    pipeline = Pipeline(load_config(config))
    try:
        with pytest.raises(
            TableMismatch, match=f"table {database}.nope does not exist: create it, or set create_table"
        ):
            receive_json(pipeline, [{"AnonID": "1", "Query": "q"}])
    finally:
        pipeline.close()


def test_a_bad_row_is_dead_lettered_alone(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile, tmp_path: Path
) -> None:
    """ClickHouse refusing one row of a batch (text in an Int64 column): the batch is split until that row is
    alone; it is dead-lettered (rejected_by_peer) and the other rows are inserted once; a record with a key the
    table lacks is dead-lettered before it is sent (field_not_in_table)."""
    clickhouse.query(f"CREATE DATABASE {database}")
    clickhouse.query(
        f"CREATE TABLE {database}.typed (AnonID String, Query String, n Nullable(Int64)) ENGINE = MergeTree "
        "ORDER BY tuple()"
    )
    config = config_file(
        f"schema: {{format: jsonl}}\nsinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.typed}}\n"
    )
    records = [{"AnonID": str(i), "Query": f"q{i}", "n": i} for i in range(9)]
    records[5]["n"] = "five"
    records[7]["unexpected"] = 1
    with structlog.testing.capture_logs() as logs:
        pipeline = Pipeline(load_config(config))
        try:
            receive_json(pipeline, records)
            drain(pipeline)
            stats = sink_of(pipeline).stats()
        finally:
            pipeline.close()
    assert "clickhouse_row_rejected" in repr(logs) and "five" not in repr(logs)  # counts and codes, no values
    rows = clickhouse.rows(f"SELECT AnonID, n FROM {database}.typed ORDER BY n")
    assert rows == [{"AnonID": str(i), "n": i} for i in range(9) if i not in (5, 7)]
    assert stats["rejected_by_peer"] == 1 and stats["field_not_in_table"] == 1
    dead = [json.loads(x) for x in (tmp_path / "state" / "dead-letter.jsonl").read_text().splitlines()]
    assert sorted(d["reason"] for d in dead) == ["field_not_in_table", "rejected_by_peer"]
    assert json.loads(next(d["record"] for d in dead if d["reason"] == "rejected_by_peer"))["n"] == "five"


def test_password_from_env_and_a_wrong_one_keeps_the_batch(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The user's password from an environment variable (HTTP Basic); with a wrong one ClickHouse refuses, and the
    batch stays in the outbox (retried, not dead-lettered)."""
    monkeypatch.setenv("QUERYLOG_TEST_CH_PASSWORD", PASSWORD)
    monkeypatch.setenv("QUERYLOG_TEST_CH_WRONG", "not-the-password")
    base = f"url: '{clickhouse.url}', table: {database}.auth, create_table: true, user: {USER}, {FAST}"
    good = config_file(
        f"schema: {{format: jsonl}}\nsinks:\n  - clickhouse: {{{base}, password_env: QUERYLOG_TEST_CH_PASSWORD}}\n"
    )
    pipeline = Pipeline(load_config(good))
    try:
        receive_json(pipeline, [{"AnonID": "1", "Query": "q"}])
        drain(pipeline)
    finally:
        pipeline.close()
    assert clickhouse.rows(f"SELECT count() AS n FROM {database}.auth") == [{"n": 1}]
    wrong = config_file(
        f"schema: {{format: jsonl}}\nsinks:\n  - clickhouse: {{{base}, password_env: QUERYLOG_TEST_CH_WRONG, "
        "close_drain_seconds: 0}\n"
    )
    pipeline = Pipeline(load_config(wrong))
    try:
        with pytest.raises(Exception, match=r"answered HTTP \d+ \(error code 19[23]\) to DESCRIBE TABLE"):
            receive_json(pipeline, [{"AnonID": "2", "Query": "q"}])
        sink = sink_of(pipeline)
        assert "rejected_by_peer" not in sink.stats()
    finally:
        pipeline.close()
    assert clickhouse.rows(f"SELECT count() AS n FROM {database}.auth") == [{"n": 1}]


def test_clickhouse_stopped_mid_run_loses_nothing(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile
) -> None:
    """Batches keep coming while ClickHouse is stopped: they wait in the outbox (every receive still returns:
    durable there) and arrive once it is back. Every acknowledged event is in the table; duplicates are counted."""
    config = config_file(
        f"schema: {{format: jsonl}}\nsinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.restart, "
        f"create_table: true, {FAST}, timeout_seconds: 2}}\n"
    )
    pipeline = Pipeline(load_config(config))
    sent = 0
    batch = 200
    try:

        def send_batches(n: int) -> None:
            nonlocal sent
            for _ in range(n):
                receive_json(pipeline, [{"AnonID": str(sent + i), "Query": "q"} for i in range(batch)])
                sent += batch

        send_batches(5)
        drain(pipeline)
        clickhouse.stop()
        stopped_at = sent
        send_batches(10)
        outbox = sink_of(pipeline).outbox
        assert outbox is not None
        wait_until(lambda: outbox.stats()["retries"] >= 1, what="a retry while ClickHouse is down")  # down a while
        waiting = outbox.pending().events
        assert waiting > 0
        restarter = threading.Thread(target=clickhouse.start)
        restarter.start()
        send_batches(5)  # while it comes back
        restarter.join(30)
        drain(pipeline, 30)
        stats = sink_of(pipeline).stats()
    finally:
        if clickhouse.proc is None:
            clickhouse.start()
        pipeline.close()
    counts = clickhouse.rows(f"SELECT count() AS n, uniqExact(AnonID) AS users FROM {database}.restart")[0]
    assert counts["users"] == sent == 4000, "an acknowledged event is missing"
    duplicates = counts["n"] - counts["users"]
    print(f"stopped after {stopped_at} events; {waiting} waited in the outbox; duplicates: {duplicates}")
    assert duplicates == 0  # a stop is clean: only a batch in flight at a crash could arrive twice
    assert stats["retries"] >= 1 and stats["pending_events"] == 0


def test_clickhouse_down_at_the_first_batch(clickhouse: ClickHouse, database: str, config_file: ConfigFile) -> None:
    """ClickHouse not running when the first batch comes: the batch is acknowledged into the outbox (the table
    check waits), and once ClickHouse is up the sender creates the table, checks it and inserts the rows."""
    config = config_file(
        f"sinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.late, create_table: true, {FAST}}}\n"
    )
    pipeline = Pipeline(load_config(config))
    codec = pipeline.ctx.codec_for("tsv")
    assert codec is not None
    codec.accept_header("\t".join(AOL_COLUMNS))
    rows = ["1\ta\t2006-03-01 07:17:12\t\t", "2\tb\t2006-03-01 07:17:13\t1\thttp://x.org"]
    with clickhouse.down():
        receipt = pipeline.receive(RecordBatch(rows, codec, "t"))
        assert receipt.accepted == 2
        outbox = sink_of(pipeline).outbox
        assert outbox is not None and outbox.pending().events == 2
    try:
        drain(pipeline)
    finally:
        pipeline.close()
    assert clickhouse.columns(f"{database}.late")["QueryTime"] == "DateTime"
    got = clickhouse.rows(f"SELECT * FROM {database}.late ORDER BY AnonID")
    assert [tuple(r[c] for c in AOL_COLUMNS) for r in got] == [tuple(r.split("\t")) for r in rows]
