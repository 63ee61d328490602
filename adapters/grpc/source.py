"""The ``grpc`` source: the ``querylog.v1.QueryLogFilter`` service (``server:`` in a config file).

Loading the plugin (to validate a config) imports no gRPC; :meth:`GrpcSource.start` does. Building it reads
the bearer token and the TLS files, so a missing one is a located config error. The server runs on the shared
host (:mod:`sidecar.serving`); this module only wires the protocol (:mod:`adapters.grpc.server`) to it.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import structlog

from adapters.grpc.config import GrpcSourceConfig, printable_token
from sidecar.api import BuildContext, ConfigValueError, HostedSource, Listen, Runtime, Source
from sidecar.objectrecords import reads_objects

if TYPE_CHECKING:
    from adapters.grpc.service import QueryLogService
    from sidecar.serving import ServerHost

log = structlog.get_logger("querylog.grpc")

#: Why a schema whose records are JSON objects of their own (``format: ubi``) cannot come through this service.
UBI_REFUSED = (
    "schema.format {} cannot be read by the grpc source: a QueryEvent carries five string roles and a flat "
    "map<string, string>, so a UBI record's nested objects, lists and numbers, and whether it is a query or an event "
    "joined to one, do not survive it; send UBI records as JSON to the http, forward, nats, vector or otlp source "
    "(with no sources listed, serve runs the grpc source: list yours under sources:)"
)


class GrpcSource(HostedSource, Source[GrpcSourceConfig]):
    """The ``QueryLogFilter`` service as a source: ``Ingest`` into the sinks, ``Filter`` back to the caller."""

    NAME = "grpc"
    Config = GrpcSourceConfig
    SUMMARY = "gRPC service querylog.v1.QueryLogFilter (Filter, Ingest, GetProfile, Stats) + health checking"

    def __init__(self, config: GrpcSourceConfig, ctx: BuildContext, listen: str | None = None) -> None:
        """``listen`` overrides the configured address (``serve --listen``; tests: ``127.0.0.1:0``)."""
        super().__init__(config, ctx)
        if ctx.schema is not None and reads_objects(ctx.codec_for(ctx.schema.format)):
            raise ConfigValueError("format", UBI_REFUSED.format(ctx.schema.format))
        self.listen = listen
        token = config.bearer_token(ctx)
        key = "auth_token_env" if config.auth_token_env else "auth_token_file"
        self.token = printable_token(token, key) if token is not None else None
        self.tls = config.server_tls(ctx)
        self.reader_token = config.profile_reader_token(ctx)
        if self.reader_token is not None and self.reader_token == self.token:
            raise ConfigValueError(
                "profile_reader_token_env" if config.profile_reader_token_env else "profile_reader_token_file",
                "the profile reader's token must differ from the ingest token (auth_token_*); the value is not shown",
            )
        self.host: ServerHost | None = None  # grpc is imported when the source starts, not when it loads
        self.service: QueryLogService | None = None
        self.metrics_port: int | None = None
        self._metrics: Any = None
        self.final_counts: dict[str, int] = {}

    def start(self, runtime: Runtime) -> None:
        """Bind and serve on the shared host; returns at once (RPCs run on the host's loop and workers)."""
        from adapters.grpc.server import GrpcProtocol
        from adapters.grpc.service import QueryLogService
        from sidecar.serving import ServerHost, grpc_server_credentials

        cfg = self.config
        host = ServerHost("grpc", workers=cfg.workers, lock=runtime.lock)
        service = QueryLogService(
            runtime,
            host,
            self.ctx.max_record_bytes,
            max_events=cfg.max_events_per_message,
            filter_release=cfg.filter_release,
            profile_lookup=cfg.profile_lookup,
            reader_token=self.reader_token,
            reader_subject=cfg.profile_reader_subject,
        )
        listen = Listen.parse(self.listen or cfg.listen)
        creds = grpc_server_credentials(self.tls)
        host.start(GrpcProtocol(service, listen, cfg.max_message_bytes, creds, self.token, runtime.ready))
        self.host, self.service = host, service
        if cfg.metrics_listen:
            from sidecar.metrics import serve_metrics

            try:
                self._metrics, _, self.metrics_port = serve_metrics(cfg.metrics_listen, service.locked_stats)
            except BaseException:
                self.stop(0)
                raise
        if self.token is not None and self.tls is None:
            log.warning("auth_token_without_tls", hint="the token crosses the network in clear text")
        log.info(
            "server_started",
            metrics_port=self.metrics_port,
            port=self.port,
            tls=self.tls is not None,
            mutual_tls=self.tls is not None and self.tls.client_ca is not None,
            auth_token=self.token is not None,
            workers=cfg.workers,
            filters=len(runtime.filters),
            sinks=len(runtime.sinks),
            filter_release=cfg.filter_release,
            profile_reader="token" if self.reader_token else "subject" if cfg.profile_reader_subject else "none",
        )

    def stop(self, grace: float | None = None) -> None:
        """Graceful stop: no new RPC, in-flight RPCs finish within ``grace`` (default ``shutdown_grace_seconds``),
        then the rest is cancelled. The runtime stays open (its owner releases what filters hold and closes it)."""
        host, service = self.host, self.service
        if host is None or service is None:
            return
        started = time.monotonic()
        host.stop(self.config.shutdown_grace_seconds if grace is None else grace)
        if self._metrics is not None:
            self._metrics.shutdown()
            self._metrics = None
        stats = service.locked_stats()
        self.final_counts = {k: v for k, v in stats.items() if k.startswith("events_")}
        log.info(
            "server_stopped",
            rpcs=service.rpcs,
            stop_seconds=round(time.monotonic() - started, 3),
            **host.stats(),
            **self.final_counts,
        )
        self.host = self.service = None
