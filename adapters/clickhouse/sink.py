"""The ``clickhouse`` sink: rows inserted with ``INSERT INTO <table> FORMAT JSONEachRow`` over HTTP.

**Which table.** One, ``table``, for every record (:class:`RecordLayout`: its own keys or ``columns:``). With
``schema.format: ubi`` two, in the UBI schema: query records into ``table``, event records into ``events_table``
(:mod:`.ubi`). Each table is a :class:`~adapters.clickhouse.table.TableWriter` with its own outbox and sender;
what is said below holds for each.

**When the table is checked.** At the first batch (``write``), the sink settles which field fills which column
(``columns:``, else the record's own keys: a TSV header's columns, or the keys of the first JSON objects),
creates the database and table when ``create_table`` is set and the table is missing (types inferred: see
:mod:`.schema`; a key ClickHouse cannot take as a column name gets no column, :func:`.schema.column_name_ok`, and
a CREATE TABLE refused for the keys is tried with the keys every record has, then dropped: the batch is
dead-lettered ``columns_not_creatable`` and the next one settles the columns anew), and compares the table
(``DESCRIBE TABLE``) with the records: a mismatch raises
:class:`~adapters.clickhouse.schema.TableMismatch` naming the columns (never a value), and the batch is not
acknowledged. When ClickHouse cannot be reached then, the rows go into the outbox as they are, marked, and the
sender does the same check before its first INSERT (a mismatch is then logged and retried: the outbox keeps the
rows until the table is fixed), then **converts the marked rows to the column types at delivery** (a cold start).
A record that cannot become a row is dead-lettered as a whole JSON line (replayable by a JSON-lines ``replay``;
a UBI record as itself, replayable with ``format: ubi``);
a ``field_not_in_table`` dead letter names the key (``field``; never a value).

**Delivery.** ``flush`` puts the batches into the sink's durable outbox (``ctx.outbox``, the contract's
:class:`~sidecar.api.Outbox`) inside the runtime's transaction; the outbox's sender thread inserts them in
order. One INSERT of up to ``batch_max_events`` rows is one block, so it is taken whole or not at all. An answer
whose ClickHouse error code says the *data* is wrong (cannot parse a value, unknown field...) splits the batch
in halves and inserts each, down to the single rows ClickHouse refuses, which are dead-lettered
(``rejected_by_peer``): a bad row never takes the good rows of its batch with it. Every other failure
(connection, timeout, 5xx without a data error, authentication, a missing table) keeps the batch and retries it
with backoff; meanwhile the outbox fills and then the sources stop acknowledging (backpressure). Logs carry the
HTTP status and ClickHouse's error code, never its message (which may quote a row).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

from adapters.clickhouse.config import ClickHouseSinkConfig
from adapters.clickhouse.schema import MAP_HINT, create_statement, record_fields, role_pairs
from adapters.clickhouse.table import TableWriter
from adapters.clickhouse.ubi import UbiLayout, ubi_kind
from sidecar.api import BuildContext, Codec, ConfigValueError, Event, Outbox, SchemaConfig, Sink
from sidecar.netsink import HttpClient, basic_auth, outbox_stats, read_secret


class RecordLayout:
    """The records' own columns: ``columns:``, a TSV header's columns, or each JSON object's keys; the role values
    under ``schema.roles``' keys; a created table typed from the first batch (:func:`.schema.create_statement`)."""

    hint = MAP_HINT

    def __init__(self, config: ClickHouseSinkConfig, schema: SchemaConfig) -> None:
        self.config = config
        self.pairs = role_pairs(schema.roles.mapping())
        self.role_of = {key: role for role, key in self.pairs}

    def fields(self, event: Event) -> dict[str, Any]:
        return record_fields(event, self.pairs)

    def mapping(self, events: Sequence[Event]) -> tuple[tuple[str, str], ...] | None:
        if self.config.columns is not None:
            return tuple(self.config.columns.items())
        columns = getattr(events[0].codec, "columns", None)
        if isinstance(columns, tuple) and isinstance(events[0].record, list):  # TSV: the header's columns
            return tuple((c, c) for c in columns)
        return None

    def known(self) -> tuple[str, ...]:
        return ()

    def create(self, table: str, columns: Sequence[tuple[str, str]], sample: Sequence[dict[str, Any]]) -> str:
        return create_statement(table, columns, sample, self.role_of, self.config.time_type)


