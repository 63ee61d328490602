"""The plugin contract: the one page a filter, source, sink or codec author reads.

Everything a third-party component needs is on this page; a plugin imports
``sidecar.api`` and nothing else of the sidecar.

**Data.** A source reads *records* (a TSV line, a JSON object, a protobuf
message). A :class:`Codec` decodes them into :class:`Event` objects: the five
roles (``user``, ``query``, ``time``, ``rank``, ``url``) that the schema map
assigns to record fields, plus the untouched original ``record`` and, for text
formats, its original line ``raw``. Filters change role values; the codec writes
them back into the original record, so the output keeps the input's schema.

**The identity rule.** ``Codec.encode`` returns ``event.raw`` unchanged — the
input bytes — when every role value is the very object (TSV, protobuf) or an
equal value (JSON) of what was decoded. So a filter that changes anything that
is *not* a role must say so, or the change is lost:

* to set a non-role field, call ``event.codec.set_field(event, name, value)``:
  it writes the record and keeps ``raw`` in step (or raises :class:`FieldError`
  with a reason slug when the record has no such field, the field is a role, or
  the format cannot carry it);
* a filter that edits ``event.record`` itself calls ``event.mark_changed()``:
  ``raw`` is dropped and the encoder writes the record afresh.

**Filters** (:class:`Filter`) work on batches: ``process(list[Event]) ->
list[Event]``, ``flush(final)``, ``close()``. Returning fewer events drops them
(count why in ``self.counts``); a buffering filter sets ``BUFFERING``, holds
events and reports ``held()``; a filter that keeps anything between batches (in
memory or in the state store) sets ``STATEFUL``; one that can learn from a first
pass over an archive sets ``PRESCAN`` and implements ``prescan``. A filter is
generic in its frozen config dataclass: ``class MyFilter(Filter[MyConfig])`` and
``self.config`` is a ``MyConfig``.

**Sources** (:class:`Source`) bring records in: ``start(runtime)`` begins (a
server returns at once and receives on its own threads; a finite source such as a
file sets ``FINITE`` and returns when its input ends or ``stop`` is called); each
batch of records goes to ``runtime.receive(RecordBatch(...))``, which decodes,
dead-letters bad records, runs the chain and delivers to the sinks. **An
acknowledgement is a promise:** when ``receive`` returns, every event of the
batch is delivered (sinks flushed), durably held by a filter, dropped by rule or
dead-lettered — only then may the source acknowledge upstream.

**Sinks** (:class:`Sink`) take events out: ``start(header, codec)`` once,
``write(events)`` (may buffer), ``flush()`` (the delivery point: when it
returns, everything written is durable), ``close()``.

**Configs.** Every option is declared with :func:`option` (a default, a doc
string, optionally bounds or choices) on a frozen dataclass subclassing
:class:`FilterConfig`, :class:`SourceConfig` or :class:`SinkConfig`. The loader
rejects unknown keys and bad values with ``FILE:LINE: KEY: problem (allowed:
...)``; cross-field rules go in ``__post_init__`` and raise
:class:`ConfigValueError`. Secrets come from :meth:`BuildContext.secret` (an
environment variable or a file), never from the YAML.

**Registration.** Components register through entry points, exactly like the
built-ins: :data:`FILTERS`, :data:`SOURCES`, :data:`SINKS`, :data:`CODECS`
(codecs by format name, used to restore held events), :data:`COMMANDS` (click
commands added to ``querylog``). Two plugins under one name are an error naming
both.

**Threading.** The runtime runs one batch at a time through the chain (it holds
the chain's lock), so a filter's ``process``/``flush``/``prescan`` are never
called concurrently; a filter needs no lock of its own. Sources may call
``runtime.receive`` from any number of threads. Sinks are called under the same
lock as the chain. ``close`` is called once, after the last batch.

**State store.** ``BuildContext.state`` is one SQLite database (WAL) shared by
every component. Own your tables: create and migrate them with
``state.migrate(component, [step, ...])``. Write a batch's changes inside
``SAVEPOINT <component>`` ... ``RELEASE`` while holding ``state.lock``, never
``BEGIN``/``COMMIT``: the runtime may hold an outer transaction to commit your
state together with the output it delivered (``replay --resume``). Filters that
hold events keep them in the store, so a restart — even ``kill -9`` — resumes
with them.

**Privacy.** Never put a query, user id or record value into a log event, an
exception message or a metric label: counts, field names and reasons only.
Randomness that protects privacy comes from ``BuildContext.rng`` (a CSPRNG unless
a test or benchmark gave a seed).
"""

