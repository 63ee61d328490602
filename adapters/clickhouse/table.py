"""One ClickHouse table the sink writes: its columns settled and checked (created when asked), its rows batched into
a durable outbox, its INSERTs. The sink has one (``format: ubi``: two, queries and events; :mod:`.ubi`).

What the records are and which columns they fill is the :class:`Layout`'s: the records' own keys or ``columns:``
(:class:`~adapters.clickhouse.sink.RecordLayout`), or the UBI schema (:class:`~adapters.clickhouse.ubi.UbiLayout`).
"""

from __future__ import annotations

import gzip
import json
import threading
import time
import urllib.parse
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol

import structlog

from adapters.clickhouse.config import ClickHouseSinkConfig
from adapters.clickhouse.fastpath import FastPath
from adapters.clickhouse.schema import (
    CREATE_DATA_CODES,
    DATA_ERROR_CODES,
    MISSING,
    OMIT,
    ClickHouseError,
    Column,
    ColumnsRefused,
    Converter,
    Reject,
    TableMismatch,
    check_columns,
    column_name_ok,
    converter,
    error_code,
    quote,
    retype,
    typed_lines,
)
from sidecar.api import BuildContext, Event, Outbox
from sidecar.netsink import HttpClient, LineBatcher, PeerAnswer, PeerUnavailable, close_outbox, dead_letter_event

log = structlog.get_logger("querylog.clickhouse")

#: Rows as compact JSON (one encoder for every row; NaN and infinities, which ClickHouse cannot read, refused).
_JSON = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False)
#: The most of an answer to DESCRIBE TABLE read (thousands of columns).
DESCRIBE_LIMIT = 16 * 1024 * 1024
#: Records kept from the first batch to infer a table's types from (values in memory only, until it exists).
SAMPLE = 1000
#: Starts a row written before the table's types were known (no JSON line starts so): converted at delivery.
UNTYPED = b"\x00"


class Layout(Protocol):
    """What a table's records are: their fields by name, which columns they fill, the table ``create_table``
    makes."""

    #: What a mismatch message suggests (never a value).
    hint: str

    def fields(self, event: Event) -> dict[str, Any]:
        """The record's fields by name (the role values as the chain left them); :class:`Reject` when it has
        none this table can take."""
        ...

    def mapping(self, events: Sequence[Event]) -> tuple[tuple[str, str], ...] | None:
        """``(column, field)`` when the columns are fixed; None: each record's keys are its columns."""
        ...

    def known(self) -> tuple[str, ...]:
        """Columns the records fill besides the keys of the first batch (in table order)."""
        ...

    def create(self, table: str, columns: Sequence[tuple[str, str]], sample: Sequence[dict[str, Any]]) -> str:
        """``CREATE TABLE IF NOT EXISTS`` for the settled ``columns`` ((column, field)) and the sampled rows."""
        ...


