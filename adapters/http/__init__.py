"""HTTP: the ``http`` source (NDJSON POSTs, answered once durable) and the ``http`` sink (NDJSON POSTs in
batches through a durable outbox).

* :mod:`.source` — the server and what each status means to a sender (Vector, Fluent Bit).
* :mod:`.sink` — batching, retries, and which answers dead-letter a batch.
* :mod:`.config` — the options of both.
"""