from __future__ import annotations

import dataclasses
import os
import random
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, Protocol, TypeVar

if TYPE_CHECKING:
    import sqlite3

    import sqlite_utils

__all__ = [
    "CODECS",
    "COMMANDS",
    "FILTERS",
    "ROLES",
    "SINKS",
    "SOURCES",
    "BadRecord",
    "BuildContext",
    "Codec",
    "ConfigValueError",
    "DeadLetterSink",
    "Event",
    "FieldError",
    "Filter",
    "FilterConfig",
    "Receipt",
    "RecordBatch",
    "Runtime",
    "Sink",
    "SinkConfig",
    "Source",
    "SourceConfig",
    "StateStoreLike",
    "option",
]

# ---- entry-point groups -----------------------------------------------------------------------

FILTERS = "querylog.filters"
"""Filter classes, by the name used in the YAML chain."""
SOURCES = "querylog.sources"
"""Source classes (the gRPC service is the source ``grpc``; files are ``file``)."""
SINKS = "querylog.sinks"
"""Sink classes."""
CODECS = "querylog.codecs"
"""Codec classes of record formats that are not configured text (e.g. ``proto``), by ``Codec.format``."""
COMMANDS = "querylog.commands"
"""click commands (or groups) added to the ``querylog`` command line."""

ROLES: tuple[str, ...] = ("user", "query", "time", "rank", "url")
"""The roles a schema map assigns to record fields."""


# ---- events -----------------------------------------------------------------------------------


