"""Options of the ``forward`` source and sink (what Fluentd / Fluent Bit operators expect to set).

Secrets (the shared key, user passwords) come from an environment variable or a file only:
the YAML names the variable or the file, never the secret.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from typing import Literal

from sidecar.api import (
    BuildContext,
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


def _secret_names(env_key: str, env: str | None, file_key: str, file: str | None) -> None:
    if env is not None and file is not None:
        raise ConfigValueError(file_key, f"Set {env_key} or {file_key}, not both")
    check_env_name(env_key, env)


def read_secret(ctx: BuildContext, env_key: str, env: str | None, file_key: str, file: str | None, what: str) -> bytes:
    """The secret named by ``env`` or ``file``; a missing one is a ConfigValueError on the right key."""
    try:
        return ctx.secret(env, file, what)
    except ConfigValueError as exc:
        raise ConfigValueError(env_key if env else file_key, exc.problem) from None


#: The shortest shared key taken, as for the HMAC key of pseudonymize: a guessable key proves nothing.
MIN_SHARED_KEY_BYTES = 16


def read_shared_key(ctx: BuildContext, env: str | None, file: str | None) -> bytes:
    """The forward handshake's shared key (at least :data:`MIN_SHARED_KEY_BYTES`); a problem is on the right key."""
    key = read_secret(ctx, "shared_key_env", env, "shared_key_file", file, "shared key")
    if len(key) < MIN_SHARED_KEY_BYTES:
        raise ConfigValueError(
            "shared_key_env" if env else "shared_key_file",
            f"the shared key has {len(key)} bytes; at least {MIN_SHARED_KEY_BYTES} are needed (the value is not shown)",
        )
    return key


def default_hostname(role: str) -> str:
    """``<host>-querylog-<role>``: distinct from a Fluentd on the same host (which uses the bare host name)."""
    return f"{socket.gethostname()}-querylog-{role}"


@dataclass(frozen=True)
class ForwardUser:
    """A user of the handshake's user authentication (Fluentd `<user>`)."""

    username: str = option(doc="User name the client sends in its PING.")
    password_env: str | None = option(None, "Environment variable holding the user's password.", secret_ref=True)
    password_file: str | None = option(
        None, "File holding the user's password (relative to the config file).", secret_ref=True
    )

    def __post_init__(self) -> None:
        if not self.username:
            raise ConfigValueError("username", "must not be empty")
        if self.password_env is None and self.password_file is None:
            raise ConfigValueError("password_env", "Set password_env or password_file")
        _secret_names("password_env", self.password_env, "password_file", self.password_file)


@dataclass(frozen=True)
class ForwardSourceConfig(ServerTls, SourceConfig):
    """Fluentd forward protocol v1 server (Fluentd `in_forward`): TCP (+TLS, mutual TLS with a client CA) with the
    UDP heartbeat on the same port."""

    listen: str = listen_option(
        "127.0.0.1:24224", "host:port to listen on, TCP and UDP for the heartbeat (port 0: any free port, logged)."
    )
    shared_key_env: str | None = option(
        None,
        "Environment variable holding the shared key: when a shared key is set, every connection must pass the "
        "HELO/PING/PONG handshake before it may send events.",
        secret_ref=True,
    )
    shared_key_file: str | None = option(
        None, "File holding the shared key (instead of shared_key_env; relative to the config file).", secret_ref=True
    )
    users: tuple[ForwardUser, ...] = option(
        (), "Users of the handshake's user authentication (needs a shared key): the client must send one of them."
    )
    self_hostname: str | None = option(
        None, "Host name sent in HELO/PONG; must differ from the clients' own (default: `<host>-querylog-in`)."
    )
    max_frame_bytes: int = option(
        16 * 1024 * 1024,
        "Largest msgpack frame (one forward message) accepted; a larger one closes the connection "
        "(counted as oversized_frame).",
        min=1024,
    )
    max_decompressed_bytes: int = option(
        16 * 1024 * 1024,
        "Largest a compressed message (CompressedPackedForward) may expand to; past it the connection closes "
        "(counted and logged as decompressed_too_large) and its chunk is not acknowledged. Raise it for clients "
        "that gzip chunks expanding past 16 MiB (Fluentd's compress gzip with a large chunk_limit_size).",
        min=1024,
    )
    max_bad_entries: int = option(
        100,
        "Bad entries of one message dead-lettered one by one at most; at the next, the rest of the message is "
        "not read and one dead letter (too_many_bad_entries) gives the counts. Its good entries before are taken.",
        min=0,
    )
    max_partial_frames_bytes: int = option(
        256 * 1024 * 1024,
        "Memory for partial frames (messages still arriving) of all connections together; past it, the "
        "connection whose partial frame has been idle longest is closed (counted as partial_frame_budget).",
        min=1024,
    )
    keepalive: bool = option(
        True, "Announce keepalive in HELO and turn on TCP keepalive probes (dead peers are noticed and closed)."
    )
    idle_timeout_seconds: float = option(
        3600.0, "Close a connection that sent nothing for this long (0: never). Idle connections cost no thread.", min=0
    )
    handshake_timeout_seconds: float = option(
        10.0, "Time a client has for the TLS and PING handshakes before it is closed.", gt=0
    )
    heartbeat: bool = option(True, "Answer UDP heartbeats (a 0x00 byte) on the listen port.")
    max_connections: int = option(
        10000, "Open connections at most; more are closed at once (counted as too_many_connections).", min=1
    )
    max_batch_events: int = option(
        20000,
        "Events of several connections handed to the chain in one batch at most (one transaction; acks wait for it).",
        min=1,
    )

    def __post_init__(self) -> None:
        Listen.parse(self.listen)
        _secret_names("shared_key_env", self.shared_key_env, "shared_key_file", self.shared_key_file)
        if self.users and self.shared_key_env is None and self.shared_key_file is None:
            raise ConfigValueError("users", "user authentication is part of the handshake: set a shared key as well")
        names = [u.username for u in self.users]
        if len(set(names)) != len(names):
            raise ConfigValueError("users", "each username once")
        super().__post_init__()


