"""Options of the ``nats`` source and the ``nats`` sink (the connection options are shared: :class:`NatsClient`)."""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from typing import Any

from sidecar.api import (
    BuildContext,
    ConfigValueError,
    OutboxOptions,
    SinkConfig,
    SourceConfig,
    check_env_name,
    option,
)

#: A NATS subject token or a dotted subject without wildcards (what a stream, consumer or subject may be named).
_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_SUBJECT = re.compile(r"[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*")
_OUTBOX_NAME = re.compile(r"[A-Za-z0-9_]{1,64}")


def _check_name(key: str, value: str, what: str) -> None:
    if not _NAME.fullmatch(value):
        raise ConfigValueError(key, f"{what}: 1-64 ASCII letters, digits, _ or -")


def _check_subject(key: str, value: str) -> None:
    if not _SUBJECT.fullmatch(value) or len(value) > 200:
        raise ConfigValueError(key, "a NATS subject of dot-separated tokens (letters, digits, _, -), no wildcards")


@dataclass(frozen=True, kw_only=True)
class NatsClient:
    """How to reach the NATS servers: URLs, credentials (token, user and password, or a `.creds` file), TLS."""

    servers: tuple[str, ...] = option(
        ("nats://127.0.0.1:4222",),
        "NATS server URLs (`nats://host:port`, `tls://host:port`); the client reconnects to any of them.",
    )
    token_env: str | None = option(None, "Environment variable holding the connection's auth token.", secret_ref=True)
    token_file: str | None = option(None, "File holding the auth token (instead of token_env).", secret_ref=True)
    user: str | None = option(None, "User name (with password_env or password_file).")
    password_env: str | None = option(None, "Environment variable holding the user's password.", secret_ref=True)
    password_file: str | None = option(None, "File holding the user's password.", secret_ref=True)
    creds_file: str | None = option(
        None, "A NATS `.creds` file (user JWT and NKey seed, decentralised auth).", secret_ref=True
    )
    tls_ca_file: str | None = option(None, "PEM CA certificate(s) of the servers (enables TLS).")
    tls_cert_file: str | None = option(None, "PEM client certificate (mutual TLS; with tls_key_file).")
    tls_key_file: str | None = option(None, "PEM private key of the client certificate.")
    connect_timeout_seconds: float = option(5.0, "How long one connection attempt may take.", gt=0)

    def __post_init__(self) -> None:
        if not self.servers:
            raise ConfigValueError("servers", "name at least one server URL")
        for url in self.servers:
            scheme, sep, rest = str(url).partition("://")
            if not sep or scheme not in ("nats", "tls") or not rest:
                raise ConfigValueError("servers", "each must be nats://host:port or tls://host:port")
        for env_key, file_key in (("token_env", "token_file"), ("password_env", "password_file")):
            if getattr(self, env_key) is not None and getattr(self, file_key) is not None:
                raise ConfigValueError(file_key, f"Set {env_key} or {file_key}, not both")
            check_env_name(env_key, getattr(self, env_key))
        password = self.password_env is not None or self.password_file is not None
        if password and self.user is None:
            raise ConfigValueError("user", "a password needs a user")
        kinds = [self.token_env or self.token_file, self.user, self.creds_file]
        if sum(k is not None for k in kinds) > 1:
            raise ConfigValueError("creds_file", "use one of token_*, user/password_*, creds_file")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ConfigValueError("tls_cert_file", "Set both tls_cert_file and tls_key_file, or neither")
        after = getattr(super(), "__post_init__", None)  # the outbox options' checks, in a sink's config
        if after is not None:
            after()

    def connect_wait(self) -> float:
        """How long a first connection may take (each server tried once) before it is tried again."""
        return self.connect_timeout_seconds * len(self.servers) + 2.0

    def connect_options(self, ctx: BuildContext) -> dict[str, Any]:
        """Keyword arguments of ``nats.connect`` (secrets read now; a problem is reported at its option's key)."""
        out: dict[str, Any] = {
            "servers": list(self.servers),
            "connect_timeout": self.connect_timeout_seconds,
            "max_reconnect_attempts": -1,
            "reconnect_time_wait": 1,
            "name": "querylog-sidecar",
            "skip_subject_validation": True,  # the subjects are checked in the config; the server's are valid
        }
        token = _secret(ctx, self.token_env, self.token_file, "token_env", "token_file", "NATS token")
        if token is not None:
            out["token"] = token.decode("utf-8").strip()
        if self.user is not None:
            out["user"] = self.user
            password = _secret(ctx, self.password_env, self.password_file, "password_env", "password_file", "password")
            out["password"] = (password or b"").decode("utf-8").strip()
        if self.creds_file is not None:
            from adapters.nats.creds import CredsError, callbacks

            path = ctx.resolve(self.creds_file)
            if not path.is_file():
                raise ConfigValueError("creds_file", f"no such file: {path}")
            try:
                out["user_jwt_cb"], out["signature_cb"] = callbacks(path)
            except (CredsError, OSError) as exc:
                problem = str(exc) if isinstance(exc, CredsError) else f"cannot read it: {exc.strerror}"
                raise ConfigValueError("creds_file", f"not a usable .creds file: {problem}") from None
        tls = self.tls_context(ctx)
        if tls is not None:
            out["tls"] = tls
        return out

    def tls_context(self, ctx: BuildContext) -> ssl.SSLContext | None:
        """TLS with the configured CA (and client certificate); None when neither is set."""
        if self.tls_ca_file is None and self.tls_cert_file is None:
            return None
        try:
            context = ssl.create_default_context(
                cafile=str(ctx.resolve(self.tls_ca_file)) if self.tls_ca_file else None
            )
        except OSError as exc:
            raise ConfigValueError("tls_ca_file", f"cannot read the CA file: {exc.strerror}") from None
        if self.tls_cert_file is not None and self.tls_key_file is not None:
            try:
                context.load_cert_chain(str(ctx.resolve(self.tls_cert_file)), str(ctx.resolve(self.tls_key_file)))
            except OSError as exc:
                raise ConfigValueError("tls_cert_file", f"cannot read the certificate: {exc.strerror}") from None
        return context


