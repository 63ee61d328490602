"""The ``otlp`` source: OpenTelemetry logs over OTLP/gRPC and OTLP/HTTP (see :mod:`adapters.otlp`).

Loading the plugin (to validate a config) starts nothing; :meth:`OtlpSource.start` binds both servers on one
shared host (:mod:`sidecar.serving`, :mod:`adapters.otlp.server`).
"""

from __future__ import annotations

import hmac
import time
from typing import TYPE_CHECKING, Any

import structlog

from adapters.otlp.config import OtlpSourceConfig
from adapters.otlp.objects import source_codec
from sidecar.api import BuildContext, HostedSource, Listen, Runtime, Source

if TYPE_CHECKING:
    from adapters.otlp.server import OtlpServers
    from sidecar.serving import ServerHost

log = structlog.get_logger("querylog.otlp")

#: worker threads for requests: two, so one request is split (or its JSON parsed) while another is in the chain
#: (one batch at a time) or waits for the disk. More only contend for the GIL: with 4, bench otlp's sidecar spent
#: 13.9-14.3 us of CPU a record, with 2 or 1 12.0-13.7 (the same runs, interleaved, loaded machine)
WORKERS = 2


class OtlpSource(HostedSource, Source[OtlpSourceConfig]):
    """OTLP log exporters send here (gRPC and HTTP): log records in, answered only once durable."""

    NAME = "otlp"
    Config = OtlpSourceConfig
    SUMMARY = (
        "OpenTelemetry logs: OTLP/gRPC LogsService/Export and OTLP/HTTP POST /v1/logs (protobuf, JSON); answered "
        "once durable, bad records counted in partial_success"
    )

    def __init__(
        self, config: OtlpSourceConfig, ctx: BuildContext, listen: str | None = None, http_listen: str | None = None
    ) -> None:
        """``listen``/``http_listen`` override the configured addresses (tests: ``127.0.0.1:0``)."""
        super().__init__(config, ctx)
        self.listen = listen or config.listen
        self.http_listen = http_listen or config.http_listen
        self.tls = config.server_tls(ctx)
        self.token = config.bearer_token(ctx)
        self.host: ServerHost | None = None
        self.server: OtlpServers | None = None
        self.final_counts: dict[str, int] = {}

    def start(self, runtime: Runtime) -> None:
        """Bind and serve on the shared host; returns once listening."""

        from adapters.otlp.export import Exporter
        from adapters.otlp.server import OtlpServers
        from sidecar.serving import ServerHost, grpc_server_credentials, ssl_server_context

        tls = self.tls
        creds = grpc_server_credentials(tls)
        host = ServerHost("otlp", workers=WORKERS, lock=runtime.lock)
        interceptors: list[Any] = []
        if self.token is not None:
            from sidecar.grpcauth import BearerTokenAuth

            interceptors.append(BearerTokenAuth(self.token, self._refused, logger="querylog.otlp"))
        exporter = Exporter(
            runtime,
            source_codec(self.ctx),  # the otlp codec, or format: ubi's over the records' bodies
            max_records=self.config.max_records_per_request,
            max_record_bytes=self.ctx.max_record_bytes,
        )
        server = OtlpServers(
            exporter,
            self.config,
            listen=Listen.parse(self.listen),
            http_listen=Listen.parse(self.http_listen, "http_listen") if self.http_listen else None,
            creds=creds,
            ssl_context=ssl_server_context(self.config, self.ctx),
            interceptors=interceptors,
            check_token=self.check_token,
        )
        host.start(server)
        self.host, self.server = host, server
        log.info(
            "otlp_source_started",
            grpc_port=host.listening[0].port,
            http_port=host.listening[1].port if len(host.listening) > 1 else None,
            tls=tls is not None,
            auth_token=self.token is not None,
        )
        if self.token is not None and tls is None:
            log.warning("auth_token_without_tls", hint="the token crosses the network in clear text")

    def check_token(self, header: str | None) -> str | None:
        """HTTP: None when no token is configured or the header carries it; else the reason."""
        if self.token is None:
            return None
        scheme, _, value = (header or "").strip().partition(" ")
        if scheme.lower() != "bearer" or not value.strip():
            self._refused("missing_token")
            return "missing_token"
        if not hmac.compare_digest(value.strip().encode("utf-8", "surrogateescape"), self.token):
            self._refused("wrong_token")
            return "wrong_token"
        return None

    @property
    def http_port(self) -> int:
        """The bound HTTP port (``http_listen`` set)."""
        assert self.host is not None and len(self.host.listening) > 1, "start() with http_listen first"
        return self.host.listening[1].port

    def stats(self) -> dict[str, Any]:
        """Requests by outcome, records accepted and rejected: counts only."""
        return self.host.stats() if self.host is not None else dict(self.final_counts)

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting; in-flight requests finish within ``grace`` (default ``shutdown_grace_seconds``)."""
        host = self.host
        if host is None:
            return
        started = time.monotonic()
        host.stop(self.config.shutdown_grace_seconds if grace is None else grace)
        self.final_counts = host.stats()
        log.info("otlp_source_stopped", stop_seconds=round(time.monotonic() - started, 3), **self.final_counts)
        self.host = self.server = None