@dataclass(frozen=True)
class ForwardSinkConfig(OutboxOptions, SinkConfig):
    """Fluentd forward protocol v1 client (Fluentd `out_forward`): PackedForward batches through a durable outbox."""

    address: str = option("127.0.0.1:24224", "host:port of the Fluentd / Fluent Bit / sidecar forward input.")
    require_ack: bool = option(
        True,
        "Send a chunk id with every message and wait for the server's ack before the batch leaves the outbox "
        "(at-least-once). false: a batch counts as delivered once written to the socket.",
    )
    ack_timeout_seconds: float = option(60.0, "How long to wait for an ack before the batch is sent again.", gt=0)
    connect_timeout_seconds: float = option(10.0, "TCP (and TLS, handshake) connect timeout.", gt=0)
    compress: Literal["text", "gzip"] = option("text", "text: PackedForward; gzip: CompressedPackedForward.")
    max_message_bytes: int = option(
        4 * 1024 * 1024,
        "A batch is sent as messages of at most about this many bytes of packed entries (one message per tag "
        "and size step); keep it below the server's limit (Fluentd: chunk_size_limit).",
        min=1024,
    )
    tag: str = option("querylog", "Tag of events that did not come in over forward (a file, gRPC).")
    shared_key_env: str | None = option(
        None, "Environment variable holding the shared key for the server's handshake.", secret_ref=True
    )
    shared_key_file: str | None = option(
        None, "File holding the shared key (instead of shared_key_env).", secret_ref=True
    )
    username: str | None = option(None, "User name for the server's user authentication (with a password).")
    password_env: str | None = option(None, "Environment variable holding the user's password.", secret_ref=True)
    password_file: str | None = option(None, "File holding the user's password.", secret_ref=True)
    self_hostname: str | None = option(
        None, "Host name sent in PING; must differ from the server's (default: `<host>-querylog-out`)."
    )
    tls: bool = option(False, "Connect with TLS.")
    tls_ca_file: str | None = option(None, "PEM CA certificate(s) to verify the server with (default: the system's).")
    tls_verify: bool = option(True, "Verify the server's certificate and host name (false only for tests).")
    tls_server_name: str | None = option(None, "Host name to verify the certificate against (default: the address's).")
    keepalive: bool = option(True, "Keep the connection open between batches (false: one connection per batch).")
    outbox_name: str | None = option(
        None, "Name of the outbox table in the state database (default: from the address); unique per sink."
    )

    def __post_init__(self) -> None:
        Listen.parse(self.address, "address")  # a peer's host:port, as a listen address is written
        _secret_names("shared_key_env", self.shared_key_env, "shared_key_file", self.shared_key_file)
        _secret_names("password_env", self.password_env, "password_file", self.password_file)
        has_password = self.password_env is not None or self.password_file is not None
        if has_password != (self.username is not None):
            raise ConfigValueError("username", "Set username with password_env or password_file, or none of them")
        if self.username is not None and self.shared_key_env is None and self.shared_key_file is None:
            raise ConfigValueError("username", "user authentication is part of the handshake: set a shared key as well")
        if self.outbox_name is not None and not re.fullmatch(r"[A-Za-z0-9_]{1,50}", self.outbox_name):
            raise ConfigValueError("outbox_name", "1-50 letters, digits or _")
        if self.tls_ca_file is not None and not self.tls:
            raise ConfigValueError("tls_ca_file", "set tls: true as well")
        super().__post_init__()
