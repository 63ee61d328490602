"""Options of the ``vector`` source and the ``vector`` sink."""

from __future__ import annotations

import re
from dataclasses import dataclass

from sidecar.api import (
    BearerToken,
    ConfigValueError,
    Listen,
    OutboxOptions,
    ServerTls,
    SinkConfig,
    SourceConfig,
    listen_option,
    option,
)

_OUTBOX_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")


@dataclass(frozen=True)
class VectorSourceConfig(ServerTls, BearerToken, SourceConfig):
    """Vector's native protocol (version 2) as a source: what Vector's `vector` sink sends to.

    Records are Vector log events; the roles are top-level keys of the log named by `schema.roles`
    (defaults: the AOL names, so set them, e.g. `{user: user_id, query: message, time: timestamp,
    rank: null, url: null}`). A `PushEvents` reply is sent only once its events are durable (delivered,
    in a sink's outbox, or held by a filter); otherwise the reply is an error status (RESOURCE_EXHAUSTED
    when an outbox or the disk is full, UNAVAILABLE for another failure) and Vector retries. Metrics and
    traces are not queries: they are dead-lettered as `unsupported_event`. TLS and mutual TLS (Vector's
    sink `tls.crt_file`/`tls.key_file` as its client certificate) are the shared server TLS options; with a
    bearer token (`auth_token_file`/`auth_token_env`), PushEvents without `authorization: Bearer <token>`
    metadata is refused with UNAUTHENTICATED (HealthCheck stays open; a sender that cannot add the metadata
    authenticates with mutual TLS instead).
    """

    listen: str = listen_option("127.0.0.1:6000", "host:port to listen on (Vector's `vector` sink `address`).")
    max_message_bytes: int = option(
        64 * 1024 * 1024,
        "Largest PushEvents request accepted (bytes); a larger one is refused with RESOURCE_EXHAUSTED. "
        "Each event is also bounded by limits.max_record_bytes (longer ones are dead-lettered).",
        min=1024,
    )
    max_events_per_message: int = option(
        100_000,
        "Most events in one PushEvents request; a request with more is refused with INVALID_ARGUMENT before any "
        "event is read (counted as requests_too_many_events): set the Vector sink's `batch.max_events` lower. "
        "It bounds the memory one request can take, whatever its size on the wire.",
        min=1,
    )
    shutdown_grace_seconds: float = option(10.0, "On stop, how long in-flight requests may take to finish.", min=0)

    def __post_init__(self) -> None:
        super().__post_init__()
        Listen.parse(self.listen)


@dataclass(frozen=True)
class VectorSinkConfig(OutboxOptions, SinkConfig):
    """Vector's native protocol (version 2) as a sink: `PushEvents` to a Vector `vector` source.

    Events from a Vector source keep every field, their metadata and their bytes (only the protected
    fields change); events from other formats become logs of their fields (a UBI record, `format: ubi`: a log
    whose map is the record, nesting kept). Batches go through a durable
    outbox in the state store: `flush` returns once a batch is in it, a sender thread delivers it and
    deletes it only when Vector replied (Vector acknowledges end to end), retrying with backoff. When the
    outbox is full the sink refuses more (sources stop acknowledging) instead of dropping.
    """

    address: str = option("127.0.0.1:6000", "host:port of the downstream Vector `vector` source.")
    tls_ca_file: str | None = option(
        None, "PEM CA certificate(s) that signed the server's certificate (relative to the config file): enables TLS."
    )
    tls_server_name: str | None = option(
        None, "With TLS, the name the server certificate must carry (default: the host of `address`)."
    )
    compression: bool = option(False, "gzip each request (as Vector's `vector` sink `compression: true` does).")
    timeout_seconds: float = option(30.0, "How long one PushEvents may take before it is retried.", gt=0)
    batch_size: int = option(1000, "Most events per PushEvents request.", min=1, max=100000)
    max_batch_bytes: int = option(
        4 * 1024 * 1024,
        "Most bytes per PushEvents request (gRPC servers refuse more than 4 MiB unless configured otherwise); "
        "a single larger event still goes alone.",
        min=1024,
    )
    outbox_name: str | None = option(
        None,
        "Name of this sink's outbox in the state store (letters, digits, _; null: `vector_` and the address, "
        "e.g. vector_127_0_0_1_6000). Undelivered batches wait under this name across restarts: keep it when "
        "the address changes and they should go to the new address.",
    )

    def __post_init__(self) -> None:
        Listen.parse(self.address, "address")  # a peer's host:port, as a listen address is written
        if self.tls_server_name is not None and self.tls_ca_file is None:
            raise ConfigValueError("tls_server_name", "tls_server_name needs TLS: set tls_ca_file as well")
        if self.outbox_name is not None and not _OUTBOX_NAME.fullmatch(self.outbox_name):
            raise ConfigValueError("outbox_name", "must be 1-64 ASCII letters, digits or _")
        super().__post_init__()
