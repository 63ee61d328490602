"""The ``clickhouse`` sink: rows inserted with ``INSERT INTO <table> FORMAT JSONEachRow`` over HTTP.

**When the table is checked.** At the first batch (``write``), the sink settles which field fills which column
(``columns:``, else the record's own keys: a TSV header's columns, or the keys of the first JSON objects),
creates the database and table when ``create_table`` is set and the table is missing (types inferred: see
:mod:`.schema`), and compares the table (``DESCRIBE TABLE``) with the records: a mismatch raises
:class:`~adapters.clickhouse.schema.TableMismatch` naming the columns (never a value), and the batch is not
acknowledged. When ClickHouse cannot be reached then, the rows go into the outbox as they are, marked, and the
sender does the same check before its first INSERT (a mismatch is then logged and retried: the outbox keeps the
rows until the table is fixed), then **converts the marked rows to the column types at delivery** (a cold start).
A record that cannot become a row is dead-lettered as a whole JSON line (replayable by a JSON-lines ``replay``);
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

import gzip
import json
import threading
import time
import urllib.parse
from collections import Counter
from typing import Any

import structlog

from adapters.clickhouse.config import ClickHouseSinkConfig
from adapters.clickhouse.schema import (
    DATA_ERROR_CODES,
    DATETIME,
    MISSING,
    OMIT,
    ClickHouseError,
    Column,
    Converter,
    Reject,
    TableMismatch,
    check_columns,
    converter,
    create_statement,
    error_code,
    quote,
    record_fields,
    retype,
    role_pairs,
    typed_lines,
)
from sidecar.api import BuildContext, Codec, ConfigValueError, Event, Outbox, SchemaConfig, Sink
from sidecar.netsink import (
    HttpClient,
    LineBatcher,
    PeerAnswer,
    PeerUnavailable,
    basic_auth,
    close_outbox,
    dead_letter_event,
    outbox_stats,
    read_secret,
)

log = structlog.get_logger("querylog.clickhouse")

#: Rows as compact JSON (one encoder for every row; NaN and infinities, which ClickHouse cannot read, refused).
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
#: The most of an answer to DESCRIBE TABLE read (thousands of columns).
DESCRIBE_LIMIT = 16 * 1024 * 1024
#: Records kept from the first batch to infer a table's types from (values in memory only, until it exists).
SAMPLE = 1000
#: Starts a row written before the table's types were known (no JSON line starts so): converted at delivery.
UNTYPED = b"\x00"


class ClickHouseSink(Sink[ClickHouseSinkConfig]):
    """JSONEachRow INSERTs in batches through a durable outbox (see the module docstring)."""

    NAME = "clickhouse"
    Config = ClickHouseSinkConfig
    SUMMARY = "INSERT ... FORMAT JSONEachRow over ClickHouse's HTTP interface, batched, through a durable outbox"

    def __init__(self, config: ClickHouseSinkConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.schema = ctx.schema or SchemaConfig()
        self.pairs = role_pairs(self.schema.roles.mapping())
        self.role_of = {key: role for role, key in self.pairs}
        self.table = f"{quote(config.database_name)}.{quote(config.table_name)}"
        self.table_label = f"{config.database_name}.{config.table_name}"
        user = config.user
        if config.user_env is not None:
            secret = read_secret(ctx, config.user_env, None, "user_env", "user_env", "ClickHouse user")
            assert secret is not None
            user = secret.decode("utf-8")
        password = read_secret(
            ctx, config.password_env, config.password_file, "password_env", "password_file", "ClickHouse password"
        )
        headers = {}
        if user is not None or password is not None:
            headers["Authorization"] = basic_auth(user or "default", password or b"")
        if config.tls_ca_file is not None and not ctx.resolve(config.tls_ca_file).is_file():
            raise ConfigValueError("tls_ca_file", f"no such file: {ctx.resolve(config.tls_ca_file)}")
        self.client = HttpClient(
            config.url,
            timeout=config.timeout_seconds,
            headers=headers,
            ca_file=str(ctx.resolve(config.tls_ca_file)) if config.tls_ca_file else None,
        )
        self.insert_target = self._target(f"INSERT INTO {self.table} FORMAT JSONEachRow")
        self.insert_headers = {"Content-Type": "application/json"}
        if config.compression == "gzip":
            self.insert_headers["Content-Encoding"] = "gzip"
        #: (column, field) when the columns are fixed (``columns:`` or a TSV header); None: each record's keys.
        self.mapping: tuple[tuple[str, str], ...] | None = None
        #: The columns the records fill, settled at the first batch (a created table gets them); ``required``:
        #: those every record of the first batch fills (the table must have them).
        self.filled: tuple[str, ...] | None = None
        self.required: tuple[str, ...] = ()
        self.sample: list[dict[str, Any]] = []
        #: The table as DESCRIBE showed it; None: not known yet.
        self.described: dict[str, Column] | None = None
        self.converters: dict[str, Converter] = {}
        self._typed_columns: frozenset[str] = frozenset()
        self._time_columns: frozenset[str] = frozenset()
        self._text_columns: frozenset[str] = frozenset()
        self._must_have: tuple[str, ...] = ()
        #: The table was compared with the records' columns (and matched).
        self.checked = False
        self._next_check = 0.0  # when write may try to reach ClickHouse again after it could not
        self._prepare_lock = threading.Lock()
        #: Counters (no values): rows dead-lettered by reason, inserts refused by error code.
        self.counts: Counter[str] = Counter()
        self.outbox: Outbox | None = None
        self.batcher: LineBatcher | None = None
        if not ctx.validate_only and ctx.state is not None:
            place = f"{self.client.host}_{self.client.port}_{config.database_name}_{config.table_name}"
            self.outbox = ctx.outbox(f"clickhouse_{place}", config)
            self.batcher = LineBatcher(self.outbox, config.batch_max_events, config.batch_max_bytes)
            self.outbox.start(self.send)  # batches an earlier run left go out now

    def _target(self, query: str) -> str:
        base = self.client.path
        extra = f"&{self.client.query}" if self.client.query else ""
        return f"{base}?{urllib.parse.urlencode({'query': query})}{extra}"

    # ---- the table ------------------------------------------------------------------------------
    def _query(self, sql: str, doing: str) -> PeerAnswer:
        """Run one statement (sent as the body); :class:`ClickHouseError` on an error answer."""
        target = self.client.path + (f"?{self.client.query}" if self.client.query else "")
        answer = self.client.request(
            "POST", target, sql.encode("utf-8"), {"Content-Type": "text/plain"}, keep=DESCRIBE_LIMIT
        )
        if answer.status != 200:
            raise ClickHouseError(self.client.peer, answer.status, error_code(answer), doing)
        return answer

    def describe(self) -> dict[str, Column] | None:
        """The table's columns (None: no such table or database)."""
        try:
            answer = self._query(f"DESCRIBE TABLE {self.table} FORMAT JSONEachRow", "DESCRIBE TABLE")
        except ClickHouseError as exc:
            if exc.code in (60, 81):  # UNKNOWN_TABLE, UNKNOWN_DATABASE
                return None
            raise
        columns: dict[str, Column] = {}
        for line in answer.body.decode("utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                columns[row["name"]] = Column(row["name"], row["type"], row.get("default_type", ""))
        return columns

    def _settle_mapping(self, events: list[Event]) -> None:
        """Which field fills which column, from the config or the first batch's records."""
        if self.config.columns is not None:
            self.mapping = tuple(self.config.columns.items())
        else:
            codec = events[0].codec
            columns = getattr(codec, "columns", None)
            if isinstance(columns, tuple) and isinstance(events[0].record, list):  # TSV: the header's columns
                self.mapping = tuple((c, c) for c in columns)
        self.sample = [record_fields(ev, self.pairs) for ev in events[:SAMPLE]]
        if self.mapping is not None:
            self.filled = self.required = tuple(c for c, _ in self.mapping)
        else:  # JSON objects: a key only some records have is their problem (field_not_in_table), not the table's
            keys: dict[str, None] = {}
            for row in self.sample:
                keys.update(dict.fromkeys(row))
            self.filled = tuple(keys)
            self.required = tuple(k for k in keys if all(k in row for row in self.sample))

    @property
    def ready(self) -> bool:
        """The table is known and, once the records' columns are settled, checked against them."""
        return self.described is not None and (self.filled is None or self.checked)

    def prepare(self) -> None:
        """Create the table when asked and missing, DESCRIBE it and compare it with the records' columns (once
        they are settled): :class:`TableMismatch`, :class:`ClickHouseError` or :class:`PeerUnavailable`."""
        with self._prepare_lock:
            if self.described is None:
                described = self.describe()
                if described is None:
                    described = self._create()
                self.converters = {name: converter(col) for name, col in described.items()}
                #: columns a text value goes into unconverted (a typed one: when not empty), and those a record
                #: cannot leave out (not String, not Nullable, no DEFAULT): the unchanged-line fast path
                self._typed_columns = frozenset(n for n, c in described.items() if c.kind in ("time", "number"))
                self._time_columns = frozenset(n for n, c in described.items() if c.kind == "time")
                self._text_columns = self._typed_columns | {n for n, c in described.items() if c.kind == "string"}
                self._must_have = tuple(
                    n for n, c in described.items() if c.kind != "string" and not c.nullable and not c.default_kind
                )
                self.described = described
            if self.filled is not None and not self.checked:
                check_columns(self.table_label, self.described, self.required, self.filled)
                self.checked = True
                self.sample = []

    def _create(self) -> dict[str, Column]:
        if not self.config.create_table:
            raise TableMismatch(
                f"ClickHouse table {self.table_label} does not exist: create it, or set create_table: true"
            )
        if self.filled is None:  # batches of an earlier run, and no record yet to infer the columns from
            raise TableMismatch(f"ClickHouse table {self.table_label} does not exist yet (waiting for records)")
        columns = self.mapping if self.mapping is not None else tuple((k, k) for k in self.filled)
        self._query(f"CREATE DATABASE IF NOT EXISTS {quote(self.config.database_name)}", "CREATE DATABASE")
        self._query(
            create_statement(self.table, columns, self.sample, self.role_of, self.config.time_type), "CREATE TABLE"
        )
        log.info("clickhouse_table_created", table=self.table_label, columns=len(columns))
        described = self.describe()
        if described is None:
            raise TableMismatch(f"ClickHouse table {self.table_label} is missing right after CREATE TABLE")
        return described

    # ---- the runtime's side ---------------------------------------------------------------------
    def start(self, header: str | None, codec: Codec | None) -> None:
        """Nothing to do before the first batch: the table is checked then, with the records at hand."""

    def write(self, events: list[Event]) -> None:
        if not events:
            return
        if self.batcher is None:
            raise RuntimeError("the clickhouse sink was built to check a config only")
        if self.filled is None:
            self._settle_mapping(events)
        if not self.ready and time.monotonic() >= self._next_check:
            try:
                self.prepare()  # a mismatch or an error answer refuses the batch (the source does not acknowledge)
            except PeerUnavailable as exc:  # not reachable: the rows wait in the outbox, the sender checks first
                self._next_check = time.monotonic() + self.config.retry_max_seconds  # not a timeout per batch
                log.warning("clickhouse_unreachable", table=self.table_label, error=str(exc))
        add = self.batcher.add
        encode = _JSON.encode
        typed = self.described is not None  # (set once, by the sender thread too: read once per batch)
        for ev in events:
            try:
                line = self._unchanged_line(ev) if typed else None
                if line is None:
                    line = encode(self._row(ev, typed)).encode("utf-8")
                    if not typed:
                        line = UNTYPED + line
            except Reject as exc:
                self._reject(ev, exc.reason, exc.field)
                continue
            except (TypeError, ValueError):  # a value JSON cannot carry, a lone surrogate
                self._reject(ev, "unencodable_record")
                continue
            add(line)
            self.written += 1

    def _unchanged_line(self, ev: Event) -> bytes | None:
        """The event's own JSON line when it is its row as it stands: the record is unchanged (the identity rule),
        each key is a column, each value text that goes into its column unconverted (not empty for a typed one),
        and every column the record lacks may be left out. Else None (the row is built value by value)."""
        raw: str | None = ev.raw
        record, codec = ev.record, ev.codec
        if raw is None or type(record) is not dict or self.mapping is not None or self.described is None:
            return None
        text_line: str = raw  # (mypy narrows ``raw`` to Any by the identity check below)
        if codec is None or codec.encode(ev) is not raw:
            return None
        text, typed, times = self._text_columns, self._typed_columns, self._time_columns
        for key, value in record.items():
            if type(value) is not str or key not in text or (key in typed and not value.strip()):
                return None
            if key in times and DATETIME.fullmatch(value) is None:
                return None  # an RFC 3339 time, say: converted
        for column in self._must_have:
            if column not in record:
                return None
        return (text_line[:-1] if text_line.endswith("\r") else text_line).encode("utf-8")

    def _row(self, ev: Event, typed: bool) -> dict[str, Any]:
        """The row of ``ev``: converted to the column types when ``typed`` (the table is known), else its values
        as they are (converted at delivery, :meth:`_retype`)."""
        fields = record_fields(ev, self.pairs)
        if self.mapping is not None:
            converters = self.converters if typed else {}
            row: dict[str, Any] = {}
            for column, field in self.mapping:
                value = converters.get(column, converter(None))(fields.get(field, MISSING))
                if value is not OMIT:
                    row[column] = value
            return row
        return retype(self.converters, fields) if typed else fields

    def _reject(self, ev: Event, reason: str, field: str | None = None) -> None:
        self.counts[reason] += 1
        try:  # the whole record, replayable as a JSON line
            record = json.dumps(record_fields(ev, self.pairs), ensure_ascii=False, separators=(",", ":"))
            record.encode("utf-8")
        except (TypeError, ValueError):  # a value JSON cannot carry, a lone surrogate: its roles, as text
            dead_letter_event(self.ctx.dead_letters, reason, f"sink:{self.NAME}", ev)
            return
        self._dead_letter(reason, record, field)

    def _dead_letter(self, reason: str, record: str, field: str | None) -> None:
        if self.ctx.dead_letters is not None:
            self.ctx.dead_letters.add(reason, f"sink:{self.NAME}", None, record, field=field)

    def flush(self) -> None:
        if self.batcher is not None:
            self.batcher.flush()  # Backpressure goes to the runtime: the batch is not acknowledged

    # ---- the sender's side ------------------------------------------------------------------------
    def send(self, payload: bytes) -> None:
        """INSERT one batch (called by the outbox's sender thread); raises to have it retried."""
        if not self.ready:
            try:
                self.prepare()
            except TableMismatch as exc:
                log.error("clickhouse_table_mismatch", table=self.table_label, problem=str(exc))
                raise
        lines = payload.rstrip(b"\n").split(b"\n")
        if any(line[:1] == UNTYPED for line in lines):
            lines = self._typed_lines(lines)
        if lines:
            self._insert(lines)

    def _typed_lines(self, lines: list[bytes]) -> list[bytes]:
        """Rows written before the table's types were known, converted now; one that cannot be is dead-lettered
        (its record as it came: replayable), the others go on."""
        out, refused = typed_lines(self.converters, lines, UNTYPED, _JSON.encode)
        for reason, record, field in refused:
            self.counts[reason] += 1
            self._dead_letter(reason, record, field)
        if refused and self.ctx.dead_letters is not None:
            self.ctx.dead_letters.flush()
        return out

    def _insert(self, lines: list[bytes]) -> None:
        body = b"\n".join(lines) + b"\n"
        if self.config.compression == "gzip":
            body = gzip.compress(body, 6)
        answer = self.client.request("POST", self.insert_target, body, self.insert_headers)
        if answer.status == 200:
            return
        code = error_code(answer)
        if code not in DATA_ERROR_CODES:
            raise ClickHouseError(self.client.peer, answer.status, code, "INSERT")
        if len(lines) == 1:  # this row is what ClickHouse cannot take: dead-lettered, the others go on
            self.counts["rejected_by_peer"] += 1
            self.counts[f"rows_refused_code_{code}"] += 1
            if self.ctx.dead_letters is not None:
                self.ctx.dead_letters.add("rejected_by_peer", f"sink:{self.NAME}", None, lines[0].decode("utf-8"))
                self.ctx.dead_letters.flush()
            log.warning("clickhouse_row_rejected", table=self.table_label, status=answer.status, code=code)
            return
        half = len(lines) // 2
        self._insert(lines[:half])
        self._insert(lines[half:])

    def stats(self) -> dict[str, Any]:
        """The outbox's counters and this sink's dead letters (counts only)."""
        return outbox_stats(self.counts, self.outbox)

    def close(self) -> None:
        """Put what is buffered into the outbox, keep inserting for ``close_drain_seconds``, stop the sender."""
        if self.outbox is None:
            return
        outbox, self.outbox = self.outbox, None
        left = close_outbox(outbox, self.batcher, self.config.close_drain_seconds, self.client)
        if left is not None:
            log.warning(
                "clickhouse_sink_closed_with_pending", table=self.table_label, batches=left.batches, events=left.events
            )
