"""HTTP: the ``http`` source (NDJSON, JSON array or msgpack POSTs, answered once durable) and the ``http`` sink
(NDJSON POSTs in batches through a durable outbox).

* :mod:`.source` — what each status means to a sender (Vector, Fluent Bit), and the body into the runtime.
* :mod:`.server` — the HTTP server on the shared host (aiohttp): connections, limits, refusals.
* :mod:`.body` — content types, decompression, and cutting a body into records.
* :mod:`.sink` — batching, retries, and which answers dead-letter a batch.
* :mod:`.config` — the options of both.
"""
