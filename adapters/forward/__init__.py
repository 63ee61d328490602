"""Fluentd Forward Protocol v1: the ``forward`` source and sink, and the codec of forward entries.

* :mod:`.protocol` — the wire format without I/O: the four event modes, options, acks; it re-exports
  :mod:`.wire` (msgpack as the protocol uses it, EventTime, incremental framing) and :mod:`.handshake`
  (HELO/PING/PONG, the UDP heartbeat).
* :mod:`.codec` — ``(tag, time, record)`` entries <-> events (roles map to record keys, as for JSON lines).
* :mod:`.source` — the protocol's handlers on the shared host (TCP, TLS, UDP heartbeat), acknowledging a
  chunk only once ``receive`` returned; :mod:`.batcher` merges waiting connections into one batch.
* :mod:`.sink` — PackedForward batches into a durable outbox (:mod:`sidecar.outbox`), delivered with acks.
"""
