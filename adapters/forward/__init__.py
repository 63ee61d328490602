"""Fluentd Forward Protocol v1: the ``forward`` source and sink, and the codec of forward entries.

* :mod:`.protocol` — the wire format without I/O: incremental msgpack framing, the four event modes,
  EventTime, options, the HELO/PING/PONG handshake, the UDP heartbeat.
* :mod:`.codec` — ``(tag, time, record)`` entries <-> events (roles map to record keys, as for JSON lines).
* :mod:`.source` — an asyncio TCP (+TLS) server, acknowledging a chunk only once ``receive`` returned.
* :mod:`.sink` — PackedForward batches into a durable outbox (:mod:`sidecar.outbox`), delivered with acks.
"""
