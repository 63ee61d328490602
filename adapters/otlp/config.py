"""Options of the ``otlp`` source and the ``otlp`` sink."""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass
from typing import Literal

from sidecar.api import (
    BearerToken,
    ConfigValueError,
    Listen,
    OutboxOptions,
    ServerTls,
    SinkConfig,
    SourceConfig,
    check_env_name,
    listen_option,
    option,
)

_OUTBOX_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")


@dataclass(frozen=True)
class OtlpSourceConfig(ServerTls, BearerToken, SourceConfig):
    """OpenTelemetry logs (OTLP) as a source: what an OTel SDK's or Collector's OTLP log exporter sends.

    gRPC `LogsService/Export` on `listen`; OTLP/HTTP `POST /v1/logs` (`application/x-protobuf` or
    `application/json`, gzip too) on `http_listen`. A record is one log record with its resource and scope;
    the roles are `body`, `attributes.<key>`, `resource.<key>` or `time_unix_nano` (schema.roles; a bare name is
    an attribute key). The export is answered only once its records are durable; bad records (no query, a
    query that is not a string...) are dead-lettered and counted in the answer's `partial_success`, never
    failing the export. A full outbox answers RESOURCE_EXHAUSTED (gRPC) or 503 with `Retry-After` (HTTP), which
    the exporters retry. TLS and the bearer token (`authorization: Bearer`, metadata or header) apply to both.
    """

    listen: str = listen_option("127.0.0.1:4317", "host:port of OTLP/gRPC (the exporters' default port is 4317).")
    http_listen: str | None = listen_option(
        None, "host:port of OTLP/HTTP (`POST /v1/logs`; the exporters' default port is 4318); null: no HTTP."
    )
    max_message_bytes: int = option(
        16 * 1024 * 1024,
        "Largest export request (bytes, after decompression); a larger one is refused (gRPC RESOURCE_EXHAUSTED, "
        "HTTP 413). Each log record is also bounded by limits.max_record_bytes (longer ones are rejected).",
        min=1024,
    )
    max_records_per_request: int = option(
        100_000,
        "Most log records in one export request; a request with more is refused (INVALID_ARGUMENT, HTTP 400) "
        "before any record is taken: lower the exporter's batch size (`max_export_batch_size`).",
        min=1,
    )
    retry_after_seconds: int = option(
        2,
        "When a sink's outbox is full: the `Retry-After` of HTTP's 503, and the `RetryInfo` delay of gRPC's "
        "RESOURCE_EXHAUSTED (OTLP's throttling).",
        min=1,
    )
    max_connections: int = option(
        1000,
        "OTLP/HTTP: open connections at most. One more closes the connection idle the longest (no request in "
        "progress) to make room; when every one is busy it is answered 503 with `Retry-After` and closed. "
        "(gRPC multiplexes an exporter's requests on one connection.)",
        min=1,
        max=65536,
    )
    shutdown_grace_seconds: float = option(10.0, "On stop, how long in-flight requests may take to finish.", min=0)

    def __post_init__(self) -> None:
        super().__post_init__()
        Listen.parse(self.listen)
        if self.http_listen is not None:
            Listen.parse(self.http_listen, "http_listen")


@dataclass(frozen=True)
class OtlpSinkConfig(OutboxOptions, SinkConfig):
    """OpenTelemetry logs (OTLP) as a sink: export requests to an OTLP receiver (a Collector, another sidecar).

    Records from an otlp source leave as they came (resource, scope, attributes in order, timestamps, severity,
    ids; byte for byte when unchanged); records of other formats become log records of their fields. Batches
    go through a durable outbox; throttling (gRPC RESOURCE_EXHAUSTED/UNAVAILABLE, HTTP 429/502/503/504) is
    retried, after the peer's `Retry-After` (HTTP) or `RetryInfo` delay (gRPC) when it gives one; a batch the
    peer refuses for good (HTTP 400, gRPC INVALID_ARGUMENT) is dead-lettered (`otlp_rejected`). With
    `tls_cert_file` and `tls_key_file` the sink presents a client certificate (a receiver requiring mutual TLS).
    """

    endpoint: str = option(
        "http://127.0.0.1:4318/v1/logs",
        "Where to export: `http://host:port/v1/logs` (or https) with protocol http; `host:port` with protocol grpc.",
    )
    protocol: Literal["http", "grpc"] = option("http", "OTLP/HTTP with protobuf bodies, or OTLP/gRPC.")
    tls_ca_file: str | None = option(
        None, "gRPC: PEM CA certificate(s) of the server (enables TLS); HTTP: the CA for an https endpoint."
    )
    tls_cert_file: str | None = option(
        None,
        "PEM client certificate (chain) presented to a receiver that requires mutual TLS (with tls_key_file; "
        "gRPC: needs tls_ca_file, HTTP: an https endpoint).",
    )
    tls_key_file: str | None = option(None, "PEM private key of tls_cert_file.", secret_ref=True)
    bearer_token_env: str | None = option(
        None, "Environment variable holding a bearer token sent as `authorization: Bearer`.", secret_ref=True
    )
    bearer_token_file: str | None = option(None, "File holding the bearer token (instead of the env).", secret_ref=True)
    compression: Literal["none", "gzip"] = option("none", "Compress each request.")
    timeout_seconds: float = option(30.0, "How long one export may take before it is retried.", gt=0)
    batch_size: int = option(1000, "Most log records per export request.", min=1, max=100_000)
    max_batch_bytes: int = option(
        4 * 1024 * 1024, "Most bytes per export request (a single larger record still goes alone).", min=1024
    )
    outbox_name: str | None = option(
        None,
        "Name of this sink's outbox in the state store (letters, digits, _; null: `otlp_` and the endpoint). "
        "Undelivered batches wait under it across restarts.",
    )

    def __post_init__(self) -> None:
        if self.protocol == "grpc":
            Listen.parse(self.endpoint, "endpoint")
        else:
            parts = urllib.parse.urlsplit(self.endpoint)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise ConfigValueError("endpoint", "must be http(s)://host:port/v1/logs with protocol http")
        if self.tls_cert_file is not None and self.tls_key_file is None:
            raise ConfigValueError("tls_cert_file", "Set tls_key_file too (the certificate's private key)")
        if self.tls_key_file is not None and self.tls_cert_file is None:
            raise ConfigValueError("tls_key_file", "Set tls_cert_file too (the client certificate)")
        if self.tls_cert_file is not None:
            if self.protocol == "grpc" and self.tls_ca_file is None:
                raise ConfigValueError("tls_cert_file", "a client certificate needs TLS: set tls_ca_file")
            if self.protocol == "http" and not self.endpoint.startswith("https://"):
                raise ConfigValueError("tls_cert_file", "a client certificate needs TLS: an https:// endpoint")
        if self.bearer_token_env is not None and self.bearer_token_file is not None:
            raise ConfigValueError("bearer_token_file", "Set bearer_token_env or bearer_token_file, not both")
        check_env_name("bearer_token_env", self.bearer_token_env)
        if self.outbox_name is not None and not _OUTBOX_NAME.fullmatch(self.outbox_name):
            raise ConfigValueError("outbox_name", "must be 1-64 ASCII letters, digits or _")
        super().__post_init__()
