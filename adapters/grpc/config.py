"""Options of the ``grpc`` source (the ``server:`` section of a config file).

``listen``, TLS (``tls_cert_file``, ``tls_key_file``, ``tls_client_ca_file`` for mutual TLS) and the bearer token
(``auth_token_file``/``auth_token_env``) are the shared option types of :mod:`sidecar.api.options`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sidecar.api import (
    BearerToken,
    BuildContext,
    ConfigValueError,
    Listen,
    ServerTls,
    SourceConfig,
    check_env_name,
    listen_option,
    option,
)


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
    profile_reader_token_file: str | None = option(
        None,
        "File holding the profile reader's token (relative to the config file): GetProfile answers only a call "
        "carrying it as its bearer token (`Authorization: Bearer <token>`; with auth_token_* set as well, it "
        "stands in for that token on GetProfile). The ingest token alone does not read profiles. With neither this, "
        "profile_reader_token_env nor profile_reader_subject set, GetProfile is refused (PERMISSION_DENIED).",
        secret_ref=True,
    )
    profile_reader_token_env: str | None = option(
        None, "Environment variable holding the profile reader's token (instead of the file).", secret_ref=True
    )
    profile_reader_subject: str | None = option(
        None,
        "Under mutual TLS (tls_client_ca_file), the client certificate allowed to call GetProfile: its subject as "
        "`CN=reader,O=Example` or its common name alone.",
    )
    max_message_bytes: int = option(64 * 1024 * 1024, "Largest gRPC message accepted or sent.", min=1024)
    max_events_per_message: int = option(
        100_000,
        "Most events in one Filter or Ingest message. A message with more ends its RPC with INVALID_ARGUMENT "
        "before any event is parsed (counted as too_many_events in Stats): the client sends smaller batches. "
        "It bounds the memory one message can take (each event costs some hundred bytes of objects, whatever "
        "its size on the wire).",
        min=1,
    )
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
        if self.profile_reader_token_file is not None and self.profile_reader_token_env is not None:
            raise ConfigValueError(
                "profile_reader_token_file", "Set profile_reader_token_file or profile_reader_token_env, not both"
            )
        check_env_name("profile_reader_token_env", self.profile_reader_token_env)
        if self.profile_reader_subject is not None and self.tls_client_ca_file is None:
            raise ConfigValueError(
                "profile_reader_subject", "a client certificate subject needs mutual TLS: set tls_client_ca_file"
            )

    def profile_reader_token(self, ctx: BuildContext) -> bytes | None:
        """The profile reader's token (None: none configured); a problem is reported at the option's key."""
        env, file = self.profile_reader_token_env, self.profile_reader_token_file
        if env is None and file is None:
            return None
        key = "profile_reader_token_env" if env is not None else "profile_reader_token_file"
        try:
            token = ctx.secret(env, file, "profile reader token").strip()
        except ConfigValueError as exc:
            raise ConfigValueError(key, exc.problem) from None
        return printable_token(token, key)


def printable_token(token: bytes, key: str) -> bytes:
    """``token`` when it can travel as gRPC metadata (printable ASCII, no spaces); the value is never shown."""
    if any(c < 0x21 or c > 0x7E for c in token):
        raise ConfigValueError(key, "the bearer token must be printable ASCII without spaces (value not shown)")
    return token
