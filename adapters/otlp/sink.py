"""The ``otlp`` sink: export requests to an OTLP receiver (OTLP/HTTP protobuf or OTLP/gRPC) through a durable outbox.

``write`` encodes events (:class:`~adapters.otlp.codec.OtlpCodec`: a record from an otlp source keeps its bytes,
resource and scope unless a role changed; an event of another format becomes a fresh log record) and cuts them
into ``ExportLogsServiceRequest`` batches of at most ``batch_size`` records and ``max_batch_bytes`` bytes;
``flush`` (the delivery point) puts the last partial batch into the outbox (``ctx.outbox``), committed with the
runtime's batch. The outbox's sender thread exports each batch, oldest first:

* **delivered**: HTTP 2xx, gRPC OK. A ``partial_success`` with rejected records is counted
  (``records_rejected_by_peer``): the peer took the request and will not take those records again.
* **throttled** (HTTP 429, 502, 503, 504; gRPC RESOURCE_EXHAUSTED, UNAVAILABLE): sent again after the peer's
  ``Retry-After`` (HTTP) or the ``retry_delay`` of its ``google.rpc.RetryInfo`` (gRPC, in either trailer of
  :mod:`adapters.otlp.throttle`) when it gives one (at least 0.1 s, at most ``retry_max_seconds``), else after
  the outbox's backoff.
* **refused for good** (another 4xx, gRPC INVALID_ARGUMENT...): the batch goes to the dead-letter file (reason
  ``otlp_rejected``) and the sender goes on; any other failure is retried with backoff, at least once.
"""

from __future__ import annotations

import gzip
import ssl
import threading
from collections import Counter
from typing import Any

import grpc
import structlog
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

from adapters.otlp.codec import OtlpCodec
from adapters.otlp.config import OtlpSinkConfig
from adapters.otlp.throttle import retry_delay
from adapters.otlp.wire import Piece, frame
from sidecar.api import Backpressure, BadRecord, BuildContext, Codec, ConfigValueError, Event, Outbox, Sink
from sidecar.netsink import HttpClient, PeerUnavailable, dead_letter_event, outbox_stats, read_secret

log = structlog.get_logger("querylog.otlp")

METHOD = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"
THROTTLED_HTTP = frozenset({429, 502, 503, 504})
RETRY_HTTP = THROTTLED_HTTP | {401, 403, 404, 408}  # a wrong token or URL: retried until an operator fixes it
RETRY_GRPC = frozenset(
    {
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.ABORTED,
        grpc.StatusCode.CANCELLED,
        grpc.StatusCode.UNAUTHENTICATED,
        grpc.StatusCode.DATA_LOSS,
    }
)
#: the statuses of a throttling server, whose RetryInfo (when it sends one) says when to come back
THROTTLED_GRPC = frozenset({grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE})
#: the shortest wait after a throttling answer (a `Retry-After: 0` must not make a busy loop)
THROTTLE_FLOOR_SECONDS = 0.1
_FRAMING = 12  # bytes a record may add to a request besides its own (tags and lengths, at most)