class Event:
    """One query event.

    ``record`` is the decoded original (a list of TSV fields, a JSON dict, a
    protobuf message); ``raw`` is the original line when the source was text, so
    an unchanged event is written back byte for byte (see the identity rule
    above). ``codec`` is the codec that decoded it (None for an event rebuilt
    without one: it is then encoded from its roles). ``meta`` carries per-event
    facts for later filters (category, detector counts...) and is never written
    to the output.
    """

    __slots__ = ("codec", "eol", "meta", "query", "rank", "raw", "record", "time", "url", "user")

    def __init__(
        self,
        user: Any,
        query: Any,
        time: Any = None,
        rank: Any = None,
        url: Any = None,
        record: Any = None,
        raw: str | None = None,
        codec: Codec | None = None,
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
        self.meta: dict[str, Any] = {}

    def annotate(self, key: str, value: Any) -> None:
        """Attach a per-event fact (``category``, ``scrub_counts``...) for later filters."""
        self.meta[key] = value

    def mark_changed(self) -> None:
        """Say that ``record`` was edited in place: the encoder must not return the original ``raw``."""
        self.raw = None

    def __repr__(self) -> str:  # never show values: events end up in tracebacks
        return f"<Event codec={type(self.codec).__name__} meta_keys={sorted(self.meta)}>"


class BadRecord(Exception):
    """Raised by a decoder for a record that cannot become an event; ``reason`` is a slug."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class FieldError(Exception):
    """A record field cannot be read or set; ``reason`` is a slug (``no_such_field``, ``field_is_role``...)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Codec:
    """Records of one format <-> events.

    Subclasses set ``format`` and implement ``decode_many`` and ``encode``; text
    formats also implement the field access methods. ``encode`` follows the
    identity rule. ``pack_record``/``unpack_record`` let a filter keep an
    event's record in the state store and get it back after a restart.
    """

    format: ClassVar[str] = ""

    def accept_header(self, line: str) -> None:
        """Called with the first line when the format has a header."""

    def header_for_output(self) -> str | None:
        """The header line to write before the first record, if the format has one."""
        return None

    def decode_many(self, records: Sequence[Any], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        """Events for ``records`` in order; a record that cannot be one is skipped and ``(index, reason)``
        appended to ``bad`` (it is dead-lettered by the caller). Never raises for a bad record."""
        raise NotImplementedError

    def encode(self, event: Event) -> Any:
        """The record for ``event`` (a line without its end for text formats)."""
        raise NotImplementedError

    def fields(self, event: Event) -> Mapping[str, Any]:
        """The non-role fields of the event's record, by name (carried into other formats)."""
        return {}

    def get_field(self, event: Event, name: str) -> Any:
        """The value of record field ``name``; :class:`FieldError` when there is none."""
        raise FieldError("unsupported_codec")

    def set_field(self, event: Event, name: str, value: Any) -> None:
        """Set non-role field ``name`` of the event's record, keeping ``raw`` in step (the identity rule)."""
        raise FieldError("unsupported_codec")

    def pack_record(self, record: Any) -> Any:
        """The record as msgpack-able data (lists, dicts, strings, numbers, bytes), for the state store."""
        return record

    def unpack_record(self, data: Any) -> Any:
        """The inverse of :meth:`pack_record`."""
        return data


# ---- configuration ----------------------------------------------------------------------------


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
    """Base of filter configs: frozen dataclasses of :func:`option` fields."""


@dataclass(frozen=True)
class SourceConfig:
    """Base of source configs."""


@dataclass(frozen=True)
class SinkConfig:
    """Base of sink configs."""


class ConfigValueError(ValueError):
    """A config value is wrong. ``key`` is relative to the component's mapping."""

    def __init__(self, key: str, problem: str, allowed: Sequence[Any] | None = None) -> None:
        super().__init__(problem)
        self.key = key
        self.problem = problem
        self.allowed = allowed


# ---- what a component gets at build time ------------------------------------------------------


class StateStoreLike(Protocol):
    """The state store as components see it (one SQLite database, see the rules above)."""

    conn: sqlite3.Connection
    db: sqlite_utils.Database
    lock: threading.RLock

    def migrate(self, component: str, migrations: Sequence[Callable[[sqlite_utils.Database], None]]) -> int: ...


class DeadLetterSink(Protocol):
    """Where bad records go: counted by reason, the record kept (size-capped) in the dead-letter file."""

    def add(self, reason: str, source: str, line: int | None, record: bytes | str | None) -> None: ...


@dataclass
class BuildContext:
    """Resources a component may use when it is built."""

    config_dir: Path
    state: StateStoreLike | None = None
    rng: random.Random = field(default_factory=random.SystemRandom)
    seed: int | None = None
    #: The configured record schema (a ``sidecar.codecs.SchemaConfig``); sinks encode schema-less events with it.
    schema: Any = None
    #: The pipeline's dead letters; None outside a pipeline.
    dead_letters: DeadLetterSink | None = None
    #: Wall-clock seconds; tests give a fake clock.
    clock: Callable[[], float] = time.time
    #: Codecs by format name, for events restored from the state store (``codec_for``).
    codecs: Callable[[str], Codec | None] = field(default=lambda fmt: None, repr=False)
    #: The configured bound on one record in bytes (``limits.max_record_bytes``); longer ones are dead-lettered.
    max_record_bytes: int = 65536

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


# ---- filters ----------------------------------------------------------------------------------

C = TypeVar("C")


class Filter(Generic[C]):
    """A batch filter. Subclasses set ``NAME``, ``Config`` and implement ``process``."""

    NAME: ClassVar[str] = ""
    Config: ClassVar[type[Any]] = FilterConfig
    #: One line for ``querylog filters``; defaults to the first docstring line.
    SUMMARY: ClassVar[str] = ""
    #: Holds events between calls (then implements ``held``/``flush``).
    BUFFERING: ClassVar[bool] = False
    #: Keeps anything between batches (in memory or in the state store): its output depends on earlier input.
    STATEFUL: ClassVar[bool] = False
    #: Learns from a first pass over an archive (``replay --prescan``); implements ``prescan``.
    PRESCAN: ClassVar[bool] = False

    def __init__(self, config: C, ctx: BuildContext) -> None:
        self.config: C = config
        self.ctx = ctx
        #: Per-reason counters (``dropped_rule``, ``replaced_email``...), exported by Stats.
        self.counts: Counter[str] = Counter()

    def process(self, batch: list[Event]) -> list[Event]:
        """The events that leave the filter now (changed in place or new), in order."""
        raise NotImplementedError

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


# ---- sinks ------------------------------------------------------------------------------------


class Sink(Generic[C]):
    """Where protected events go. ``write`` may buffer; ``flush`` is the delivery point:
    when it returns, everything written so far is delivered (acknowledgements wait for it).
    """

    NAME: ClassVar[str] = ""
    Config: ClassVar[type[Any]] = SinkConfig
    SUMMARY: ClassVar[str] = ""

    def __init__(self, config: C, ctx: BuildContext) -> None:
        self.config: C = config
        self.ctx = ctx
        self.written = 0

    def start(self, header: str | None, codec: Codec | None) -> None:
        """Called once before the first write with the input's header line and codec (None: schema-less)."""

    def write(self, events: list[Event]) -> None:
        """Take events (may buffer)."""
        raise NotImplementedError

    def flush(self) -> None:
        """Deliver everything written so far."""

    def close(self) -> None:
        """Flush and release resources."""


# ---- sources ----------------------------------------------------------------------------------


@dataclass
class RecordBatch:
    """Records as a source read them, with what the runtime needs to decode and report them."""

    records: Sequence[Any]
    codec: Codec
    #: Where they came from, for dead letters and logs (a path, ``grpc:Ingest``...): never a value.
    origin: str
    #: The position (line number...) of each record, for dead letters; None: not known.
    positions: Sequence[int] | None = None
    #: Line end of the last record (``""`` when the input ended without one).
    last_eol: str = "\n"


@dataclass
class Receipt:
    """What became of a :class:`RecordBatch`: counts, and the events that left the chain (delivered)."""

    accepted: int = 0
    dead_lettered: int = 0
    delivered: list[Event] = field(default_factory=list)
    held: int = 0
    dropped: int = 0


class Runtime(Protocol):
    """What a source drives: the chain, the sinks and the dead letters, thread-safe."""

    dead_letters: DeadLetterSink
    filters: Sequence[Filter[Any]]
    sinks: Sequence[Sink[Any]]

    def receive(self, batch: RecordBatch) -> Receipt:
        """Decode, run the chain, deliver to the sinks and flush them; durable when it returns."""
        ...

    def process(self, events: list[Event]) -> list[Event]:
        """Run decoded events through the chain; returns what leaves it now (not delivered)."""
        ...

    def deliver(self, events: list[Event]) -> None:
        """Write events to every sink (sinks may buffer until ``flush_sinks``)."""
        ...

    def flush_sinks(self) -> None:
        """Flush every sink: what was delivered so far is durable when it returns."""
        ...

    def flush(self, final: bool) -> list[Event]:
        """Ask buffering filters to release; returns what left the chain (not delivered)."""
        ...

    def held(self) -> int:
        """Events held by the chain's filters."""
        ...

    def stats(self) -> dict[str, Any]:
        """Counts of the chain, the filters and the dead letters (no values)."""
        ...


class Source(Generic[C]):
    """Where records come from. See the module docstring for the acknowledgement rule."""

    NAME: ClassVar[str] = ""
    Config: ClassVar[type[Any]] = SourceConfig
    SUMMARY: ClassVar[str] = ""
    #: ``start`` returns when the input ends (a file); otherwise it returns at once (a server).
    FINITE: ClassVar[bool] = False

    def __init__(self, config: C, ctx: BuildContext) -> None:
        self.config: C = config
        self.ctx = ctx

    def start(self, runtime: Runtime) -> None:
        """Begin reading; hand every batch to ``runtime.receive`` and acknowledge upstream after it returns."""
        raise NotImplementedError

    def stop(self, grace: float | None = None) -> None:
        """Stop taking input; let what is in flight finish within ``grace`` seconds (None: the configured grace)."""
