"""Options of the ``grpc`` source (the ``server:`` section of a config file)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from sidecar.api import ConfigValueError, SourceConfig, option

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class GrpcSourceConfig(SourceConfig):
    """The gRPC service (`querylog serve`)."""

    listen: str = option("127.0.0.1:50051", "host:port to listen on.")
    tls_cert_file: str | None = option(None, "PEM certificate file; with tls_key_file enables TLS.")
    tls_key_file: str | None = option(None, "PEM private key file for TLS.")
    tls_client_ca_file: str | None = option(
        None,
        "PEM CA certificate(s) for mutual TLS: when set, every client must present a certificate signed by "
        "one of them (a client without one, or with another, cannot connect). Needs tls_cert_file.",
    )
    auth_token_file: str | None = option(
        None,
        "File holding a bearer token (relative to the config file): every RPC but the health service must carry "
        "`authorization: Bearer <token>` metadata, else UNAUTHENTICATED (counted by reason in Stats and "
        "metrics). Use TLS with it outside loopback.",
        secret_ref=True,
    )
    auth_token_env: str | None = option(
        None, "Environment variable holding the bearer token (instead of auth_token_file).", secret_ref=True
    )
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
    flush_interval_seconds: float = option(1.0, "How often buffering filters are asked to release.", gt=0)
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
        None, "host:port of a Prometheus /metrics endpoint (counts and reasons only); null: off."
    )

    def __post_init__(self) -> None:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ConfigValueError("tls_cert_file", "Set both tls_cert_file and tls_key_file, or neither")
        if self.tls_client_ca_file is not None and self.tls_cert_file is None:
            raise ConfigValueError(
                "tls_client_ca_file", "mutual TLS needs TLS: set tls_cert_file and tls_key_file as well"
            )
        if self.auth_token_file is not None and self.auth_token_env is not None:
            raise ConfigValueError("auth_token_file", "Set auth_token_file or auth_token_env, not both")
        if self.auth_token_env is not None and not _ENV_NAME.fullmatch(self.auth_token_env):
            # perhaps the token itself was pasted here: never echo it
            raise ConfigValueError(
                "auth_token_env", "must name an environment variable (letters, digits, _); the value is not shown"
            )
        for key in ("listen", "metrics_listen"):
            value = getattr(self, key)
            if value is None:
                continue
            host, _, port = value.rpartition(":")
            if not host or not port.isdigit():
                raise ConfigValueError(key, f"must be host:port, got {value!r}")
