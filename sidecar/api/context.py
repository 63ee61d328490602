"""What a component gets when it is built: :class:`BuildContext` and the services it names."""

from __future__ import annotations

import os
import random
import secrets
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from sidecar.api.config import ConfigValueError, SchemaConfig
from sidecar.api.events import Codec
from sidecar.api.options import ENV_NAME, OutboxOptions

if TYPE_CHECKING:
    import sqlite3

    import sqlite_utils


class StateStoreLike(Protocol):
    """The state store as components see it (one SQLite database, see the rules above)."""

    conn: sqlite3.Connection
    db: sqlite_utils.Database
    lock: threading.RLock

    def migrate(self, component: str, migrations: Sequence[Callable[[sqlite_utils.Database], None]]) -> int: ...


class StateDamaged(Exception):
    """A component found its rows in the state store damaged (a held record that no longer decodes). The
    runtime reports it as a damaged state database: one line naming the file, exit 3, and ``--reset-state``
    as the explicit way out. The message says what is damaged, never a value."""


class DeadLetterSink(Protocol):
    """Where bad records go: counted by reason, the record kept (size-capped) in the dead-letter file."""

    def add(
        self, reason: str, source: str, line: int | None, record: bytes | str | None, *, field: str | None = None
    ) -> None:
        """Count one bad record by ``reason`` and keep it (size-capped) in the file; ``field``: the name (never the
        value) of the field at fault, when one is."""
        ...

    @property
    def total(self) -> int:
        """Records dead-lettered so far, all reasons (a source reads it before and after a batch to report
        what a sink refused, e.g. a value that would break the output's framing)."""
        ...

    def flush(self) -> None:
        """Hand what was added to the OS (the runtime calls it once per batch, before acknowledging)."""
        ...


class Outbox(Protocol):
    """A network sink's durable queue (:meth:`BuildContext.outbox`): batches of encoded events in the state
    database, sent in order by a thread of their own, retried with backoff until the peer takes them.

    ``put`` from the sink's ``flush`` (it commits with the runtime's batch: a batch is durable, hence
    acknowledged, once it is in the outbox); ``start(send)`` once, where ``send(payload)`` delivers one batch or
    raises (a retry follows); ``close(timeout)`` on shutdown (what is left is sent after the next start). When
    full, ``put`` raises :class:`~sidecar.api.Backpressure` and the runtime stops sources taking more."""

    name: str

    def put(self, payload: bytes, events: int) -> int: ...

    def start(self, send: Callable[[bytes], None]) -> None: ...

    def full(self) -> bool: ...

    def drain(self, timeout: float) -> bool: ...

    def stats(self) -> dict[str, Any]: ...

    def close(self, timeout: float | None = 5.0) -> None: ...


@dataclass
class BuildContext:
    """Resources a component may use when it is built."""

    config_dir: Path
    state: StateStoreLike | None = None
    rng: random.Random = field(default_factory=random.SystemRandom)
    seed: int | None = None
    #: The configured record schema; sinks encode schema-less events with it.
    schema: SchemaConfig | None = None
    #: The pipeline's dead letters; None outside a pipeline.
    dead_letters: DeadLetterSink | None = None
    #: Wall-clock seconds; tests give a fake clock.
    clock: Callable[[], float] = time.time
    #: Codecs by format name, for events restored from the state store (``codec_for``).
    codecs: Callable[[str], Codec | None] = field(default=lambda fmt: None, repr=False)
    #: The configured bound on one record in bytes (``limits.max_record_bytes``); longer ones are dead-lettered.
    max_record_bytes: int = 65536
    #: Makes the durable queue of :meth:`outbox` (given by the runtime; None outside one).
    outboxes: Callable[[str, OutboxOptions], Outbox] | None = field(default=None, repr=False)
    #: True when the component is built only to check a config (``check-config``): check the options and the
    #: resources they name, but create, build or write nothing (no knowledge-base build, no files, no sockets).
    validate_only: bool = False

    def resolve(self, path: str) -> Path:
        """``path`` relative to the config file's folder (``~`` expanded; absolute paths as they are)."""
        p = Path(path).expanduser()
        return p if p.is_absolute() else self.config_dir / p

    def codec_for(self, fmt: str | None) -> Codec | None:
        """The codec of format ``fmt`` (the configured text codec, or one registered under ``querylog.codecs``)."""
        return self.codecs(fmt) if fmt else None

    def secret(self, env: str | None, file: str | None, what: str) -> bytes:
        """Read a secret from an environment variable or a file (never from YAML)."""
        if env:
            if not ENV_NAME.fullmatch(env):  # perhaps the secret itself was pasted here: never echo it
                raise ConfigValueError(
                    "key_env",
                    f"must name an environment variable (letters, digits, _); the value is not shown ({what})",
                )
            value = os.environ.get(env)
            if value:
                return value.encode()
            raise ConfigValueError("key_env", f"environment variable {env} is not set or empty ({what})")
        if file:
            path = Path(file)
            if not path.is_absolute():
                path = self.config_dir / path
            try:
                data = path.read_bytes().strip()
            except OSError as exc:
                raise ConfigValueError("key_file", f"cannot read {what} file {path}: {exc.strerror}") from None
            if not data:
                raise ConfigValueError("key_file", f"{what} file {path} is empty")
            return data
        raise ConfigValueError("key_env", f"{what}: set key_env or key_file")

    def outbox(self, name: str, options: OutboxOptions) -> Outbox:
        """A durable outbox named ``name`` (1-64 letters, digits, ``_``: one per sink instance, stable across
        restarts, e.g. the sink's name and peer) with the bounds and retry timing of ``options``."""
        if self.outboxes is None:
            raise RuntimeError("no runtime: an outbox needs the state store")
        return self.outboxes(name, options)

    def token_bytes(self, n: int) -> bytes:
        """Random bytes from the CSPRNG, or from the seeded RNG in tests."""
        if self.seed is None:
            return secrets.token_bytes(n)
        return self.rng.randbytes(n)
