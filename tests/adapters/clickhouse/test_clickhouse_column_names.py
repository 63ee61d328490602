"""Keys ClickHouse cannot take as column names, with ``create_table``, against the session's real ClickHouse 18.16:
an empty key (refused by CREATE TABLE, error 62), one too long for its data files' names (created, then every
INSERT fails, error 76), a MergeTree virtual column (reads back as the virtual value). Such a key gets no column:
its record is dead-lettered ``field_not_in_table`` and the good records of the same batch go in; a CREATE TABLE
ClickHouse still refuses for the records' keys is not kept (the next batch starts over)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import structlog
from helpers.clickhouse import ClickHouse
from helpers.ubipipe import feed, write_config
from hypothesis import given
from hypothesis import strategies as st

from adapters.clickhouse.config import ClickHouseSinkConfig
from adapters.clickhouse.schema import FILE_NAME_MAX, TableMismatch, column_name_ok
from sidecar.api import ConfigValueError, RecordBatch
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

from .test_clickhouse import FAST, ConfigFile, drain, receive_json, sink_of
from .ubitables import clickhouse_sink, with_clickhouse
from .ubitables import drain as drain_ubi

#: The longest key that still gets a column (Nullable: files ``<name>.null.bin``/``.mrk``), and one byte more.
LONGEST, TOO_LONG = "k" * FILE_NAME_MAX, "k" * (FILE_NAME_MAX + 1)


def dead_letters(path: Path) -> list[tuple[str, str | None]]:
    """(reason, field) of each dead letter, sorted."""
    if not path.exists():
        return []
    return sorted((d["reason"], d.get("field")) for d in map(json.loads, path.read_text().splitlines()))


def _escaped_length(name: str) -> int:
    """ClickHouse's escapeForFileName, written from its rule: a byte that is no ASCII letter, digit or _ as %XX."""
    return sum(1 if chr(b).isascii() and (chr(b).isalnum() or b == 0x5F) else 3 for b in name.encode("utf-8"))


@given(st.text(max_size=300))
def test_a_name_is_taken_when_its_data_files_names_fit(name: str) -> None:
    """The rule against a second writing of ClickHouse's file-name escaping (the server test below checks the
    boundary on the real server)."""
    try:
        encoded = _escaped_length(name)
    except UnicodeEncodeError:  # a lone surrogate: no UTF-8, no column
        assert not column_name_ok(name)
        return
    expected = 0 < encoded <= FILE_NAME_MAX and name not in ("_part", "_part_index", "_partition_id", "_sample_factor")
    assert column_name_ok(name) == expected


@pytest.mark.parametrize(
    ("name", "ok"),
    [("", False), ("a\ud800", False), ("_part", False), ("_partition_id", False), ("_table", True),
     ("a\x00b", True), ("a`b", True), ("é" * 41, True), ("é" * 42, False), (LONGEST, True), (TOO_LONG, False)],
)  # fmt: skip
def test_names_clickhouse_refuses_or_cannot_write(name: str, ok: bool) -> None:
    assert column_name_ok(name) is ok


