"""The ``vector`` sink: ``PushEvents`` to a Vector ``vector`` source, through a durable outbox.

``write`` encodes events (:class:`~adapters.vector.codec.VectorCodec`: a Vector event keeps its bytes unless a
role changed; an event of another format becomes a log of its fields) and cuts them into ``PushEventsRequest``
batches of at most ``batch_size`` events and ``max_batch_bytes`` bytes; ``flush`` (the delivery point) puts
the last partial batch into the outbox. Every batch goes into the outbox (``ctx.outbox``, the contract's
:class:`~sidecar.api.Outbox`) in the runtime's transaction, so when ``flush`` returns the events are durable
and a source may acknowledge them. The outbox's sender thread calls ``PushEvents`` and waits for the reply
(Vector answers once the events are processed: an end-to-end acknowledgement); only then is the batch deleted.
A failed call is retried with backoff, in order, at least once. A batch the downstream refuses for good
(INVALID_ARGUMENT and the other codes Vector itself never retries) would block the outbox forever: it goes to
the dead-letter file (reason ``vector_rejected_<code>``) instead.

When the outbox is full, the runtime refuses batches (:meth:`~sidecar.api.Runtime.backpressure`) and sources
stop acknowledging; a ``put`` that is refused anyway raises :class:`~sidecar.api.Backpressure` out of
``write``/``flush`` and the events stay in memory for the next flush (the runtime did not acknowledge them).
On close the sender goes on for ``close_drain_seconds``; what is left stays in the outbox for the next start.
A record Vector cannot carry (an integer beyond int64, a lone surrogate) is dead-lettered, never sent.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import grpc
import structlog

from adapters.vector.codec import VectorCodec, frame
from adapters.vector.config import VectorSinkConfig
from sidecar.api import Backpressure, BadRecord, BuildContext, Codec, Event, Sink

log = structlog.get_logger("querylog.vector")

METHOD = "/vector.Vector/PushEvents"
_FRAMING = 6  # bytes an event adds to a request besides its own: tag and length (at most)
#: Status codes Vector's own sink does not retry: the batch is refused for good.
PERMANENT = frozenset(
    {
        grpc.StatusCode.NOT_FOUND,
        grpc.StatusCode.INVALID_ARGUMENT,
        grpc.StatusCode.ALREADY_EXISTS,
        grpc.StatusCode.PERMISSION_DENIED,
        grpc.StatusCode.OUT_OF_RANGE,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.UNAUTHENTICATED,
    }
)


class VectorSink(Sink[VectorSinkConfig]):
    """Events to a Vector ``vector`` source (``PushEvents``), batched through a durable outbox."""

    NAME = "vector"
    Config = VectorSinkConfig
    SUMMARY = "Vector native protocol v2 (PushEvents) to a Vector vector source, through a durable outbox"

    def __init__(self, config: VectorSinkConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.codec = VectorCodec(ctx.schema)
        self.outbox = ctx.outbox(config.outbox_name or f"vector_{config.address}", config)
        self._pending: list[bytes] = []
        #: events the codec could not encode (dead-lettered, never sent)
        self.rejected = 0
        #: batches the downstream refused for good (dead-lettered)
        self.refused_batches = 0
        self._channel: grpc.Channel | None = None
        self._closing = threading.Event()
        self._inflight: grpc.Future[bytes] | None = None  # the PushEvents call in progress (the sender thread's)
        if not ctx.validate_only:
            self._channel = self._open_channel()
            self._push: grpc.UnaryUnaryMultiCallable[bytes, bytes] = self._channel.unary_unary(METHOD)  # bytes
            self.outbox.start(self.send)  # batches left by an earlier run go out at once

    def _open_channel(self) -> grpc.Channel:
        cfg = self.config
        options: list[tuple[str, Any]] = [
            ("grpc.max_send_message_length", max(cfg.max_batch_bytes, 64 * 1024 * 1024)),
            ("grpc.max_receive_message_length", 4 * 1024 * 1024),
            # reconnect on the outbox's schedule: gRPC's own backoff grows to 2 minutes after a long outage
            ("grpc.initial_reconnect_backoff_ms", int(cfg.retry_initial_seconds * 1000)),
            ("grpc.min_reconnect_backoff_ms", int(cfg.retry_initial_seconds * 1000)),
            ("grpc.max_reconnect_backoff_ms", int(cfg.retry_max_seconds * 1000)),
        ]
        compression = grpc.Compression.Gzip if cfg.compression else None
        if cfg.tls_ca_file is None:
            return grpc.insecure_channel(cfg.address, options=options, compression=compression)
        ca = Path(self.ctx.resolve(cfg.tls_ca_file)).read_bytes()
        if cfg.tls_server_name is not None:
            options.append(("grpc.ssl_target_name_override", cfg.tls_server_name))
        creds = grpc.ssl_channel_credentials(root_certificates=ca)
        return grpc.secure_channel(cfg.address, creds, options=options, compression=compression)

    # ---- the runtime's side -----------------------------------------------------------------------
    def start(self, header: str | None, codec: Codec | None) -> None:
        """Nothing to do: the outbox's sender runs from construction (earlier batches go out at once)."""

    def write(self, events: list[Event]) -> None:
        if not events:
            return
        encode = self.codec.encode
        try:
            wires = [encode(e) for e in events]
        except BadRecord:
            wires = self._encode_each(events)
        self._pending.extend(wires)
        self.written += len(wires)
        self._put(partial=False)

    def _encode_each(self, events: list[Event]) -> list[bytes]:
        """Encode one by one; a record Vector cannot carry goes to the dead-letter file, never downstream."""
        out: list[bytes] = []
        for ev in events:
            try:
                out.append(self.codec.encode(ev))
            except BadRecord as exc:
                self.rejected += 1
                if self.ctx.dead_letters is not None:
                    roles = {"user": ev.user, "query": ev.query, "time": ev.time, "rank": ev.rank, "url": ev.url}
                    self.ctx.dead_letters.add(exc.reason, f"sink:{self.NAME}", None, json.dumps(roles, default=str))
        return out

    def _put(self, partial: bool) -> None:
        """Pending events into the outbox, one batch per ``PushEventsRequest`` of at most ``batch_size`` events
        and ``max_batch_bytes`` bytes (a single larger event goes alone); ``partial``: the last batch too.

        :class:`~sidecar.api.Backpressure` leaves the refused batch and the ones after it pending."""
        pending = self._pending
        limit_n, limit_bytes = self.config.batch_size, self.config.max_batch_bytes
        while pending:
            n = size = 0
            for wire in pending:
                if n and (n >= limit_n or size + len(wire) + _FRAMING > limit_bytes):
                    break
                n += 1
                size += len(wire) + _FRAMING
            full = n < len(pending) or n >= limit_n or size >= limit_bytes
            if not full and not partial:
                return
            self.outbox.put(frame(pending[:n]), n)
            del pending[:n]

    def flush(self) -> None:
        """Put everything pending into the outbox: durable when this returns."""
        self._put(partial=True)

    # ---- the sender thread ------------------------------------------------------------------------
    def send(self, payload: bytes) -> None:
        """Deliver one batch and wait for Vector's reply; raises (the outbox retries) unless refused for good."""
        if self._closing.is_set():
            raise RuntimeError("the sink is closing")  # the batch stays in the outbox for the next start
        call = self._push.future(payload, timeout=self.config.timeout_seconds)
        self._inflight = call
        try:
            call.result()
        except grpc.RpcError as exc:
            status = getattr(exc, "code", None)  # a failed call is also a grpc.Call with its status
            code = status() if callable(status) else None
            if isinstance(code, grpc.StatusCode) and code in PERMANENT and self.ctx.dead_letters is not None:
                reason = f"vector_rejected_{code.name.lower()}"
                self.refused_batches += 1
                log.error("batch_refused_by_downstream", sink=self.NAME, status=code.name)
                self.ctx.dead_letters.add(reason, f"sink:{self.NAME}", None, payload)
                self.ctx.dead_letters.flush()
                return
            raise
        finally:
            self._inflight = None

    def close(self) -> None:
        """Put what is pending into the outbox, keep sending for ``close_drain_seconds``, stop the sender
        (undelivered batches stay for the next start)."""
        try:
            self.flush()
        except Backpressure:
            log.error("events_not_stored_at_close", sink=self.NAME, events=len(self._pending), reason="outbox_full")
        if self._channel is not None and self.config.close_drain_seconds:
            self.outbox.drain(self.config.close_drain_seconds)
        self._closing.set()
        call = self._inflight
        if call is not None:  # a downstream that never answers must not hold the shutdown: the batch stays
            call.cancel()
        self.outbox.close(timeout=self.config.timeout_seconds)
        if self._channel is not None:
            self._channel.close()
            self._channel = None
