"""The gRPC source: service ``querylog.v1.QueryLogFilter`` over the configured chain.

* ``Filter`` (bidi stream): each request batch is answered by one response batch
  holding the events that left the chain during that call, plus events a timer
  flush released while no sink was configured. Held events come back later, in
  the response to another batch (possibly of another stream).
* ``Ingest`` (client stream): events go through the chain into the configured
  sinks; the response is sent once the sinks are flushed.
* ``GetProfile``: served by the first filter in the chain that has
  ``get_profile(user) -> dict[str, int] | None``.
* ``Stats``: the pipeline's counters.

Bad input never breaks a stream: an unparseable message, an event with an empty
query or one over ``limits.max_record_bytes`` is dead-lettered (counted by reason)
and the stream goes on. The chain runs under one lock; a timer thread asks
buffering filters to release every ``server.flush_interval_seconds``.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
import structlog
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from adapters.grpc.codec import EventBatch
from adapters.grpc.config import GrpcSourceConfig
from adapters.grpc.service import QueryLogService, parse_batch, parse_or_mark
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import (
    IngestResponse,
    ProfileRequest,
    ProfileResponse,
    StatsRequest,
    StatsResponse,
)
from sidecar.api import BuildContext, Runtime

log = structlog.get_logger("querylog.grpc")

SERVICE = "querylog.v1.QueryLogFilter"


class SidecarServer:
    """The gRPC server around a runtime: start, periodic flush, graceful stop (the runtime stays open)."""

    def __init__(self, cfg: GrpcSourceConfig, ctx: BuildContext, runtime: Runtime, listen: str | None = None) -> None:
        self.cfg = cfg
        self.pipeline = runtime
        self.service = QueryLogService(runtime, ctx.max_record_bytes)
        self.listen = listen or self.cfg.listen
        size = self.cfg.max_message_bytes
        self.server = grpc.server(
            ThreadPoolExecutor(max_workers=self.cfg.workers, thread_name_prefix="querylog-rpc"),
            options=[
                ("grpc.max_receive_message_length", size),
                ("grpc.max_send_message_length", size),
                ("grpc.so_reuseport", 0),  # a second sidecar on the same port fails instead of sharing it
            ],
        )
        svc = self.service
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            "Filter": grpc.stream_stream_rpc_method_handler(
                svc.Filter, request_deserializer=parse_batch, response_serializer=EventBatch.SerializeToString
            ),
            "Ingest": grpc.stream_unary_rpc_method_handler(
                svc.Ingest, request_deserializer=parse_batch, response_serializer=IngestResponse.SerializeToString
            ),
            "GetProfile": grpc.unary_unary_rpc_method_handler(
                svc.GetProfile,
                request_deserializer=parse_or_mark(ProfileRequest),
                response_serializer=ProfileResponse.SerializeToString,
            ),
            "Stats": grpc.unary_unary_rpc_method_handler(
                svc.Stats,
                request_deserializer=parse_or_mark(StatsRequest),
                response_serializer=StatsResponse.SerializeToString,
            ),
        }
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.tls = self.cfg.tls_cert_file is not None
        if self.tls:
            assert self.cfg.tls_cert_file is not None and self.cfg.tls_key_file is not None
            cert = ctx.resolve(self.cfg.tls_cert_file).read_bytes()
            key = ctx.resolve(self.cfg.tls_key_file).read_bytes()
            creds = grpc.ssl_server_credentials([(key, cert)])
            self.port = self.server.add_secure_port(self.listen, creds)
        else:
            self.port = self.server.add_insecure_port(self.listen)
        if not self.port:
            raise OSError(f"cannot listen on {self.listen}")
        self._stop_timer = threading.Event()
        self._timer = threading.Thread(target=self._flush_loop, name="querylog-flush", daemon=True)
        self.metrics_port: int | None = None

    def _flush_loop(self) -> None:
        interval = self.cfg.flush_interval_seconds
        while not self._stop_timer.wait(interval):
            try:
                self.service.flush(final=False)
            except Exception as exc:
                log.error("timer_flush_failed", error=type(exc).__name__)

    def start(self) -> None:
        self.server.start()
        for name in ("", SERVICE):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self._timer.start()
        if self.cfg.metrics_listen:
            from sidecar.metrics import serve_metrics

            self._metrics, _, self.metrics_port = serve_metrics(self.cfg.metrics_listen, self._locked_stats)
        log.info(
            "server_started",
            metrics_port=self.metrics_port,
            port=self.port,
            tls=self.tls,
            workers=self.cfg.workers,
            filters=len(self.pipeline.filters),
            sinks=len(self.pipeline.sinks),
        )

    def _locked_stats(self) -> dict[str, Any]:
        with self.service.lock:
            return self.pipeline.stats()

    def stop(self, grace: float | None = None) -> dict[str, int]:
        """Stop accepting, let in-flight RPCs finish within ``grace``, flush filters (final) and deliver."""
        started = time.monotonic()
        self.health.enter_graceful_shutdown()
        self.server.stop(self.cfg.shutdown_grace_seconds if grace is None else grace).wait()
        self._stop_timer.set()
        if self._timer.is_alive():
            self._timer.join()
        released = self.service.flush(final=True)
        undelivered = self.service.drain_undeliverable()
        with self.service.lock:
            stats = self.pipeline.stats()
        if self.metrics_port is not None:
            self._metrics.shutdown()
        counts = {k: v for k, v in stats.items() if k.startswith("events_")}
        log.info(
            "server_stopped",
            rpcs=self.service.rpcs,
            released_at_stop=released,
            undelivered_dead_lettered=undelivered,
            stop_seconds=round(time.monotonic() - started, 3),
            **counts,
        )
        return counts
