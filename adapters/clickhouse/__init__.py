"""ClickHouse: the ``clickhouse`` sink (``INSERT ... FORMAT JSONEachRow`` over the HTTP interface, batched,
through a durable outbox).

* :mod:`.sink` — the sink: which table a record goes into, when the table is checked, how batches are inserted
  and which rows are dead-lettered.
* :mod:`.table` — one table: its columns settled and checked, its outbox, its INSERTs.
* :mod:`.ubi` — ``format: ubi``: query and event records into two tables in the UBI schema.
* :mod:`.schema` — which field fills which column, value conversion, the types of a created table.
* :mod:`.config` — the options.
"""
