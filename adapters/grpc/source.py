"""The ``grpc`` source: the ``querylog.v1.QueryLogFilter`` service (``server:`` in a config file).

Loading the plugin (to validate a config) imports no gRPC; :meth:`GrpcSource.start` does. Building it reads
the bearer token (``auth_token_file``/``auth_token_env``), so a missing one is a located config error.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.grpc.config import GrpcSourceConfig
from sidecar.api import BuildContext, ConfigValueError, Runtime, Source

if TYPE_CHECKING:
    from adapters.grpc.server import SidecarServer


class GrpcSource(Source[GrpcSourceConfig]):
    """The ``QueryLogFilter`` service as a source: ``Ingest`` into the sinks, ``Filter`` back to the caller."""

    NAME = "grpc"
    Config = GrpcSourceConfig
    SUMMARY = "gRPC service querylog.v1.QueryLogFilter (Filter, Ingest, GetProfile, Stats) + health checking"

    def __init__(self, config: GrpcSourceConfig, ctx: BuildContext, listen: str | None = None) -> None:
        super().__init__(config, ctx)
        self.listen = listen
        self.server: SidecarServer | None = None  # grpc is imported when the source starts, not when it loads
        self.final_counts: dict[str, int] = {}
        self.token = self._token(config, ctx)

    @staticmethod
    def _token(config: GrpcSourceConfig, ctx: BuildContext) -> bytes | None:
        """The bearer token from its file or environment variable (None: no token asked)."""
        if config.auth_token_file is None and config.auth_token_env is None:
            return None
        key = "auth_token_env" if config.auth_token_env else "auth_token_file"
        try:
            token = ctx.secret(config.auth_token_env, config.auth_token_file, "bearer token")
        except ConfigValueError as exc:  # ctx.secret names its own keys (key_env/key_file): name ours
            raise ConfigValueError(key, exc.problem) from None
        token = token.strip()
        if any(c < 0x21 or c > 0x7E for c in token):  # gRPC metadata is printable ASCII
            raise ConfigValueError(key, "the bearer token must be printable ASCII without spaces (value not shown)")
        return token

    def start(self, runtime: Runtime) -> None:
        """Bind and serve; returns at once (RPCs run on the server's threads)."""
        from adapters.grpc.server import SidecarServer

        self.server = SidecarServer(self.config, self.ctx, runtime, self.listen, self.token)
        self.server.start()

    @property
    def port(self) -> int:
        """The bound port (useful with ``listen: host:0``)."""
        assert self.server is not None, "start() first"
        return int(self.server.port)

    def stop(self, grace: float | None = None) -> None:
        """Graceful stop: in-flight RPCs finish within ``grace``, buffers flush, released events are delivered."""
        if self.server is not None:
            self.final_counts = self.server.stop(grace)
            self.server = None
