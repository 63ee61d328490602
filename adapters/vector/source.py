"""The ``vector`` source: Vector's native protocol (``vector.Vector/PushEvents``), see :mod:`adapters.vector`.

Loading the plugin (to validate a config) imports no gRPC server; :meth:`VectorSource.start` does. The server
runs on the shared host (:mod:`sidecar.serving`); :mod:`adapters.vector.server` holds its handlers.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import structlog

from adapters.vector.codec import VectorCodec
from adapters.vector.config import VectorSourceConfig
from adapters.vector.objects import log_object
from sidecar.api import BuildContext, Codec, HostedSource, Listen, RolesConfig, Runtime, Source
from sidecar.objectrecords import ObjectRecords, reads_objects

if TYPE_CHECKING:
    from adapters.vector.server import VectorProtocol
    from sidecar.serving import ServerHost

log = structlog.get_logger("querylog.vector")

#: the RPC a probe may call without the token
HEALTH_CHECK = "/vector.Vector/HealthCheck"
#: worker threads for received requests (splitting runs in parallel; the chain one batch at a time)
WORKERS = 4


class VectorSource(HostedSource, Source[VectorSourceConfig]):
    """Vector's `vector` sink sends here: log events in, acknowledged only once durable."""

    NAME = "vector"
    Config = VectorSourceConfig
    SUMMARY = "Vector native protocol v2 (vector.Vector/PushEvents, HealthCheck): what Vector's vector sink sends"

    def __init__(self, config: VectorSourceConfig, ctx: BuildContext, listen: str | None = None) -> None:
        """``listen`` overrides the configured address (tests: ``127.0.0.1:0``)."""
        super().__init__(config, ctx)
        self.listen = listen
        self.tls = config.server_tls(ctx)
        self.token = config.bearer_token(ctx)
        self.host: ServerHost | None = None
        self.server: VectorProtocol | None = None
        self.final_counts: dict[str, int] = {}

    def start(self, runtime: Runtime) -> None:
        """Bind and serve on the shared host; returns at once (requests run on the host's loop and workers)."""
        import grpc
        import grpc.aio

        from adapters.vector.server import VectorProtocol
        from sidecar.serving import ServerHost, grpc_server_credentials

        tls = self.tls
        creds = grpc_server_credentials(tls)
        host = ServerHost("vector", workers=WORKERS, lock=runtime.lock)
        codec = self.codec()
        interceptors: list[grpc.aio.ServerInterceptor] = []
        if self.token is not None:
            from sidecar.grpcauth import BearerTokenAuth

            interceptors.append(
                BearerTokenAuth(self.token, self._refused, exempt=(HEALTH_CHECK,), logger="querylog.vector")
            )
        protocol = VectorProtocol(
            runtime,
            host,
            codec,
            listen=Listen.parse(self.listen or self.config.listen),
            max_message_bytes=self.config.max_message_bytes,
            max_record_bytes=self.ctx.max_record_bytes,
            max_events=self.config.max_events_per_message,
            creds=creds,
            interceptors=interceptors,
        )
        host.start(protocol)
        self.host, self.server = host, protocol
        log.info(
            "vector_source_started",
            port=self.port,
            tls=tls is not None,
            mutual_tls=tls is not None and tls.client_ca is not None,
            auth_token=self.token is not None,
        )
        if self.token is not None and tls is None:
            log.warning("auth_token_without_tls", hint="the token crosses the network in clear text")
        if isinstance(codec, VectorCodec) and codec.schema.roles == RolesConfig():
            log.warning(
                "vector_roles_are_the_aol_defaults",
                hint="set schema.roles to your events' keys (e.g. user: user_id, query: message, time: timestamp); "
                "events without the query and user keys are dead-lettered",
            )

    def codec(self) -> Codec:
        """The codec of received logs: the vector codec (roles are keys of a log's map), or, when the schema's
        format reads JSON objects (``format: ubi``), that codec reading each log's map as its record
        (:mod:`adapters.vector.objects`)."""
        schema = self.ctx.schema
        own = self.ctx.codec_for(schema.format) if schema is not None else None
        if own is not None and reads_objects(own):
            return ObjectRecords(own, log_object)
        return VectorCodec(schema)

    def stop(self, grace: float | None = None) -> None:
        """Graceful stop: NOT_SERVING, in-flight requests finish within ``grace`` (default
        ``shutdown_grace_seconds``). The runtime stays open: its owner releases what filters hold, once."""
        host, server = self.host, self.server
        if host is None or server is None:
            return
        started = time.monotonic()
        host.stop(self.config.shutdown_grace_seconds if grace is None else grace)
        self.final_counts = server.counts
        log.info(
            "vector_source_stopped",
            stop_seconds=round(time.monotonic() - started, 3),
            **{f"requests_{k}": v for k, v in self.final_counts.items()},
        )
        self.host = self.server = None