def test_a_json_first_batch_with_keys_clickhouse_cannot_take(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile, tmp_path: Path
) -> None:
    """The first batch: good records (one with a key of its own, one with the longest key that fits) and records
    carrying an empty key, a key too long for its files, a virtual column's name. The table gets the good keys;
    the good records go in, each bad one is a dead letter ``field_not_in_table`` naming its key; the next batch
    goes in; no value in the logs."""
    config = config_file(
        f"schema: {{format: jsonl}}\nsinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.t, "
        f"create_table: true, {FAST}}}\n"
    )
    good: list[dict[str, Any]] = [{"AnonID": str(i), "Query": f"q{i}"} for i in range(4)]
    good[1]["extra"] = 1
    good[2][LONGEST] = "fits"
    bad = [{"AnonID": "b", "Query": "secret-query", key: "v"} for key in ("", TOO_LONG, "_part")]
    with structlog.testing.capture_logs() as logs:
        pipeline = Pipeline(load_config(config))
        try:
            receive_json(pipeline, [good[0], bad[0], good[1], bad[1], good[2], bad[2]])
            receive_json(pipeline, [good[3]])
            drain(pipeline)
            stats = sink_of(pipeline).stats()
        finally:
            pipeline.close()
    assert "secret-query" not in repr(logs)
    assert set(clickhouse.columns(f"{database}.t")) == {"AnonID", "Query", "extra", LONGEST}
    rows = clickhouse.rows(f"SELECT AnonID, extra, `{LONGEST}` AS long FROM {database}.t ORDER BY AnonID")
    assert rows == [
        {"AnonID": "0", "extra": None, "long": None},
        {"AnonID": "1", "extra": 1, "long": None},
        {"AnonID": "2", "extra": None, "long": "fits"},
        {"AnonID": "3", "extra": None, "long": None},
    ]
    assert stats["field_not_in_table"] == 3
    assert dead_letters(tmp_path / "state" / "dead-letter.jsonl") == sorted(
        ("field_not_in_table", key) for key in ("", TOO_LONG, "_part")
    )


def test_a_first_batch_whose_every_record_has_an_empty_key(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile, tmp_path: Path
) -> None:
    """Every record of the first batch carries ``""``: the table is made of their other keys, each record is a
    dead letter, the next batch goes in."""
    config = config_file(
        f"schema: {{format: jsonl}}\nsinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.t, "
        f"create_table: true, {FAST}}}\n"
    )
    pipeline = Pipeline(load_config(config))
    try:
        receive_json(pipeline, [{"AnonID": str(i), "Query": "q", "": "v"} for i in range(3)])
        receive_json(pipeline, [{"AnonID": "9", "Query": "q"}])
        drain(pipeline)
    finally:
        pipeline.close()
    assert clickhouse.rows(f"SELECT * FROM {database}.t") == [{"AnonID": "9", "Query": "q"}]
    assert dead_letters(tmp_path / "state" / "dead-letter.jsonl") == [("field_not_in_table", "")] * 3


def test_an_empty_key_while_clickhouse_was_down(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile, tmp_path: Path
) -> None:
    """ClickHouse down at the first batch: the rows wait in the outbox; once it is up the sender creates the table
    without the empty key, inserts the good rows and dead-letters the other, naming the key."""
    config = config_file(
        f"schema: {{format: jsonl}}\nsinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.late, "
        f"create_table: true, {FAST}}}\n"
    )
    pipeline = Pipeline(load_config(config))
    with clickhouse.down():
        receive_json(pipeline, [{"AnonID": "1", "Query": "q", "": "v"}, {"AnonID": "2", "Query": "q"}])
    try:
        drain(pipeline)
    finally:
        pipeline.close()
    assert clickhouse.rows(f"SELECT * FROM {database}.late") == [{"AnonID": "2", "Query": "q"}]
    assert dead_letters(tmp_path / "state" / "dead-letter.jsonl") == [("field_not_in_table", "")]


def test_a_ubi_first_batch_with_an_empty_key(clickhouse: ClickHouse, database: str, tmp_path: Path) -> None:
    """``format: ubi``: a query and an event carrying ``""`` in the first batch of each table: the good records of
    both kinds go in, the two bad ones are dead letters naming the key, and the next batch goes in."""
    config = with_clickhouse(write_config(tmp_path, ""), clickhouse.url, database)

    def query(n: int, **more: Any) -> str:
        return json.dumps({"query_id": f"q{n}", "client_id": f"c{n}", "user_query": f"t{n}", **more})

    def event(n: int, **more: Any) -> str:
        return json.dumps({"action_name": "click", "query_id": f"q{n}", "client_id": f"c{n}", **more})

    pipe = Pipeline(load_config(config))
    try:
        feed(pipe, [query(1, **{"": "x"}), query(2), event(1, **{"": "x"}), event(2)])
        feed(pipe, [query(3), event(3)])
        drain_ubi(pipe)
        stats = clickhouse_sink(pipe).stats()
    finally:
        pipe.close()
    assert clickhouse.rows(f"SELECT query_id FROM {database}.ubi_queries ORDER BY query_id") == [
        {"query_id": "q2"},
        {"query_id": "q3"},
    ]
    assert clickhouse.rows(f"SELECT query_id FROM {database}.ubi_events ORDER BY query_id") == [
        {"query_id": "q2"},
        {"query_id": "q3"},
    ]
    assert stats["field_not_in_table"] == 2
    assert dead_letters(tmp_path / "state" / "dead.jsonl") == [("field_not_in_table", "")] * 2