def _secret(
    ctx: BuildContext, env: str | None, file: str | None, env_key: str, file_key: str, what: str
) -> bytes | None:
    if env is None and file is None:
        return None
    try:
        return ctx.secret(env, file, what)
    except ConfigValueError as exc:
        raise ConfigValueError(env_key if env is not None else file_key, exc.problem) from None


@dataclass(frozen=True)
class NatsSourceConfig(NatsClient, SourceConfig):
    """A NATS JetStream stream as a source, read with one durable pull consumer per partition.

    Each message's data is one record in the schema's format (a TSV line of `schema.columns`, a JSON line...);
    a message of several lines is several records. Subjects are `subject_prefix.<p>` for partitions p of
    `partition_count` (the publisher picks p with the keyed user hash of `replay --workers`); this replica
    consumes `partitions` (all of them when unset) with the durable consumers `<durable>_p<p>`, so a restarted
    replica resumes where its partitions stopped. A message is acknowledged once its records are durable in
    the sinks or held (or dead-lettered); one the runtime could not take is nak'ed with `nak_delay_seconds` and
    comes again.
    """

    stream: str = option("QUERYLOG", "The JetStream stream to read.")
    subject_prefix: str = option("querylog.in", "Subjects are `<subject_prefix>.<p>`, p the partition.")
    partition_count: int = option(1, "Partitions of the stream (P): subjects `<subject_prefix>.0` .. `.P-1`.", min=1)
    partitions: tuple[int, ...] | None = option(
        None, "The partitions this replica consumes (e.g. `[0, 1]`); null: all of 0..partition_count-1."
    )
    durable: str = option("querylog", "Durable consumer name prefix: partition p is read by `<durable>_p<p>`.")
    create_stream: bool = option(
        True, "Create the stream (file storage, subjects `<subject_prefix>.*`) when it does not exist."
    )
    batch_size: int = option(1000, "Most messages pulled (and handed to the chain) at once.", min=1, max=100_000)
    pull_wait_seconds: float = option(0.5, "How long one pull waits for messages when the stream is idle.", gt=0)
    ack_wait_seconds: float = option(
        60.0,
        "A delivered message not acknowledged within this time is delivered again (the consumer's ack_wait).",
        gt=0,
    )
    max_ack_pending: int = option(
        20_000, "Messages delivered but not yet acknowledged, at most, per consumer (>= batch_size).", min=1
    )
    nak_delay_seconds: float = option(
        2.0, "A batch the runtime could not take (a full outbox, a failing sink) is delivered again after this.", gt=0
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_name("stream", self.stream, "a stream name")
        _check_subject("subject_prefix", self.subject_prefix)
        _check_name("durable", self.durable, "a consumer name")
        if self.partitions is not None:
            if not self.partitions:
                raise ConfigValueError("partitions", "name at least one partition (or null: all)")
            for p in self.partitions:
                if not isinstance(p, int) or not 0 <= p < self.partition_count:
                    raise ConfigValueError("partitions", f"each must be 0..{self.partition_count - 1}")
            if len(set(self.partitions)) != len(self.partitions):
                raise ConfigValueError("partitions", "a partition is named twice")
        if self.max_ack_pending < self.batch_size:
            raise ConfigValueError("max_ack_pending", "must be >= batch_size")

    def assigned(self) -> tuple[int, ...]:
        """The partitions this replica reads."""
        return self.partitions if self.partitions is not None else tuple(range(self.partition_count))


@dataclass(frozen=True)
class NatsSinkConfig(NatsClient, OutboxOptions, SinkConfig):
    """Events published to NATS JetStream, one record line per message (or `records_per_message`), with publish
    acknowledgements.

    Each event leaves as one line in the input's text format (TSV, JSON lines...; an event of another format
    as a JSON line; a UBI record, `format: ubi`, as its own JSON line, whatever source brought it); a message
    carries up to `records_per_message` lines of one subject (256 KiB at most).
    With `partition_count` P > 0 an event goes to `<subject>.<p>`, p the partition of its user (the keyed user
    hash of `replay --workers`: a `nats` source of P partitions downstream gets every user on one replica);
    with 0 to `subject`. Batches go through a durable outbox; a batch counts as delivered once
    JetStream acknowledged every message (stored); each message carries a `Nats-Msg-Id` fixed when it entered
    the outbox, so a batch sent again within the stream's duplicate window is stored once.
    """

    subject: str = option("querylog.out", "The subject (with partition_count > 0: the prefix of `<subject>.<p>`).")
    partition_count: int = option(
        0, "Partitions P: publish to `<subject>.<p>` by the user's keyed hash; 0: everything to `subject`.", min=0
    )
    stream: str | None = option(
        None, "The stream that must store the messages (the `Nats-Expected-Stream` header); null: whichever does."
    )
    create_stream: bool = option(
        False, "Create `stream` (file storage, subjects `subject` and `<subject>.*`) when it does not exist."
    )
    batch_size: int = option(1000, "Most events per outbox batch.", min=1, max=4000)
    records_per_message: int = option(
        1,
        "Most records (lines) one message carries, those of one subject in order; a `nats` source reads each "
        "line as a record. 1: a record per message.",
        min=1,
        max=4000,
    )
    timeout_seconds: float = option(10.0, "How long a batch's publish acknowledgements may take.", gt=0)
    outbox_name: str | None = option(
        None, "Name of this sink's outbox (letters, digits, _; null: `nats_` and the subject)."
    )

    def __post_init__(self) -> None:
        super().__post_init__()
        _check_subject("subject", self.subject)
        if self.stream is not None:
            _check_name("stream", self.stream, "a stream name")
        if self.create_stream and self.stream is None:
            raise ConfigValueError("create_stream", "name the stream to create (stream)")
        if self.outbox_name is not None and not _OUTBOX_NAME.fullmatch(self.outbox_name):
            raise ConfigValueError("outbox_name", "must be 1-64 ASCII letters, digits or _")
