"""Option types shared by every network source and sink, declared and documented once.

* :class:`Listen` — a ``host:port`` listen address (port 0: any free port; the source reports the port it
  bound through :meth:`~sidecar.api.Source.listening`). Declare it with :func:`listen_option`; read it with
  ``Listen.parse(config.listen)``.
* :class:`ServerTls` — TLS for a server, with client certificates (mutual TLS) when a client CA is set.
* :class:`BearerToken` — a bearer token every request must carry, from an environment variable or a file.
* :class:`OutboxOptions` — the bounds and retry timing of a network sink's durable queue
  (:meth:`~sidecar.api.BuildContext.outbox`).

The three mixins are frozen, keyword-only dataclasses: a config class lists them among its bases
(``class MyServerConfig(ServerTls, BearerToken, SourceConfig)``) and gets their keys, checks and docs; a
``__post_init__`` of its own calls ``super().__post_init__()``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sidecar.api.config import ConfigValueError, option

if TYPE_CHECKING:
    from sidecar.api.context import BuildContext

#: What an environment variable's name looks like (a value that does not is never echoed: it may be a secret).
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

LISTEN_DOC = "host:port to listen on (port 0: any free port, reported in the `listening` log event)."


@dataclass(frozen=True)
class Listen:
    """A listen address: ``host`` (a name, an IPv4 address, or an IPv6 address, bracketed or not) and ``port``."""

    host: str
    port: int

    @classmethod
    def parse(cls, text: str, key: str = "listen") -> Listen:
        """``host:port`` (``[::1]:80`` too); :class:`ConfigValueError` at ``key`` when it is not one."""
        host, sep, port = str(text).rpartition(":")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        if not sep or not host or not port.isdigit() or int(port) > 65535:
            raise ConfigValueError(key, f"must be host:port (port 0..65535), got {text!r}")
        return cls(host, int(port))

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def listen_option(default: str | None, doc: str = LISTEN_DOC) -> Any:
    """Declare a listen-address option (``host:port``, checked with :meth:`Listen.parse` when the YAML loads)."""
    return option(default, doc, listen=True)


def check_env_name(key: str, value: str | None) -> None:
    """``value`` names an environment variable; never echo it (perhaps the secret itself was pasted there)."""
    if value is not None and not ENV_NAME.fullmatch(value):
        raise ConfigValueError(key, "must name an environment variable (letters, digits, _); the value is not shown")


def client_authentication(*, mtls: bool, token: bool = False, shared_key: bool = False) -> list[str]:
    """What a client must present, as :meth:`~sidecar.api.Source.authentication` reports it: any of ``mtls``
    (a client certificate), ``token`` (a bearer token), ``shared_key`` (a protocol's handshake); else ``none``."""
    kinds = [name for name, on in (("mtls", mtls), ("token", token), ("shared_key", shared_key)) if on]
    return kinds or ["none"]


@dataclass(frozen=True)
class TlsFiles:
    """What :meth:`ServerTls.server_tls` read: PEM bytes of the certificate chain, its key, and the client CA."""

    cert: bytes
    key: bytes
    client_ca: bytes | None


class _Checked:
    """Ends the cooperative ``__post_init__`` chain of the option mixins."""

    def __post_init__(self) -> None:
        pass


@dataclass(frozen=True, kw_only=True)
class ServerTls(_Checked):
    """TLS for a server: a certificate and key; with a client CA, every client must present a certificate."""

    tls_cert_file: str | None = option(None, "PEM certificate (chain) file; with tls_key_file the server speaks TLS.")
    tls_key_file: str | None = option(None, "PEM private key file for TLS.")
    tls_client_ca_file: str | None = option(
        None,
        "PEM CA certificate(s) for mutual TLS: every client must present a certificate signed by one of them "
        "(a client without one, or with another, cannot connect). Needs tls_cert_file.",
    )

    def __post_init__(self) -> None:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ConfigValueError("tls_cert_file", "Set both tls_cert_file and tls_key_file, or neither")
        if self.tls_client_ca_file is not None and self.tls_cert_file is None:
            raise ConfigValueError("tls_client_ca_file", "mutual TLS needs TLS: set tls_cert_file and tls_key_file")
        super().__post_init__()

    @property
    def tls_enabled(self) -> bool:
        return self.tls_cert_file is not None

    def server_tls(self, ctx: BuildContext) -> TlsFiles | None:
        """The PEM files, read (None: no TLS). An unreadable file is a :class:`ConfigValueError` at its key."""
        if self.tls_cert_file is None or self.tls_key_file is None:
            return None

        def read(key: str, name: str) -> bytes:
            path = ctx.resolve(name)
            try:
                return path.read_bytes()
            except OSError as exc:
                raise ConfigValueError(key, f"cannot read {path}: {exc.strerror}") from None

        ca = read("tls_client_ca_file", self.tls_client_ca_file) if self.tls_client_ca_file else None
        return TlsFiles(read("tls_cert_file", self.tls_cert_file), read("tls_key_file", self.tls_key_file), ca)


@dataclass(frozen=True, kw_only=True)
class BearerToken(_Checked):
    """A bearer token every request must carry (``Authorization: Bearer <token>``), compared in constant time."""

    auth_token_file: str | None = option(
        None,
        "File holding a bearer token (relative to the config file): every request must carry "
        "`Authorization: Bearer <token>`, else it is refused (counted by reason). Use TLS with it outside loopback.",
        secret_ref=True,
    )
    auth_token_env: str | None = option(
        None, "Environment variable holding the bearer token (instead of auth_token_file).", secret_ref=True
    )

    def __post_init__(self) -> None:
        if self.auth_token_file is not None and self.auth_token_env is not None:
            raise ConfigValueError("auth_token_file", "Set auth_token_file or auth_token_env, not both")
        check_env_name("auth_token_env", self.auth_token_env)
        super().__post_init__()

    def bearer_token(self, ctx: BuildContext) -> bytes | None:
        """The token (None: none configured); a problem is reported at the option's key."""
        if self.auth_token_env is None and self.auth_token_file is None:
            return None
        try:
            return ctx.secret(self.auth_token_env, self.auth_token_file, "bearer token").strip()
        except ConfigValueError as exc:
            key = "auth_token_env" if self.auth_token_env is not None else "auth_token_file"
            raise ConfigValueError(key, exc.problem) from None


@dataclass(frozen=True, kw_only=True)
class OutboxOptions(_Checked):
    """A network sink's durable queue in the state database: bounds, then backpressure; retries with backoff."""

    outbox_max_bytes: int = option(
        256 * 1024 * 1024,
        "Bytes of undelivered batches kept at most (in the state database); when full, sources stop "
        "acknowledging (backpressure) until the peer takes batches again.",
        min=1024,
    )
    outbox_max_batches: int = option(10_000, "Undelivered batches kept at most (see outbox_max_bytes).", min=1)
    retry_initial_seconds: float = option(0.5, "First wait before sending a failed batch again (doubles).", gt=0)
    retry_max_seconds: float = option(30.0, "Longest wait between two attempts.", gt=0)
    close_drain_seconds: float = option(
        10.0,
        "On shutdown, how long to keep sending what the outbox holds; the rest stays in the state database "
        "and is sent after the next start.",
        min=0,
    )

    def __post_init__(self) -> None:
        if self.retry_max_seconds < self.retry_initial_seconds:
            raise ConfigValueError("retry_max_seconds", "must be >= retry_initial_seconds")
        super().__post_init__()
