"""UBI records (``format: ubi``) into two ClickHouse tables in the UBI schema: query records into ``table``, event
records into ``events_table``, as OpenSearch keeps ``ubi_queries`` and ``ubi_events``.

Why two tables: query and event records have different fields (the o19s/ubi ``query.request`` and ``event``
schemas), an analysis joins them by ``query_id`` (clicks of a query, CTR by query), and every UBI tool reads them
apart. Each record leaves as its own UBI record with the chain's outcome in its own keys (the codec's
``json_line``: a reassigned ``client_id``, a scrubbed ``user_query``), one column per top-level key:

* text ids and values: ``String`` (``Nullable`` where the schema lets a record leave them out);
* ``timestamp``: ``Nullable(String)``, the record's ISO 8601 text unchanged (ClickHouse 18.16 has no
  ``DateTime64``: a ``DateTime`` would drop the milliseconds), and beside it ``parsed_timestamp DateTime
  MATERIALIZED parseDateTimeBestEffortOrZero(...)``, the instant to the second for ``WHERE`` and the sort key
  (not part of ``SELECT *``, never written by the sink);
* ``query_attributes`` / ``event_attributes``: ``Nullable(String)`` holding the object's JSON text, keys and nesting
  kept (the schema leaves them open-ended, and 18.16 has no ``Map`` or ``JSON`` type; ``visitParamExtractString``
  reads a key of it);
* ``query_response_hit_ids``: ``Array(String) DEFAULT []`` (an id that is a number is written as its text).

A top-level key outside the schema gets a column of its own when ``create_table`` makes the table from the first
batch (typed as the other sink's inferred columns; a key ClickHouse cannot take as a column name, such as ``""``,
gets none); a later record with a key the table lacks is dead-lettered
``field_not_in_table``, naming the key. ``ENGINE = MergeTree PARTITION BY toYYYYMM(parsed_timestamp) ORDER BY
(parsed_timestamp, query_id)``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from adapters.clickhouse.schema import MISSING, Reject, infer_type, quote
from sidecar.api import Event

#: The query table's columns in the schema's order (read back with ``SELECT *`` they make the record again).
QUERY_COLUMNS: tuple[tuple[str, str], ...] = (
    ("application", "Nullable(String)"),
    ("query_id", "String"),
    ("client_id", "String"),
    ("user_query", "String"),
    ("timestamp", "Nullable(String)"),
    ("query_attributes", "Nullable(String)"),
    ("query_response_id", "Nullable(String)"),
    ("query_response_hit_ids", "Array(String) DEFAULT []"),
)
#: The event table's columns in the schema's order.
EVENT_COLUMNS: tuple[tuple[str, str], ...] = (
    ("application", "Nullable(String)"),
    ("action_name", "String"),
    ("query_id", "String"),
    ("client_id", "String"),
    ("session_id", "Nullable(String)"),
    ("timestamp", "Nullable(String)"),
    ("message_type", "Nullable(String)"),
    ("message", "Nullable(String)"),
    ("event_attributes", "Nullable(String)"),
)
#: The derived time column (never written: ClickHouse computes it from ``timestamp``).
PARSED_TIME = (
    "parsed_timestamp",
    "DateTime MATERIALIZED parseDateTimeBestEffortOrZero(ifNull(`timestamp`, ''))",
)
ENGINE = "ENGINE = MergeTree PARTITION BY toYYYYMM(parsed_timestamp) ORDER BY (parsed_timestamp, query_id)"


def ubi_kind(event: Event) -> bool | None:
    """True for a query record, False for an event record, None for neither (the codec's ``join_of``)."""
    join_of = getattr(event.codec, "join_of", None)
    joined = join_of(event) if join_of is not None else None
    return None if joined is None else bool(joined[1])


def ubi_record(event: Event) -> dict[str, Any]:
    """The UBI record as the chain left it, under its own keys (the record itself when unchanged, else the codec's
    ``json_line`` of it: the released ``client_id``, the scrubbed ``user_query``); :class:`Reject`
    (``not_ubi_record``) for an event that is no UBI record."""
    record, codec = event.record, event.codec
    if not isinstance(record, dict) or codec is None:
        raise Reject("not_ubi_record")
    if event.raw is not None and codec.encode(event) is event.raw:
        return record
    json_line = getattr(codec, "json_line", None)
    if json_line is None:
        raise Reject("not_ubi_record")
    out: dict[str, Any] = json.loads(json_line(event))
    return out


class UbiLayout:
    """The columns of one UBI table (queries or events): the schema's, then the first batch's other keys."""

    hint = 'Add the missing columns (the UBI tables are in docs/STACK.md, "Into ClickHouse").'

    def __init__(self, queries: bool) -> None:
        self.queries = queries
        self.columns = QUERY_COLUMNS if queries else EVENT_COLUMNS

    def fields(self, event: Event) -> dict[str, Any]:
        return ubi_record(event)

    def mapping(self, events: Sequence[Event]) -> None:
        return None  # each record's own keys

    def known(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.columns)

    def create(self, table: str, columns: Sequence[tuple[str, str]], sample: Sequence[dict[str, Any]]) -> str:
        """The schema's columns, the derived time, then a column for each other key of the first batch."""
        own = dict(self.columns)
        defs = [f"{quote(name)} {ch_type}" for name, ch_type in self.columns]
        defs.append(f"{quote(PARSED_TIME[0])} {PARSED_TIME[1]}")
        for column, _ in columns:
            if column not in own and column != PARSED_TIME[0]:
                ch_type = infer_type(None, (row.get(column, MISSING) for row in sample), "String")
                defs.append(f"{quote(column)} {ch_type}")
        return f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(defs)}) {ENGINE}"
