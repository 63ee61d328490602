"""The plugin contract: the one page a filter or adapter author reads.

* :class:`Event` — one query event: the five roles (``user``, ``query``, ``time``,
  ``rank``, ``url``) plus the untouched original record it was decoded from.
  Filters change role values; encoders write them back into the original record,
  so the output keeps the input's schema.
* :class:`Filter` — batch-oriented: ``process(list[Event]) -> list[Event]``,
  ``flush(final)``, ``close()``. Returning fewer events drops them (count why in
  ``self.counts``); a buffering filter holds events and reports ``held()``.
* :class:`FilterConfig` — base of the frozen config dataclasses. Every field is
  declared with :func:`option` (a default and a doc string, optionally bounds or
  choices); the loader rejects unknown keys and bad values with file:line.
* :class:`BuildContext` — what a filter gets at build time: the state store, the
  config file's folder, secrets lookup and the CSPRNG.

Privacy rule for every plugin: never put a query, user id or record value into a
log event, exception message or metric label. Counts, field names, reasons only.
"""

from __future__ import annotations

import dataclasses
import os
import random
import secrets
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from sidecar.state import StateStore

ROLES: tuple[str, ...] = ("user", "query", "time", "rank", "url")
"""The roles a schema map assigns to record fields."""


class Event:
    """One query event.

    ``record`` is the decoded original (a list of TSV fields, a JSON dict, a
    protobuf message); ``raw`` is the original line when the source was text, so
    an unchanged event is written back byte for byte. ``codec`` is the codec that
    decoded it; ``meta`` carries per-event facts for later filters (category,
    detector counts...) and is never written to the output unless configured.
    """

    __slots__ = ("user", "query", "time", "rank", "url", "record", "raw", "codec", "eol", "meta")

    def __init__(
        self,
        user: Any,
        query: Any,
        time: Any = None,
        rank: Any = None,
        url: Any = None,
        record: Any = None,
        raw: str | None = None,
        codec: Any = None,
        eol: str = "\n",
    ) -> None:
        self.user = user
        self.query = query
        self.time = time
        self.rank = rank
        self.url = url
        self.record = record
        self.raw = raw
        self.codec = codec
        self.eol = eol
        self.meta: dict[str, Any] | None = None

    def annotate(self, key: str, value: Any) -> None:
        """Attach a per-event fact (``category``, ``scrub_counts``...) for later filters."""
        if self.meta is None:
            self.meta = {}
        self.meta[key] = value

    def __repr__(self) -> str:  # never show values: events end up in tracebacks
        return f"<Event codec={type(self.codec).__name__} meta_keys={sorted(self.meta or ())}>"


def option(default: Any = dataclasses.MISSING, doc: str = "", **checks: Any) -> Any:
    """Declare a config field: its default, its documentation and its checks.

    Checks understood by the loader: ``min``/``max`` (inclusive bounds),
    ``gt`` (strict lower bound), ``choices`` (allowed values), ``secret_ref``
    (the value names an env var or file, never a secret itself).
    """
    meta = {"doc": doc, **checks}
    if isinstance(default, list | dict | set):
        raise TypeError("use an immutable default (tuple) for config options")
    if default is dataclasses.MISSING:
        return field(metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class FilterConfig:
    """Base of filter configs. Subclasses are frozen dataclasses of :func:`option` fields.

    Cross-field rules go in ``__post_init__`` and raise :class:`ConfigValueError`.
    """


class ConfigValueError(ValueError):
    """A config value is wrong. ``key`` is relative to the component's mapping."""

    def __init__(self, key: str, problem: str, allowed: Sequence[Any] | None = None) -> None:
        super().__init__(problem)
        self.key = key
        self.problem = problem
        self.allowed = allowed


@dataclass
class BuildContext:
    """Resources a filter may use when it is built."""

    config_dir: Path
    state: StateStore | None = None
    rng: random.Random = field(default_factory=random.SystemRandom)
    seed: int | None = None
    #: The configured record schema (a ``SchemaConfig``); sinks encode events from schema-less sources with it.
    schema: Any = None
    #: The pipeline's dead letters (``add(reason, source, line, record)``); None outside a pipeline.
    dead_letters: Any = None

    def secret(self, env: str | None, file: str | None, what: str) -> bytes:
        """Read a secret from an environment variable or a file (never from YAML)."""
        if env:
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

    def token_bytes(self, n: int) -> bytes:
        """Random bytes from the CSPRNG, or from the seeded RNG in tests."""
        if self.seed is None:
            return secrets.token_bytes(n)
        return self.rng.randbytes(n)


class Filter:
    """A batch filter. Subclasses set ``NAME``, ``Config`` and implement ``process``."""

    NAME: ClassVar[str] = ""
    Config: ClassVar[type[FilterConfig]] = FilterConfig
    #: One line for ``querylog filters``; defaults to the first docstring line.
    SUMMARY: ClassVar[str] = ""
    #: True when the filter holds events between calls (it then implements held/flush).
    BUFFERING: ClassVar[bool] = False
    #: True when the filter learns from a first pass over an archive (``replay --prescan``).
    PRESCAN: ClassVar[bool] = False

    def __init__(self, config: FilterConfig, ctx: BuildContext) -> None:
        self.config = config
        self.ctx = ctx
        #: Per-reason counters (``dropped_rule``, ``replaced_email``...), exported by Stats.
        self.counts: Counter[str] = Counter()

    def process(self, batch: list[Event]) -> list[Event]:
        raise NotImplementedError  # abstract: every filter defines it

    def prescan(self, batches: Iterable[list[Event]]) -> None:
        """Read every event of an archive, as it will later arrive here, before the replay starts.

        Called once by ``replay --prescan`` on filters with ``PRESCAN`` set; the
        events went through the (stateless) filters in front of this one.
        """

    def flush(self, final: bool) -> list[Event]:
        """Release what may be released now; ``final`` on shutdown. Default: nothing held."""
        return []

    def held(self) -> int:
        """Events currently held by this filter."""
        return 0

    def stats(self) -> dict[str, Any]:
        """Extra state for Stats (e.g. per-category k); counts only, never values."""
        return {}

    def close(self) -> None:
        """Release resources. Held state stays in the state store."""


class DeadLetter(Exception):
    """Raised by a decoder for a record that cannot become an event; ``reason`` is a slug."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class SinkConfig:
    """Base of sink configs (frozen dataclasses of :func:`option` fields)."""


class Sink:
    """Where protected events go. ``write`` may buffer; ``flush`` is the delivery point:
    when it returns, everything written so far is delivered (acknowledgements wait for it).
    """

    NAME: ClassVar[str] = ""
    Config: ClassVar[type[SinkConfig]] = SinkConfig
    SUMMARY: ClassVar[str] = ""

    def __init__(self, config: SinkConfig, ctx: BuildContext) -> None:
        self.config = config
        self.ctx = ctx
        self.written = 0

    def start(self, header: str | None, codec: Any) -> None:
        """Called once before the first write with the input's header line and codec."""

    def write(self, events: list[Event]) -> None:
        raise NotImplementedError  # abstract: every sink defines it

    def flush(self) -> None:
        """Deliver everything written so far."""

    def close(self) -> None:
        """Flush and release resources."""
