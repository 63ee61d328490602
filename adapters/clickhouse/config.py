"""Options of the ``clickhouse`` sink."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from adapters.clickhouse.schema import column_name_ok
from sidecar.api import ConfigValueError, OutboxOptions, SinkConfig, check_env_name, option

#: Database and table names the sink accepts (ClickHouse allows more when quoted; these need no thought).
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class ClickHouseSinkConfig(OutboxOptions, SinkConfig):
    """Insert events into a ClickHouse table over its HTTP interface (`INSERT ... FORMAT JSONEachRow`), in
    batches through a durable outbox: acknowledged upstream once in the outbox, inserted (again) until
    ClickHouse takes them. A row ClickHouse cannot parse is dead-lettered (`rejected_by_peer`) without the
    rest of its batch."""

    table: str = option(
        doc="Table to insert into: `name` or `database.name`. With `schema.format: ubi`: the table of the UBI query "
        "records (`ubi_queries`, say)."
    )
    events_table: str | None = option(
        None,
        "With `schema.format: ubi` (and only then; required): the table of the UBI event records (clicks, "
        "add-to-cart...), `name` or `database.name` (default database: `table`'s). Each record goes into its table "
        "in the UBI schema, one column per top-level key, nested objects as JSON text (docs/STACK.md, UBI).",
    )
    url: str = option("http://127.0.0.1:8123", "ClickHouse's HTTP interface, http(s)://host:port.")
    database: str | None = option(None, "Database of the table, instead of `table: database.name` (default: default).")
    user: str | None = option(None, "ClickHouse user (not a secret; default: ClickHouse's `default` user).")
    user_env: str | None = option(None, "Environment variable holding the user name (instead of user).")
    password_env: str | None = option(None, "Environment variable holding the user's password.", secret_ref=True)
    password_file: str | None = option(
        None,
        "File holding the user's password (instead of password_env; relative to the config file).",
        secret_ref=True,
    )
    columns: Mapping[str, str] | None = option(
        None,
        "Which record field fills each column, `{column: field}` (other fields are not written). Default: the "
        "record's own keys (TSV: the header's columns; JSON lines: each object's keys, and a record with a key "
        "the table lacks is dead-lettered as `field_not_in_table`).",
    )
    create_table: bool = option(
        False,
        "Create the database and table when missing, from the first batch: String for the text roles (user, "
        "query, rank, url) and for text fields, DateTime for the time role when every time looks like "
        "`2006-03-01 07:17:12` (the AOL format, which ClickHouse 18.16 reads and writes back unchanged; see "
        "time_type), Int64/Float64/UInt8 for JSON numbers and booleans, Nullable where a value is missing or "
        "null (for DateTime: also empty); `ENGINE = MergeTree ORDER BY tuple()`. With `schema.format: ubi`: "
        "both tables in the UBI schema (timestamp as its text plus a DateTime `parsed_timestamp` computed by "
        "ClickHouse, attributes as JSON text, hit ids `Array(String)`), each from its first batch. A key ClickHouse "
        "cannot take as a column name (empty, over 246 bytes as ClickHouse names its files, a MergeTree virtual "
        "column such as `_part`) gets no column: its records are dead-lettered `field_not_in_table`.",
    )
    time_type: Literal["auto", "DateTime", "String"] = option(
        "auto",
        "With create_table: the time role's column type (auto: DateTime when every time fits it; not with "
        "`format: ubi`).",
    )
    batch_max_events: int = option(10_000, "Rows per INSERT at most.", min=1, max=1_000_000)
    batch_max_bytes: int = option(
        8 * 1024 * 1024, "Bytes per INSERT (before compression) at most; a single larger row goes alone.", min=1024
    )
    compression: Literal["none", "gzip"] = option("none", "gzip: compress each INSERT body.")
    timeout_seconds: float = option(30.0, "Seconds to wait for a connection and for ClickHouse's answer.", gt=0)
    tls_ca_file: str | None = option(None, "PEM CA certificate(s) for an https url (default: the system's).")

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigValueError("url", "must be http://host:port or https://host:port")
        if parts.username is not None or parts.password is not None:
            raise ConfigValueError("url", "must not carry credentials (not shown): use user and password_env/_file")
        names = self.table.split(".")
        if len(names) > 2 or not all(IDENTIFIER.fullmatch(n) for n in names):
            raise ConfigValueError(
                "table", f"must be `name` or `database.name` (letters, digits, _), got {self.table!r}"
            )
        if self.events_table is not None:
            events = self.events_table.split(".")
            if len(events) > 2 or not all(IDENTIFIER.fullmatch(n) for n in events):
                raise ConfigValueError(
                    "events_table", f"must be `name` or `database.name` (letters, digits, _), got {self.events_table!r}"
                )
        if len(names) == 2 and self.database is not None:
            raise ConfigValueError("database", "Set the database in `table: database.name` or in database, not both")
        if self.database is not None and not IDENTIFIER.fullmatch(self.database):
            raise ConfigValueError("database", f"must be letters, digits and _, got {self.database!r}")
        if self.user is not None and self.user_env is not None:
            raise ConfigValueError("user_env", "Set user or user_env, not both")
        if self.password_env is not None and self.password_file is not None:
            raise ConfigValueError("password_file", "Set password_env or password_file, not both")
        check_env_name("user_env", self.user_env)
        check_env_name("password_env", self.password_env)
        if self.columns is not None:
            if not self.columns:
                raise ConfigValueError("columns", "map at least one column (or leave columns out)")
            for column, fld in self.columns.items():
                if not column or "\n" in column or not fld:
                    raise ConfigValueError("columns", f"column {column!r}: needs a name and a record field")
                if self.create_table and not column_name_ok(column):
                    raise ConfigValueError(
                        "columns", f"column {column!r}: ClickHouse cannot create it (too long, or a virtual column)"
                    )
        super().__post_init__()

    @property
    def database_name(self) -> str:
        names = self.table.split(".")
        return names[0] if len(names) == 2 else (self.database or "default")

    @property
    def table_name(self) -> str:
        return self.table.split(".")[-1]

    @property
    def events_table_names(self) -> tuple[str, str]:
        """``(database, name)`` of ``events_table`` (the database of ``table`` when it names none)."""
        names = (self.events_table or "").split(".")
        return (names[0], names[1]) if len(names) == 2 else (self.database_name, names[0])
