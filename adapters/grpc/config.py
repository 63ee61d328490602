"""Options of the ``grpc`` source (the ``server:`` section of a config file)."""

from __future__ import annotations

from dataclasses import dataclass

from sidecar.api import ConfigValueError, SourceConfig, option


@dataclass(frozen=True)
class GrpcSourceConfig(SourceConfig):
    """The gRPC service (`querylog serve`)."""

    listen: str = option("127.0.0.1:50051", "host:port to listen on.")
    tls_cert_file: str | None = option(None, "PEM certificate file; with tls_key_file enables TLS.")
    tls_key_file: str | None = option(None, "PEM private key file for TLS.")
    max_message_bytes: int = option(64 * 1024 * 1024, "Largest gRPC message accepted or sent.", min=1024)
    flush_interval_seconds: float = option(1.0, "How often buffering filters are asked to release.", gt=0)
    shutdown_grace_seconds: float = option(10.0, "On SIGTERM, how long in-flight RPCs may take to finish.", min=0)
    workers: int = option(8, "Threads serving RPCs.", min=1, max=256)
    metrics_listen: str | None = option(
        None, "host:port of a Prometheus /metrics endpoint (counts and reasons only); null: off."
    )

    def __post_init__(self) -> None:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ConfigValueError("tls_cert_file", "Set both tls_cert_file and tls_key_file, or neither")
        for key in ("listen", "metrics_listen"):
            value = getattr(self, key)
            if value is None:
                continue
            host, _, port = value.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigValueError(key, f"must be host:port, got {value!r}")