def test_a_create_table_refused_for_the_keys_is_not_kept(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile, tmp_path: Path
) -> None:
    """ClickHouse refusing CREATE TABLE for the records' keys (here: a statement over a small ``max_query_size``,
    set in the url). A record with many keys of its own: the table gets the keys every record has, that record is
    dead-lettered ``field_not_in_table``. Every record with them: the batch is dead-lettered
    ``columns_not_creatable`` (not refused), and the next batch settles the columns anew and goes in."""
    many = {f"key_{i:03d}_{'x' * 20}": i for i in range(30)}  # ~900 bytes of column names

    def run(table: str, *batches: list[dict[str, Any]]) -> dict[str, Any]:
        config = config_file(
            f"schema: {{format: jsonl}}\nsinks:\n  - clickhouse: {{url: '{clickhouse.url}/?max_query_size=600', "
            f"table: {database}.{table}, create_table: true, {FAST}}}\n"
        )
        pipeline = Pipeline(load_config(config))
        try:
            for batch in batches:
                receive_json(pipeline, batch)
            drain(pipeline)
            return sink_of(pipeline).stats()
        finally:
            pipeline.close()

    stats = run("narrow", [{"AnonID": "1", "Query": "q", **many}, {"AnonID": "2", "Query": "q"}])
    assert stats["field_not_in_table"] == 1
    assert clickhouse.rows(f"SELECT * FROM {database}.narrow") == [{"AnonID": "2", "Query": "q"}]
    letters = tmp_path / "state" / "dead-letter.jsonl"
    assert dead_letters(letters) == [("field_not_in_table", next(iter(many)))]
    letters.unlink()

    stats = run(
        "wide",
        [{"AnonID": "1", "Query": "q", **many}, {"AnonID": "2", "Query": "q", **many}],
        [{"AnonID": "3", "Query": "q", "n": 3}],
    )
    assert stats["columns_not_creatable"] == 2
    assert clickhouse.rows(f"SELECT * FROM {database}.wide") == [{"AnonID": "3", "Query": "q", "n": 3}]
    assert dead_letters(letters) == [("columns_not_creatable", None)] * 2
    assert json.loads(json.loads(letters.read_text().splitlines()[0])["record"]) == {
        "AnonID": "1",
        "Query": "q",
        **many,
    }


def test_a_tsv_header_column_clickhouse_cannot_take_is_a_clear_error(
    clickhouse: ClickHouse, database: str, config_file: ConfigFile
) -> None:
    """A TSV header's column is every record's: an empty one refuses the batch with a TableMismatch naming its
    position (what to change), not ClickHouse's syntax error."""
    config = config_file(
        f"sinks:\n  - clickhouse: {{url: '{clickhouse.url}', table: {database}.t, create_table: true, {FAST}}}\n"
    )
    pipeline = Pipeline(load_config(config))
    try:
        codec = pipeline.ctx.codec_for("tsv")
        assert codec is not None
        codec.accept_header("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\t")
        with pytest.raises(TableMismatch, match=r"column 6 of the records has a name .*`columns:"):
            pipeline.receive(RecordBatch(["1\ta\t2006-03-01 07:17:12\t\t\tx"], codec, "t"))
    finally:
        pipeline.close()


def test_columns_create_table_cannot_make_are_a_config_error() -> None:
    with pytest.raises(ConfigValueError, match=r"_part.*virtual column"):
        ClickHouseSinkConfig(table="db.t", create_table=True, columns={"_part": "Query"})
    ClickHouseSinkConfig(table="db.t", columns={"_part": "Query"})  # an existing table's: its own business
