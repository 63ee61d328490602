"""Records to rows without a server: inferred column types, value conversion, mismatch messages, options."""

from __future__ import annotations

from pathlib import Path

import pytest

from adapters.clickhouse.config import ClickHouseSinkConfig
from adapters.clickhouse.schema import (
    MISSING,
    OMIT,
    Column,
    Reject,
    TableMismatch,
    check_columns,
    converter,
    create_statement,
    infer_type,
    quote,
)
from adapters.clickhouse.sink import ClickHouseSink
from adapters.clickhouse.table import TableWriter
from sidecar.api import BuildContext, ConfigValueError
from sidecar.codecs import JsonlCodec, SchemaConfig


class TestInferType:
    @pytest.mark.parametrize(
        ("role", "values", "expected"),
        [
            ("time", ["2006-03-01 07:17:12", "2006-03-02 00:00:00"], "DateTime"),
            ("time", ["2006-03-01 07:17:12", ""], "Nullable(DateTime)"),  # an empty time becomes NULL
            ("time", ["2006-03-01 07:17:12", MISSING], "Nullable(DateTime)"),
            ("time", ["2006-03-01T07:17:12Z"], "String"),  # 18.16 reads it only with best_effort: kept as text
            ("time", [1141197432], "String"),  # unix seconds would come back formatted
            ("time", ["", ""], "String"),
            ("user", [142, 217], "String"),  # text roles are String whatever JSON type they came as
            ("query", ["a", None], "Nullable(String)"),
            ("rank", ["1", ""], "String"),  # an empty text is a value, not NULL
            (None, [1, 2], "Int64"),
            (None, [1, 2.5], "Float64"),
            (None, [True, False], "UInt8"),
            (None, [1, "x"], "String"),
            (None, [{"a": 1}], "String"),
            (None, [3, MISSING], "Nullable(Int64)"),
            (None, [None, None], "Nullable(String)"),
        ],
    )
    def test_infer(self, role: str | None, values: list[object], expected: str) -> None:
        assert infer_type(role, values, "auto") == expected

    def test_time_type_option(self) -> None:
        assert infer_type("time", ["2006-03-01 07:17:12"], "String") == "String"
        assert infer_type("time", ["whenever"], "DateTime") == "DateTime"

    def test_create_statement_quotes_names(self) -> None:
        sql = create_statement(
            "`db`.`t`",
            [("Query Time", "QueryTime"), ("a`b", "x")],
            [{"QueryTime": "2006-03-01 07:17:12"}],
            {"QueryTime": "time"},
            "auto",
        )
        assert sql == (
            "CREATE TABLE IF NOT EXISTS `db`.`t` (`Query Time` DateTime, `a\\`b` Nullable(String)) "
            "ENGINE = MergeTree ORDER BY tuple()"
        )
        assert quote("a\\b") == "`a\\\\b`"


class TestConverter:
    @pytest.mark.parametrize(
        ("ch_type", "default", "value", "expected"),
        [
            ("String", "", "text", "text"),
            ("String", "", 5, "5"),
            ("String", "", True, "true"),
            ("String", "", {"a": [1, "é"]}, '{"a":[1,"é"]}'),
            ("String", "", None, OMIT),  # the column's default: ""
            ("Nullable(String)", "", MISSING, None),
            ("LowCardinality(Nullable(String))", "", None, None),
            ("DateTime", "", "2006-03-01 07:17:12", "2006-03-01 07:17:12"),
            ("Nullable(DateTime)", "", "", None),
            ("DateTime", "DEFAULT", "", OMIT),
            ("Int64", "", "7", "7"),  # ClickHouse parses quoted numbers
            ("UInt8", "", True, 1),
            ("Nullable(Float64)", "", " ", None),
            ("Array(String)", "", ["a"], ["a"]),
        ],
    )
    def test_convert(self, ch_type: str, default: str, value: object, expected: object) -> None:
        assert converter(Column("c", ch_type, default))(value) == expected

    @pytest.mark.parametrize("value", ["", None, MISSING])
    def test_empty_into_a_typed_column_without_default_is_refused(self, value: object) -> None:
        """Not silently 0 or 0000-00-00 00:00:00: the row is dead-lettered."""
        with pytest.raises(Reject, match="empty_value_for_typed_column"):
            converter(Column("c", "DateTime"))(value)

    def test_unknown_types_pass_values_as_they_are(self) -> None:
        assert converter(None)(5) == 5 and converter(None)(MISSING) is None


