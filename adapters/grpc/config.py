"""Options of the ``grpc`` source (the ``server:`` section of a config file).

``listen``, TLS (``tls_cert_file``, ``tls_key_file``, ``tls_client_ca_file`` for mutual TLS) and the bearer token
(``auth_token_file``/``auth_token_env``) are the shared option types of :mod:`sidecar.api.options`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sidecar.api import BearerToken, ConfigValueError, Listen, ServerTls, SourceConfig, listen_option, option


@dataclass(frozen=True)
class GrpcSourceConfig(ServerTls, BearerToken, SourceConfig):
    """The gRPC service (`querylog serve`). Every RPC but the health service carries the bearer token when one
    is set (else UNAUTHENTICATED, counted by reason in Stats and metrics)."""

    listen: str = listen_option("127.0.0.1:50051")
    filter_release: Literal["sinks", "any_stream"] = option(
        "sinks",
        "With a buffering chain (category_buffer), where events released from the buffers go: `sinks` (only to "
        "the configured sinks; a Filter response carries only its own request's events that passed straight "
        "through, and Filter is refused when no sink is configured) or `any_stream` (into the response of "
        "whichever Filter stream asks next: single-tenant only, since any caller may receive any user's events).",
    )
    profile_lookup: Literal["pseudonym", "raw"] = option(
        "pseudonym",
        "GetProfile: `pseudonym` serves profiles only when a pseudonymize filter of the user role runs before the "
        "profile filter (profiles are then keyed by the pseudonym the sidecar emits; otherwise FAILED_PRECONDITION); "
        "`raw` serves whatever the profile filter is keyed by, raw user ids included.",
    )
    max_message_bytes: int = option(64 * 1024 * 1024, "Largest gRPC message accepted or sent.", min=1024)
    shutdown_grace_seconds: float = option(10.0, "On SIGTERM, how long in-flight RPCs may take to finish.", min=0)
    workers: int = option(
        8,
        "Threads that work on received batches (decode, run the chain, encode; a batch estimated to take under "
        "2 ms runs on the event loop instead). The server is asynchronous: an open stream holds no thread while "
        "it waits, the chain runs one batch at a time under its lock, and health and Stats answer whatever this is.",
        min=1,
        max=256,
    )
    metrics_listen: str | None = option(
        None, "host:port of a Prometheus /metrics endpoint of this source (counts and reasons only); null: off."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        Listen.parse(self.listen)
        if self.metrics_listen is not None:
            Listen.parse(self.metrics_listen, "metrics_listen")


def printable_token(token: bytes, key: str) -> bytes:
    """``token`` when it can travel as gRPC metadata (printable ASCII, no spaces); the value is never shown."""
    if any(c < 0x21 or c > 0x7E for c in token):
        raise ConfigValueError(key, "the bearer token must be printable ASCII without spaces (value not shown)")
    return token