class TableWriter:
    """Rows of one table: settled at the first batch, JSONEachRow lines into the table's outbox, INSERTed by its
    sender (see :mod:`adapters.clickhouse.sink` for when the table is checked and how a bad row is handled)."""

    def __init__(
        self,
        config: ClickHouseSinkConfig,
        ctx: BuildContext,
        client: HttpClient,
        database: str,
        name: str,
        layout: Layout,
        counts: Counter[str],
    ) -> None:
        self.config = config
        self.ctx = ctx
        self.client = client
        self.layout = layout
        self.counts = counts  # the sink's (shared by its tables): dead letters by reason, refusals by code
        self.database = quote(database)
        self.table = f"{self.database}.{quote(name)}"
        self.table_label = f"{database}.{name}"
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
        self.fast: FastPath | None = None  # set with described
        #: The table was compared with the records' columns (and matched).
        self.checked = False
        self._next_check = 0.0  # when write may try to reach ClickHouse again after it could not
        self._prepare_lock = threading.Lock()
        self.written = 0
        self.outbox: Outbox | None = None
        self.batcher: LineBatcher | None = None
        if not ctx.validate_only and ctx.state is not None:
            place = f"{client.host}_{client.port}_{database}_{name}"
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
        """Which field fills which column, from the layout and the first batch's records."""
        self.mapping = self.layout.mapping(events)
        sample = []
        for ev in events[:SAMPLE]:
            try:
                sample.append(self.layout.fields(ev))
            except Reject:
                continue  # dead-lettered by write
        self.sample = sample
        if self.mapping is not None:
            self.filled = self.required = tuple(c for c, _ in self.mapping)
        else:  # JSON objects: a key only some records have is their problem (field_not_in_table), not the table's
            keys: dict[str, None] = dict.fromkeys(self.layout.known())
            for row in self.sample:
                keys.update(dict.fromkeys(row))
            # a key ClickHouse cannot take as a column (empty...) gets none: its records are field_not_in_table
            self.filled = tuple(k for k in keys if column_name_ok(k))
            self.required = tuple(k for k in self.filled if self.sample and all(k in row for row in self.sample))

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
                computed = [n for n, c in described.items() if c.default_kind in ("MATERIALIZED", "ALIAS")]
                for name in computed:  # ClickHouse computes them: no row may carry them (field_not_in_table)
                    del described[name]
                self.converters = {name: converter(col) for name, col in described.items()}
                self.fast = FastPath.of(described)
                self.described = described
            if self.filled is not None and not self.checked:
                check_columns(self.table_label, self.described, self.required, self.filled, self.layout.hint)
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
        bad = [str(i + 1) for i, (c, _) in enumerate(columns) if not column_name_ok(c)]
        if bad:  # a TSV header's (JSON keys are left out when settled, `columns:` checked with the config)
            raise TableMismatch(
                f"ClickHouse table {self.table_label} cannot be created: column {', '.join(bad)} of the records "
                f"has a name ClickHouse cannot take (empty, too long, a MergeTree virtual column). {self.layout.hint}"
            )
        self._query(f"CREATE DATABASE IF NOT EXISTS {self.database}", "CREATE DATABASE")
        known = (*self.required, *self.layout.known())
        narrow = tuple(c for c in columns if c[0] in known)  # what every record needs: the others' own keys left out
        for attempt in (columns, narrow) if narrow and len(narrow) < len(columns) else (columns,):
            try:
                self._query(self.layout.create(self.table, attempt, self.sample), "CREATE TABLE")
                break
            except ClickHouseError as exc:
                if exc.code not in CREATE_DATA_CODES:
                    raise
                refused = exc
        else:  # the records' keys cannot be columns: not kept, the next batch starts over
            self.filled, self.mapping, self.required, self.sample = None, None, (), []
            raise ColumnsRefused(self.client.peer, refused.status, refused.code, "CREATE TABLE")
        log.info(
            "clickhouse_table_created",
            table=self.table_label,
            columns=len(attempt),
            left_out=len(columns) - len(attempt),
        )
        described = self.describe()
        if described is None:
            raise TableMismatch(f"ClickHouse table {self.table_label} is missing right after CREATE TABLE")
        return described

    # ---- the runtime's side ---------------------------------------------------------------------
    def write(self, events: list[Event]) -> None:
        """The events' rows into the batcher; a record that cannot be a row is dead-lettered."""
        self.add(self.check(events))

    def check(self, events: list[Event]) -> list[Event]:
        """Settle the columns from the first batch and check the table (create it): :class:`TableMismatch` or
        :class:`ClickHouseError` refuses the batch before any of its rows is added (the source does not
        acknowledge it); ClickHouse unreachable is no refusal (the rows wait in the outbox). The events to
        :meth:`add`: all, or none when ClickHouse refuses every set of columns their keys ask for
        (:class:`ColumnsRefused`: each is dead-lettered ``columns_not_creatable``, the next batch starts over)."""
        if not events:
            return events
        if self.batcher is None:
            raise RuntimeError("the clickhouse sink was built to check a config only")
        if self.filled is None:
            self._settle_mapping(events)
        if not self.ready and time.monotonic() >= self._next_check:
            try:
                self.prepare()
            except PeerUnavailable as exc:  # not reachable: the rows wait in the outbox, the sender checks first
                self._next_check = time.monotonic() + self.config.retry_max_seconds  # not a timeout per batch
                log.warning("clickhouse_unreachable", table=self.table_label, error=str(exc))
            except ColumnsRefused as exc:
                log.warning("clickhouse_columns_refused", table=self.table_label, code=exc.code, records=len(events))
                for ev in events:
                    self.reject(ev, "columns_not_creatable")
                return []
        return events

    def add(self, events: list[Event]) -> None:
        """The events' rows into the batcher (after :meth:`check`); a record that cannot be a row is
        dead-lettered."""
        if not events or self.batcher is None:
            return
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
                self.reject(ev, exc.reason, exc.field)
                continue
            except (TypeError, ValueError):  # a value JSON cannot carry, a lone surrogate
                self.reject(ev, "unencodable_record")
                continue
            add(line)
            self.written += 1

    def _unchanged_line(self, ev: Event) -> bytes | None:
        """The event's own JSON line when it is its row as it stands (:meth:`FastPath.line`), else None."""
        fast = self.fast
        return None if fast is None or self.mapping is not None else fast.line(ev)

    def _row(self, ev: Event, typed: bool) -> dict[str, Any]:
        """The row of ``ev``: converted to the column types when ``typed`` (the table is known), else its values
        as they are (converted at delivery, :meth:`_typed_lines`)."""
        fields = self.layout.fields(ev)
        if self.mapping is not None:
            converters = self.converters if typed else {}
            row: dict[str, Any] = {}
            for column, field in self.mapping:
                value = converters.get(column, converter(None))(fields.get(field, MISSING))
                if value is not OMIT:
                    row[column] = value
            return row
        return retype(self.converters, fields) if typed else fields

    def reject(self, ev: Event, reason: str, field: str | None = None) -> None:
        """Dead-letter ``ev`` (its whole record as a JSON line, replayable) with ``reason``."""
        self.counts[reason] += 1
        try:
            record = json.dumps(self.layout.fields(ev), ensure_ascii=False, separators=(",", ":"))
            record.encode("utf-8")
        except (Reject, TypeError, ValueError):  # no fields, a value JSON cannot carry, a lone surrogate: its roles
            dead_letter_event(self.ctx.dead_letters, reason, "sink:clickhouse", ev)
            return
        self._dead_letter(reason, record, field)

    def _dead_letter(self, reason: str, record: str, field: str | None) -> None:
        if self.ctx.dead_letters is not None:
            self.ctx.dead_letters.add(reason, "sink:clickhouse", None, record, field=field)

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
                self.ctx.dead_letters.add("rejected_by_peer", "sink:clickhouse", None, lines[0].decode("utf-8"))
                self.ctx.dead_letters.flush()
            log.warning("clickhouse_row_rejected", table=self.table_label, status=answer.status, code=code)
            return
        half = len(lines) // 2
        self._insert(lines[:half])
        self._insert(lines[half:])

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
