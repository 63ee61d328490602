"""The ``vector`` source: Vector's native protocol (``vector.Vector/PushEvents``), see :mod:`adapters.vector`.

Loading the plugin (to validate a config) imports no gRPC server; :meth:`VectorSource.start` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from adapters.vector.config import VectorSourceConfig
from sidecar.api import BuildContext, Runtime, Source

if TYPE_CHECKING:
    from adapters.vector.server import VectorServer


class VectorSource(Source[VectorSourceConfig]):
    """Vector's `vector` sink sends here: log events in, acknowledged only once durable."""

    NAME = "vector"
    Config = VectorSourceConfig
    SUMMARY = "Vector native protocol v2 (vector.Vector/PushEvents, HealthCheck): what Vector's vector sink sends"

    def __init__(self, config: VectorSourceConfig, ctx: BuildContext, listen: str | None = None) -> None:
        """``listen`` overrides the configured address (tests: ``127.0.0.1:0``)."""
        super().__init__(config, ctx)
        self.listen = listen
        self.server: VectorServer | None = None
        self.final_counts: dict[str, int] = {}

    def start(self, runtime: Runtime) -> None:
        """Bind and serve; returns at once (requests run on the server's threads)."""
        from adapters.vector.server import VectorServer

        self.server = VectorServer(self.config, self.ctx, runtime, self.listen)
        self.server.start()

    @property
    def port(self) -> int:
        """The bound port (useful with ``listen: host:0``)."""
        assert self.server is not None, "start() first"
        return int(self.server.port)

    def stop(self, grace: float | None = None) -> None:
        """Graceful stop: in-flight requests finish within ``grace``, buffering filters flush into the sinks."""
        if self.server is not None:
            self.final_counts = self.server.stop(grace)
            self.server = None
