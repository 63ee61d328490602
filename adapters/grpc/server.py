"""The gRPC server around a runtime: an asynchronous server, the periodic flush, graceful stop.

The server is ``grpc.aio`` on an event loop of its own thread. An open stream that sends nothing costs no
thread, so any number of idle ``Filter`` streams leave health checks, ``Stats`` and new streams answering.
Received batches are worked on by ``server.workers`` threads (parse, chain, encode), the chain one batch at
a time under the service lock; a batch that a running estimate says takes under 2 ms runs on the event loop
itself when the chain is free (cheaper than a thread hop). ``Stats`` has a thread of its own, and health
answers on the event loop.
A timer thread asks buffering filters to release every ``server.flush_interval_seconds``.

Access control: TLS (``tls_cert_file``/``tls_key_file``), mutual TLS (``tls_client_ca_file``: clients must
present a certificate signed by that CA) and a bearer token on every RPC but health (``auth_token_file`` or
``auth_token_env``; :mod:`adapters.grpc.auth`). What a caller can receive is described in
:mod:`adapters.grpc.service`.

Stop (SIGTERM): health says NOT_SERVING, no new RPC is taken, in-flight RPCs get ``shutdown_grace_seconds``
to finish (then they are cancelled; an Ingest cut short is not acknowledged), the batches being worked on
finish, then the filters flush (final) and what they release is delivered. The runtime stays open.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc
import grpc.aio
import structlog
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from adapters.grpc.auth import BearerTokenAuth
from adapters.grpc.config import GrpcSourceConfig
from adapters.grpc.service import QueryLogService, parse_or_mark
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
T = TypeVar("T")


class SidecarServer:
    """The gRPC server around a runtime: start, periodic flush, graceful stop (the runtime stays open).

    ``token`` is the bearer token every RPC but health must carry (None: no token asked).
    """

    def __init__(
        self,
        cfg: GrpcSourceConfig,
        ctx: BuildContext,
        runtime: Runtime,
        listen: str | None = None,
        token: bytes | None = None,
    ) -> None:
        self.cfg = cfg
        self.pipeline = runtime
        self.listen = listen or self.cfg.listen
        self._work = ThreadPoolExecutor(max_workers=cfg.workers, thread_name_prefix="querylog-rpc")
        self._admin = ThreadPoolExecutor(max_workers=1, thread_name_prefix="querylog-stats")
        self.service = QueryLogService(
            runtime,
            ctx.max_record_bytes,
            self._work,
            self._admin,
            filter_release=cfg.filter_release,
            profile_lookup=cfg.profile_lookup,
        )
        self.tls = self.cfg.tls_cert_file is not None
        self.mutual_tls = self.cfg.tls_client_ca_file is not None
        self.token = token is not None
        creds = self._credentials(ctx)
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self._loop.run_forever, name="querylog-grpc", daemon=True)
        self._loop_thread.start()
        try:
            self.port = self._call(self._bind(creds, token))
        except BaseException:
            self._close_loop()
            self._work.shutdown(wait=False)
            self._admin.shutdown(wait=False)
            raise
        self._stop_timer = threading.Event()
        self._timer = threading.Thread(target=self._flush_loop, name="querylog-flush", daemon=True)
        self.metrics_port: int | None = None

    def _credentials(self, ctx: BuildContext) -> grpc.ServerCredentials | None:
        if not self.tls:
            return None
        assert self.cfg.tls_cert_file is not None and self.cfg.tls_key_file is not None
        cert = ctx.resolve(self.cfg.tls_cert_file).read_bytes()
        key = ctx.resolve(self.cfg.tls_key_file).read_bytes()
        if self.cfg.tls_client_ca_file is None:
            return grpc.ssl_server_credentials([(key, cert)])
        ca = ctx.resolve(self.cfg.tls_client_ca_file).read_bytes()
        return grpc.ssl_server_credentials([(key, cert)], root_certificates=ca, require_client_auth=True)

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run a coroutine on the server's event loop and wait for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _bind(self, creds: grpc.ServerCredentials | None, token: bytes | None) -> int:
        size = self.cfg.max_message_bytes
        interceptors = [BearerTokenAuth(token, self._refused)] if token is not None else []
        self.server = grpc.aio.server(
            interceptors=interceptors,
            options=[
                ("grpc.max_receive_message_length", size),
                ("grpc.max_send_message_length", size),
                ("grpc.so_reuseport", 0),  # a second sidecar on the same port fails instead of sharing it
            ],
        )
        svc = self.service
        # Filter and Ingest take and give wire bytes: parsing and serializing happen on the worker threads.
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            "Filter": grpc.stream_stream_rpc_method_handler(svc.Filter),
            "Ingest": grpc.stream_unary_rpc_method_handler(
                svc.Ingest, response_serializer=IngestResponse.SerializeToString
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
        self.health = health_aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        try:
            if creds is not None:
                port = self.server.add_secure_port(self.listen, creds)
            else:
                port = self.server.add_insecure_port(self.listen)
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {self.listen}") from exc
        if not port:
            raise OSError(f"cannot listen on {self.listen}")
        return port

    def _refused(self, reason: str) -> int:
        """Count an RPC refused for ``reason`` (on the event loop); returns the count so far."""
        refused = self.service.refused
        refused[reason] += 1
        return refused[reason]

    def _flush_loop(self) -> None:
        interval = self.cfg.flush_interval_seconds
        while not self._stop_timer.wait(interval):
            try:
                self.service.flush(final=False)
            except Exception as exc:
                log.error("timer_flush_failed", error=type(exc).__name__)

    async def _start(self) -> None:
        await self.server.start()
        for name in ("", SERVICE):
            await self.health.set(name, health_pb2.HealthCheckResponse.SERVING)

    def start(self) -> None:
        self._call(self._start())
        self._timer.start()
        if self.cfg.metrics_listen:
            from sidecar.metrics import serve_metrics

            self._metrics, _, self.metrics_port = serve_metrics(self.cfg.metrics_listen, self.service.locked_stats)
        if self.token and not self.tls:
            log.warning("auth_token_without_tls", hint="the token crosses the network in clear text")
        log.info(
            "server_started",
            metrics_port=self.metrics_port,
            port=self.port,
            tls=self.tls,
            mutual_tls=self.mutual_tls,
            auth_token=self.token,
            workers=self.cfg.workers,
            filters=len(self.pipeline.filters),
            sinks=len(self.pipeline.sinks),
            filter_release=self.cfg.filter_release,
        )

    async def _stop(self, grace: float) -> None:
        await self.health.enter_graceful_shutdown()
        await self.server.stop(grace)

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop_thread.join()
        self._loop.close()

    def stop(self, grace: float | None = None) -> dict[str, int]:
        """Stop accepting, let in-flight RPCs finish within ``grace``, flush filters (final) and deliver."""
        started = time.monotonic()
        self._call(self._stop(self.cfg.shutdown_grace_seconds if grace is None else grace))
        # the batches already being worked on finish; queued ones of RPCs cut short are dropped (not acknowledged)
        self._work.shutdown(wait=True, cancel_futures=True)
        self._close_loop()
        self._stop_timer.set()
        if self._timer.is_alive():
            self._timer.join()
        released = 0
        try:
            released = self.service.flush(final=True)
        except Exception as exc:  # a full outbox or disk: the release rolled back, the events stay held
            log.error("final_flush_failed", source="grpc", error=type(exc).__name__)
        undelivered = self.service.drain_undeliverable()
        stats = self.service.locked_stats()
        self._admin.shutdown(wait=True)
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