class OtlpSink(Sink[OtlpSinkConfig]):
    """Log records to an OTLP receiver, batched through a durable outbox (see the module)."""

    NAME = "otlp"
    Config = OtlpSinkConfig
    SUMMARY = "OpenTelemetry logs to an OTLP receiver (OTLP/HTTP protobuf or gRPC) through a durable outbox"

    def __init__(self, config: OtlpSinkConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.codec = OtlpCodec(ctx.schema)
        token = read_secret(
            ctx, config.bearer_token_env, config.bearer_token_file, "bearer_token_env", "bearer_token_file", "token"
        )
        self.headers: dict[str, str] = {}
        if token is not None:
            self.headers["Authorization"] = "Bearer " + token.decode("latin-1").strip()
        #: counts (no values): records the codec could not encode, batches refused, records the peer rejected
        self.counts: Counter[str] = Counter()
        self._pending: list[Piece] = []
        self._closing = threading.Event()
        self._client: HttpClient | None = None
        self._channel: grpc.Channel | None = None
        self.outbox: Outbox | None = None
        if ctx.validate_only:
            return
        if config.protocol == "http":
            ca = str(ctx.resolve(config.tls_ca_file)) if config.tls_ca_file else None
            headers = {**self.headers, "Content-Type": "application/x-protobuf"}
            if config.compression == "gzip":
                headers["Content-Encoding"] = "gzip"
            cert = self._client_cert()
            files = (str(ctx.resolve(cert[0])), str(ctx.resolve(cert[1]))) if cert else None
            try:
                self._client = HttpClient(
                    config.endpoint, timeout=config.timeout_seconds, headers=headers, ca_file=ca, client_cert=files
                )
            except (OSError, ssl.SSLError) as exc:  # a CA, certificate or key file missing or not PEM
                raise ConfigValueError("tls_cert_file" if cert else "tls_ca_file", f"cannot load: {exc}") from None
            self._target = self._client.path + (f"?{self._client.query}" if self._client.query else "")
        else:
            self._channel = self._open_channel()
            self._export: grpc.UnaryUnaryMultiCallable[bytes, bytes] = self._channel.unary_unary(METHOD)
        name = config.outbox_name or "otlp_" + "".join(c if c.isalnum() else "_" for c in config.endpoint)[-59:]
        self.outbox = ctx.outbox(name, config)
        self.outbox.start(self.send)  # batches an earlier run left go out at once

    def _open_channel(self) -> grpc.Channel:
        cfg = self.config
        options: list[tuple[str, Any]] = [
            ("grpc.max_send_message_length", max(cfg.max_batch_bytes, 64 * 1024 * 1024)),
            ("grpc.initial_reconnect_backoff_ms", int(cfg.retry_initial_seconds * 1000)),
            ("grpc.min_reconnect_backoff_ms", int(cfg.retry_initial_seconds * 1000)),
            ("grpc.max_reconnect_backoff_ms", int(cfg.retry_max_seconds * 1000)),
        ]
        compression = grpc.Compression.Gzip if cfg.compression == "gzip" else None
        if cfg.tls_ca_file is None:
            return grpc.insecure_channel(cfg.endpoint, options=options, compression=compression)
        cert = self._client_cert()
        creds = grpc.ssl_channel_credentials(
            root_certificates=self._read("tls_ca_file", cfg.tls_ca_file),
            private_key=self._read("tls_key_file", cert[1]) if cert else None,
            certificate_chain=self._read("tls_cert_file", cert[0]) if cert else None,
        )
        return grpc.secure_channel(cfg.endpoint, creds, options=options, compression=compression)

    def _client_cert(self) -> tuple[str, str] | None:
        """The client certificate and key files (mutual TLS), or None."""
        cfg = self.config
        return (cfg.tls_cert_file, cfg.tls_key_file) if cfg.tls_cert_file and cfg.tls_key_file else None

    def _read(self, key: str, name: str) -> bytes:
        path = self.ctx.resolve(name)
        try:
            return path.read_bytes()
        except OSError as exc:
            raise ConfigValueError(key, f"cannot read {path}: {exc.strerror}") from None

    # ---- the runtime's side -----------------------------------------------------------------------
    def start(self, header: str | None, codec: Codec | None) -> None:
        """Nothing to do: the outbox's sender runs from construction."""

    def write(self, events: list[Event]) -> None:
        if not events:
            return
        if self.outbox is None:
            raise RuntimeError("the otlp sink was built to check a config only")
        encode = self.codec.encode
        for ev in events:
            try:
                self._pending.append(encode(ev))
            except BadRecord as exc:  # a value OTLP cannot carry: dead-lettered, never sent
                self.counts[exc.reason] += 1
                dead_letter_event(self.ctx.dead_letters, exc.reason, f"sink:{self.NAME}", ev)
                continue
            self.written += 1
        self._put(partial=False)

    def _put(self, partial: bool) -> None:
        """Pending records into the outbox, one export request per batch (``partial``: the last one too).
        :class:`~sidecar.api.Backpressure` leaves the refused batch and those after it pending."""
        assert self.outbox is not None
        pending = self._pending
        limit_n, limit_bytes = self.config.batch_size, self.config.max_batch_bytes
        while pending:
            n = size = 0
            for piece in pending:
                grows = len(piece.log) + len(piece.resource) + len(piece.scope) + _FRAMING
                if n and (n >= limit_n or size + grows > limit_bytes):
                    break
                n += 1
                size += grows
            if n == len(pending) and n < limit_n and size < limit_bytes and not partial:
                return
            self.outbox.put(frame(pending[:n]), n)
            del pending[:n]

    def flush(self) -> None:
        """Put everything pending into the outbox: durable when this returns."""
        if self.outbox is not None:
            self._put(partial=True)

    # ---- the sender thread ------------------------------------------------------------------------
    def send(self, payload: bytes) -> None:
        """Export one batch; returns when delivered or refused for good, raises to have it retried."""
        while True:
            if self._closing.is_set():
                raise PeerUnavailable("the sink is closing")  # the batch stays in the outbox for the next start
            wait = self._send_http(payload) if self._client is not None else self._send_grpc(payload)
            if wait is None:
                return
            # the peer throttles and said when to come back: wait that long (not the backoff), then again
            self.counts["throttled"] += 1
            log.info("otlp_export_throttled", sink=self.NAME, retry_after_seconds=round(wait, 3))
            self._closing.wait(min(max(wait, THROTTLE_FLOOR_SECONDS), self.config.retry_max_seconds))

    def _send_http(self, payload: bytes) -> float | None:
        """One POST; None when done, else the ``Retry-After`` of a throttling answer."""
        assert self._client is not None
        body = gzip.compress(payload, 6) if self.config.compression == "gzip" else payload
        answer = self._client.request("POST", self._target, body)
        status = answer.status
        if 200 <= status < 300:
            self._partial(answer.body)
            return None
        if status in THROTTLED_HTTP and answer.retry_after is not None:
            return answer.retry_after
        if status in RETRY_HTTP or status >= 500 or status < 400:
            raise PeerUnavailable(f"{self._client.peer} answered {status}")
        self._refused(payload, f"http_{status}")
        return None

    def _send_grpc(self, payload: bytes) -> float | None:
        try:
            reply = self._export(payload, timeout=self.config.timeout_seconds, metadata=self._metadata())
        except grpc.RpcError as exc:
            status = getattr(exc, "code", None)
            code = status() if callable(status) else None
            if isinstance(code, grpc.StatusCode) and code not in RETRY_GRPC:
                self._refused(payload, code.name.lower())
                return None
            if code in THROTTLED_GRPC:
                trailers = getattr(exc, "trailing_metadata", None)
                wait = retry_delay(trailers() if callable(trailers) else None)
                if wait is not None:
                    return wait
            raise PeerUnavailable(f"{self.config.endpoint} answered {getattr(code, 'name', 'an error')}") from None
        self._partial(reply)
        return None

    def _metadata(self) -> tuple[tuple[str, str | bytes], ...] | None:
        token = self.headers.get("Authorization")
        return (("authorization", token),) if token else None

    def _partial(self, body: bytes) -> None:
        """Count what a ``partial_success`` says the peer rejected (its message may quote a value: not logged)."""
        try:
            rejected = ExportLogsServiceResponse.FromString(body).partial_success.rejected_log_records
        except Exception:  # a JSON answer or none: nothing to count
            return
        if rejected:
            self.counts["records_rejected_by_peer"] += rejected
            log.warning("otlp_records_rejected_by_peer", sink=self.NAME, records=rejected)

    def _refused(self, payload: bytes, status: str) -> None:
        self.counts["batches_refused"] += 1
        log.error("otlp_batch_refused_by_peer", sink=self.NAME, status=status)
        if self.ctx.dead_letters is not None:
            self.ctx.dead_letters.add("otlp_rejected", f"sink:{self.NAME}", None, payload)
            self.ctx.dead_letters.flush()

    def stats(self) -> dict[str, Any]:
        """The outbox's counters and this sink's (counts only)."""
        return outbox_stats(self.counts, self.outbox)

    def close(self) -> None:
        """Put what is pending into the outbox, keep sending for ``close_drain_seconds``, stop the sender."""
        outbox = self.outbox
        if outbox is None:
            return
        try:
            self.flush()
        except Backpressure:
            log.error("events_not_stored_at_close", sink=self.NAME, events=len(self._pending), reason="outbox_full")
        if self.config.close_drain_seconds:
            outbox.drain(self.config.close_drain_seconds)
        self._closing.set()
        outbox.close(timeout=self.config.timeout_seconds)
        self.outbox = None
        if self._client is not None:
            self._client.close()
        if self._channel is not None:
            self._channel.close()
            self._channel = None
