"""The gRPC server's protocol on the shared host (:mod:`sidecar.serving`): the ``grpc.aio`` server, its
handlers, health checking and the bearer-token interceptor.

The host runs it on its event loop: an open stream that sends nothing is a suspended coroutine, so any number of
idle ``Filter`` streams leave health checks, ``Stats`` and new streams answering. The handlers
(:mod:`adapters.grpc.service`) hand each received batch to the host's workers (or run it on the loop when it is
cheap and the runtime's lock is free); ``Stats`` runs on the host's side thread; health answers on the loop.

Access control: TLS, mutual TLS (``tls_client_ca_file``: clients must present a certificate signed by that CA)
and a bearer token on every RPC but health (:mod:`sidecar.grpcauth`); ``GetProfile`` takes the profile reader's
token in its place and answers the profile reader only (:mod:`adapters.grpc.service`).

Health agrees with the runtime's readiness (``Runtime.ready()``, what ``/readyz`` answers): NOT_SERVING while it
names something not ready (a drain, a full outbox...), looked up on each ``Check`` and every
:data:`HEALTH_POLL_SECONDS` for ``Watch`` streams.

Stop (SIGTERM): health says NOT_SERVING, no new RPC is taken, in-flight RPCs get ``shutdown_grace_seconds`` to
finish (then they are cancelled; an Ingest cut short is not acknowledged). The runtime stays open: ``serve``
releases what buffering filters hold, once, after every source stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import grpc
import grpc.aio
from grpc_health.v1 import _async as health_aio
from grpc_health.v1 import health_pb2, health_pb2_grpc

from adapters.grpc.service import QueryLogService
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import (
    IngestResponse,
    ProfileRequest,
    ProfileResponse,
    StatsRequest,
    StatsResponse,
)
from adapters.grpc.wire import parse_or_mark
from sidecar.api import Listen
from sidecar.grpcauth import BearerTokenAuth
from sidecar.serving import ServerHost

SERVICE = "querylog.v1.QueryLogFilter"
HEALTH_PREFIX = "/grpc.health.v1.Health/"
#: How often ``Watch`` streams see the runtime's readiness looked up again (``Check`` looks it up itself).
HEALTH_POLL_SECONDS = 1.0


class ReadyHealth(health_aio.HealthServicer):
    """``grpc.health.v1.Health`` whose status follows ``ready()`` (a list of reasons, empty when ready)."""

    def __init__(self, ready: Callable[[], list[str]]) -> None:
        super().__init__()
        self.ready = ready

    async def refresh(self) -> None:
        """Set every service's status from ``ready()`` (ignored once the server entered its graceful shutdown)."""
        status = health_pb2.HealthCheckResponse.NOT_SERVING if self.ready() else health_pb2.HealthCheckResponse.SERVING
        for name in ("", SERVICE):
            await self.set(name, status)

    async def Check(
        self,
        request: health_pb2.HealthCheckRequest,
        context: grpc.aio.ServicerContext[health_pb2.HealthCheckRequest, health_pb2.HealthCheckResponse],
    ) -> health_pb2.HealthCheckResponse:
        await self.refresh()
        return await super().Check(request, context)

    async def poll(self) -> None:
        """Look readiness up every :data:`HEALTH_POLL_SECONDS` (for ``Watch``) until cancelled."""
        while True:
            await asyncio.sleep(HEALTH_POLL_SECONDS)
            await self.refresh()


class GrpcProtocol:
    """``querylog.v1.QueryLogFilter`` and ``grpc.health.v1.Health`` as a :class:`~sidecar.serving.ServerProtocol`."""

    def __init__(
        self,
        service: QueryLogService,
        listen: Listen,
        max_message_bytes: int,
        creds: grpc.ServerCredentials | None,
        token: bytes | None,
        ready: Callable[[], list[str]],
    ) -> None:
        self.service = service
        self.listen = listen
        self.max_message_bytes = max_message_bytes
        self.creds = creds
        self.token = token
        self.server: grpc.aio.Server | None = None
        self.health = ReadyHealth(ready)
        self._poll: asyncio.Task[None] | None = None

    def _handlers(self) -> dict[str, grpc.RpcMethodHandler[Any, Any]]:
        svc = self.service
        # Filter and Ingest take and give wire bytes: parsing and serializing happen in the service's work.
        return {
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

    async def start(self, host: ServerHost) -> list[Listen]:
        size = self.max_message_bytes
        interceptors = []
        if self.token is not None:
            reader = self.service.reader_token
            also = {f"/{SERVICE}/GetProfile": reader} if reader is not None else {}
            interceptors.append(BearerTokenAuth(self.token, self.service.refuse, exempt=(HEALTH_PREFIX,), also=also))
        server = grpc.aio.server(
            interceptors=interceptors,
            options=[
                ("grpc.max_receive_message_length", size),
                ("grpc.max_send_message_length", size),
                ("grpc.so_reuseport", 0),  # a second sidecar on the same port fails instead of sharing it
            ],
        )
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, self._handlers()),))
        health_pb2_grpc.add_HealthServicer_to_server(self.health, server)
        address = str(self.listen)
        try:
            port = server.add_secure_port(address, self.creds) if self.creds else server.add_insecure_port(address)
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {address}") from exc
        if not port:
            raise OSError(f"cannot listen on {address}")
        await server.start()
        self.server = server
        await self.health.refresh()
        self._poll = asyncio.get_running_loop().create_task(self.health.poll())
        return [Listen(self.listen.host, port)]

    async def stop(self, host: ServerHost, grace: float) -> None:
        if self._poll is not None:
            self._poll.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._poll
        await self.health.enter_graceful_shutdown()
        if self.server is not None:
            await self.server.stop(grace)