class ClickHouseSink(Sink[ClickHouseSinkConfig]):
    """JSONEachRow INSERTs in batches through a durable outbox per table (see the module docstring)."""

    NAME = "clickhouse"
    Config = ClickHouseSinkConfig
    SUMMARY = "INSERT ... FORMAT JSONEachRow over ClickHouse's HTTP interface, batched, through a durable outbox"

    def __init__(self, config: ClickHouseSinkConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.schema = ctx.schema or SchemaConfig()
        ubi = self.schema.format == "ubi"
        _check_layout(config, ubi)
        self.table_label = f"{config.database_name}.{config.table_name}"
        headers = _auth_headers(config, ctx)
        if config.tls_ca_file is not None and not ctx.resolve(config.tls_ca_file).is_file():
            raise ConfigValueError("tls_ca_file", f"no such file: {ctx.resolve(config.tls_ca_file)}")
        ca_file = str(ctx.resolve(config.tls_ca_file)) if config.tls_ca_file else None

        def client() -> HttpClient:  # one a table: each table's outbox sends from a thread of its own
            return HttpClient(config.url, timeout=config.timeout_seconds, headers=headers, ca_file=ca_file)

        #: Counters (no values): rows dead-lettered by reason, inserts refused by error code (every table's).
        self.counts: Counter[str] = Counter()
        database, name = config.database_name, config.table_name
        #: The table of the records (with ``format: ubi``: of the query records), and of the UBI event records.
        self.main: TableWriter
        self.events: TableWriter | None = None
        if not ubi:
            self.main = TableWriter(
                config, ctx, client(), database, name, RecordLayout(config, self.schema), self.counts
            )
            self.writers: tuple[TableWriter, ...] = (self.main,)
        else:
            self.main = TableWriter(config, ctx, client(), database, name, UbiLayout(queries=True), self.counts)
            events_db, events_name = config.events_table_names
            self.events = TableWriter(config, ctx, client(), events_db, events_name, UbiLayout(False), self.counts)
            self.writers = (self.main, self.events)

    @property
    def outbox(self) -> Outbox | None:
        """The outbox of the table whose oldest undelivered batch is the oldest (:attr:`main`'s when none waits):
        the one whose age the runtime's metrics report."""
        boxes = [w.outbox for w in self.writers if w.outbox is not None]
        return max(boxes, key=_oldest_age) if boxes else None

    def start(self, header: str | None, codec: Codec | None) -> None:
        """Nothing to do before the first batch: the table is checked then, with the records at hand."""

    def write(self, events: list[Event]) -> None:
        if self.events is None:
            self.main.write(events)
        else:
            self._write_ubi(events)
        self.written = sum(w.written for w in self.writers)

    def _write_ubi(self, events: list[Event]) -> None:
        """Query records into the main table, event records into the events table; both tables are checked
        before a row of the batch goes into either (a refused batch leaves nothing behind to go twice)."""
        assert self.events is not None
        queries: list[Event] = []
        clicks: list[Event] = []
        neither: list[Event] = []
        for ev in events:
            kind = ubi_kind(ev)
            (neither if kind is None else queries if kind else clicks).append(ev)
        queries = self.main.check(queries)
        clicks = self.events.check(clicks)
        for ev in neither:
            self.main.reject(ev, "not_ubi_record")
        self.main.add(queries)
        self.events.add(clicks)

    def flush(self) -> None:
        for writer in self.writers:
            writer.flush()  # Backpressure goes to the runtime: the batch is not acknowledged

    def stats(self) -> dict[str, Any]:
        """The outboxes' counters (summed over the tables) and this sink's dead letters (counts only)."""
        out = outbox_stats(self.counts, self.main.outbox)
        for writer in self.writers[1:]:
            for key, value in outbox_stats({}, writer.outbox).items():
                if isinstance(value, dict):
                    merged = Counter(out.get(key, {}))
                    merged.update(value)
                    out[key] = dict(merged)
                elif isinstance(value, int):
                    out[key] = out.get(key, 0) + value
        return out

    def close(self) -> None:
        """Put what is buffered into the outboxes, keep inserting for ``close_drain_seconds``, stop the senders."""
        for writer in self.writers:
            writer.close()


def _oldest_age(outbox: Outbox) -> float:
    age = getattr(outbox, "oldest_age", None)
    return float(age()) if callable(age) else 0.0


def _check_layout(config: ClickHouseSinkConfig, ubi: bool) -> None:
    """The options that depend on the schema's format: ``events_table`` with ``format: ubi`` only, and there
    neither ``columns`` nor ``time_type`` (the UBI schema fixes the columns and their types)."""
    if not ubi:
        if config.events_table is not None:
            raise ConfigValueError("events_table", "only with schema.format: ubi (the table of UBI event records)")
        return
    if config.events_table is None:
        raise ConfigValueError(
            "events_table",
            "required with schema.format: ubi: query records go into `table`, event records (clicks...) into "
            "`events_table` (as OpenSearch's ubi_queries and ubi_events)",
        )
    if config.columns is not None:
        raise ConfigValueError("columns", "not with schema.format: ubi (the columns are the UBI schema's keys)")
    if config.time_type != "auto":
        raise ConfigValueError("time_type", "not with schema.format: ubi (timestamp is kept as its text)")
    if config.events_table_names == (config.database_name, config.table_name):
        raise ConfigValueError("events_table", "must be another table than `table`")


def _auth_headers(config: ClickHouseSinkConfig, ctx: BuildContext) -> dict[str, str]:
    """The Authorization header of ``user``/``user_env`` and the password, when either is set."""
    user = config.user
    if config.user_env is not None:
        secret = read_secret(ctx, config.user_env, None, "user_env", "user_env", "ClickHouse user")
        assert secret is not None
        user = secret.decode("utf-8")
    password = read_secret(
        ctx, config.password_env, config.password_file, "password_env", "password_file", "ClickHouse password"
    )
    if user is None and password is None:
        return {}
    return {"Authorization": basic_auth(user or "default", password or b"")}