class TestCheckColumns:
    def test_matching(self) -> None:
        cols = {
            "a": Column("a", "String"),
            "b": Column("b", "Nullable(String)"),
            "c": Column("c", "DateTime", "DEFAULT"),
        }
        check_columns("db.t", cols, ["a"])  # b is Nullable, c has a default

    def test_mismatch_names_columns_and_types_only(self) -> None:
        cols = {"AnonID": Column("AnonID", "String"), "extra": Column("extra", "Int64")}
        with pytest.raises(TableMismatch) as err:
            check_columns("db.t", cols, ["AnonID", "Query", "QueryTime"])
        assert str(err.value) == (
            "ClickHouse table db.t does not match the records: the table has no column Query, QueryTime; "
            "no record field fills column extra (not Nullable, no DEFAULT). The table has: AnonID String, "
            "extra Int64. Change the table, or map record fields to its columns with `columns: {column: field}`."
        )


class TestOptions:
    @pytest.mark.parametrize(
        ("options", "key"),
        [
            ({"table": "a.b.c"}, "table"),
            ({"table": "x; DROP TABLE y"}, "table"),
            ({"table": "db.t", "database": "other"}, "database"),
            ({"table": "t", "url": "http://u:p@127.0.0.1:8123"}, "url"),
            ({"table": "t", "password_env": "P", "password_file": "f"}, "password_file"),
            ({"table": "t", "columns": {"c": ""}}, "columns"),
        ],
    )
    def test_cross_field_rules(self, options: dict[str, object], key: str) -> None:
        with pytest.raises(ConfigValueError) as err:
            ClickHouseSinkConfig(**options)
        assert err.value.key == key
        assert "u:p" not in str(err.value)

    def test_database_from_table_or_option(self) -> None:
        assert (ClickHouseSinkConfig(table="db.t").database_name, ClickHouseSinkConfig(table="t").database_name) == (
            "db",
            "default",
        )
        assert ClickHouseSinkConfig(table="t", database="q").database_name == "q"


class TestUnchangedLine:
    """An unchanged JSON line whose values fit their columns as text is sent as it came (no re-encoding)."""

    @staticmethod
    def sink_and_codec() -> tuple[TableWriter, JsonlCodec]:
        """A sink built to check a config (no outbox, no server) that sees the table below when it DESCRIBEs."""
        sink = ClickHouseSink(
            ClickHouseSinkConfig(table="db.t"), BuildContext(config_dir=Path("."), validate_only=True)
        )
        columns = {"AnonID": "String", "Query": "String", "QueryTime": "DateTime", "n": "Nullable(Int64)"}
        table = sink.main
        table.describe = lambda: {k: Column(k, v) for k, v in columns.items()}
        table.prepare()
        return table, JsonlCodec(SchemaConfig(format="jsonl"))

    def test_the_line_itself_or_a_built_row(self) -> None:
        sink, codec = self.sink_and_codec()
        line = '{"Query": "q", "AnonID": "7", "QueryTime": "2006-03-01 07:17:12", "n": "3"}'
        (ev,) = codec.decode_many([line + "\r"], "\n", [])
        assert sink._unchanged_line(ev) == line.encode()
        ev.query = "changed by a filter"
        assert sink._unchanged_line(ev) is None
        for other in (
            '{"AnonID": "7", "Query": "q", "QueryTime": ""}',  # an empty time: NULL or refused, not ""
            '{"AnonID": "7", "Query": "q"}',  # QueryTime (DateTime, no DEFAULT) missing: refused
            '{"AnonID": 7, "Query": "q", "QueryTime": "2006-03-01 07:17:12"}',  # a number into String
            '{"AnonID": "7", "Query": "q", "QueryTime": "2006-03-01 07:17:12", "x": "y"}',  # no such column
        ):
            (ev,) = codec.decode_many([other], "\n", [])
            assert sink._unchanged_line(ev) is None, other
