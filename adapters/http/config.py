"""Options of the ``http`` source and the ``http`` sink."""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Mapping
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

#: An HTTP header name (RFC 9110 token).
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
#: Headers the sink sets itself.
_OWN_HEADERS = frozenset({"content-type", "content-encoding", "content-length", "host", "transfer-encoding"})


def check_one_of(pairs: Mapping[str, object]) -> None:
    """At most one of the options in ``pairs`` is set."""
    given = [k for k, v in pairs.items() if v is not None]
    if len(given) > 1:
        raise ConfigValueError(given[1], f"Set {' or '.join(pairs)}, not both")


@dataclass(frozen=True)
class HttpSourceConfig(ServerTls, BearerToken, SourceConfig):
    """Take records by HTTP POST: newline-delimited JSON (what Vector's `http` sink with
    `framing.method: newline_delimited` and Fluent Bit's `http` output with `format json_lines` send), a JSON
    array of objects, or msgpack. With `auth_token_*` every POST must carry the token (`GET /health` needs none)."""

    listen: str = listen_option("127.0.0.1:8080")
    path: str = option("/", "URL path that takes the POSTs; other paths answer 404 (`GET /health` is always there).")
    max_body_bytes: int = option(
        10 * 1024 * 1024,
        "Largest request body in bytes, as sent and after gzip decompression; a larger one is answered 413 "
        "(Payload Too Large) and the sender must split it.",
        min=1024,
    )
    max_connections: int = option(
        10000,
        "Open connections at most. One more closes the connection idle the longest (no request in progress) to "
        "make room, so idle peers never lock a client out; when every one is busy it is answered 503 (on a TLS "
        "port over TLS, once its handshake completed) and closed. Idle connections cost no thread (mind the "
        "process's open-file limit).",
        min=1,
        max=65536,
    )
    idle_timeout_seconds: float = option(
        60.0,
        "A connection idle this long (before or between requests, while its request headers or its body stop "
        "arriving) is closed; a stalled body is answered 408 first.",
        gt=0,
    )
    body_timeout_seconds: float = option(
        120.0,
        "A request body must arrive whole within this many seconds of its headers, however it trickles in; "
        "else 408 and the connection is closed.",
        gt=0,
    )
    handshake_timeout_seconds: float = option(
        10.0, "With TLS: a connection whose TLS handshake has not completed within this many seconds is closed.", gt=0
    )
    retry_after_seconds: int = option(
        2, "`Retry-After` of a 503 (a sink's outbox is full, or the sinks failed): when the sender should retry.", min=1
    )
    shutdown_grace_seconds: float = option(
        10.0, "On stop, how long requests in progress may take to finish before the connections are closed.", min=0
    )

    def __post_init__(self) -> None:
        Listen.parse(self.listen)
        if not self.path.startswith("/"):
            raise ConfigValueError("path", f"must start with /, got {self.path!r}")
        super().__post_init__()


@dataclass(frozen=True)
class HttpSinkConfig(OutboxOptions, SinkConfig):
    """POST events as newline-delimited JSON (one object per line, the input's keys) in batches, through a
    durable outbox: a batch is acknowledged upstream once it is in the outbox, and sent (again) until the
    peer answers 2xx. 5xx, 408, 429 and connection errors are retried with exponential backoff and jitter;
    any other 4xx is a permanent refusal: the batch's events are dead-lettered (`rejected_by_peer`)."""

    url: str = option(doc="http(s)://host[:port]/path to POST to.")
    compression: Literal["none", "gzip"] = option("none", "gzip: compress each body (`Content-Encoding: gzip`).")
    content_type: str = option("application/x-ndjson", "`Content-Type` of the bodies.")
    batch_max_events: int = option(1000, "Events per POST at most.", min=1, max=1_000_000)
    batch_max_bytes: int = option(
        1024 * 1024, "Bytes per POST (before compression) at most; a single larger event goes alone.", min=1024
    )
    timeout_seconds: float = option(10.0, "Seconds to wait for a connection and for the answer.", gt=0)
    headers: Mapping[str, str] | None = option(
        None, "Extra headers, `{name: value}` (values in the YAML: nothing secret; see headers_env/headers_file)."
    )
    headers_env: Mapping[str, str] | None = option(
        None, "Extra headers whose values are secret: `{header name: environment variable}`.", secret_ref=True
    )
    headers_file: Mapping[str, str] | None = option(
        None,
        "Extra headers whose values are secret: `{header name: file}` (relative to the config file).",
        secret_ref=True,
    )
    bearer_token_env: str | None = option(
        None, "Environment variable holding a token sent as `Authorization: Bearer <token>`.", secret_ref=True
    )
    bearer_token_file: str | None = option(
        None, "File holding the bearer token (instead of bearer_token_env).", secret_ref=True
    )
    basic_user: str | None = option(None, "User name for HTTP Basic authentication (with basic_password_*).")
    basic_password_env: str | None = option(
        None, "Environment variable holding the Basic authentication password.", secret_ref=True
    )
    basic_password_file: str | None = option(
        None, "File holding the Basic authentication password (instead of basic_password_env).", secret_ref=True
    )
    tls_ca_file: str | None = option(
        None, "PEM CA certificate(s) to verify an https peer with (default: the system's trust store)."
    )

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigValueError("url", "must be http://host[:port]/path or https://...")
        if parts.username is not None or parts.password is not None:
            raise ConfigValueError(
                "url",
                "must not carry credentials (the value is not shown): use basic_user and "
                "basic_password_env/basic_password_file",
            )
        check_one_of({"bearer_token_env": self.bearer_token_env, "bearer_token_file": self.bearer_token_file})
        check_one_of({"basic_password_env": self.basic_password_env, "basic_password_file": self.basic_password_file})
        check_env_name("bearer_token_env", self.bearer_token_env)
        check_env_name("basic_password_env", self.basic_password_env)
        has_password = self.basic_password_env is not None or self.basic_password_file is not None
        if has_password and self.basic_user is None:
            raise ConfigValueError("basic_user", "Basic authentication needs basic_user with the password")
        if self.basic_user is not None and (self.bearer_token_env is not None or self.bearer_token_file is not None):
            raise ConfigValueError("basic_user", "Set a bearer token or Basic authentication, not both")
        for key in ("headers", "headers_env", "headers_file"):
            for name in getattr(self, key) or {}:
                if not _HEADER_NAME.fullmatch(name):
                    raise ConfigValueError(key, f"not a header name: {name!r}")
                if name.lower() in _OWN_HEADERS or (name.lower() == "authorization" and key == "headers"):
                    raise ConfigValueError(key, f"{name} is set by the sink (or secret: use headers_env/headers_file)")
        for env in (self.headers_env or {}).values():
            check_env_name("headers_env", env)
        super().__post_init__()
