"""ClickHouse: the ``clickhouse`` sink (``INSERT ... FORMAT JSONEachRow`` over the HTTP interface, batched,
through a durable outbox).

* :mod:`.sink` — when the table is checked, how batches are inserted and which rows are dead-lettered.
* :mod:`.schema` — which field fills which column, value conversion, the types of a created table.
* :mod:`.config` — the options.
"""
