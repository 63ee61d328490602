"""The components: :class:`Filter`, :class:`Source` (with the :class:`Runtime` it drives), :class:`Sink`."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, Protocol, TypeVar, runtime_checkable

from sidecar.api.config import FilterConfig, SinkConfig, SourceConfig
from sidecar.api.context import BuildContext, DeadLetterSink
from sidecar.api.events import Codec, Event
from sidecar.api.options import Listen

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
    #: Its ``prescan`` reads which events arrive and their roles, never their annotations (``meta``): the first
    #: pass then skips the filters in front that only annotate (:meth:`annotates_only`).
    PRESCAN_ROLES_ONLY: ClassVar[bool] = False

    def __init__(self, config: C, ctx: BuildContext) -> None:
        self.config: C = config
        self.ctx = ctx
        #: Per-reason counters (``dropped_rule``, ``replaced_email``...), exported by Stats.
        self.counts: Counter[str] = Counter()

    def process(self, batch: list[Event]) -> list[Event]:
        """The events that leave the filter now (changed in place or new), in order."""
        raise NotImplementedError

    def annotates_only(self) -> bool:
        """True when this filter, as configured, passes every event on with its roles unchanged (it annotates, or
        writes fields that are no role): a first pass for a ``PRESCAN_ROLES_ONLY`` filter behind it skips it."""
        return False

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

    def report_suppressed(self) -> None:
        """From now on keep the events this buffering filter suppresses (drops, never releases) for
        :meth:`take_suppressed`: a join stage then drops the events that follow their queries at once."""

    def take_suppressed(self) -> list[Event]:
        """The events suppressed since the last call, once :meth:`report_suppressed` was called. Default: none
        (a buffering filter without it: a join stage counts its drops unidentified)."""
        return []

    def stats(self) -> dict[str, Any]:
        """Extra state for Stats (e.g. per-category k); counts only, never values."""
        return {}

    def pseudonymized_roles(self) -> frozenset[str]:
        """The roles whose every value this filter replaces by a keyed pseudonym (one value, one pseudonym).

        A source asks this to know what later filters see: the gRPC ``GetProfile`` serves a profile filter
        only when ``user`` is among the roles of a filter before it. Default: none.
        """
        return frozenset()

    def close(self) -> None:
        """Release resources. Held state stays in the state store."""

    @classmethod
    def identifier_detector(cls) -> Callable[[str], Mapping[str, int]] | None:
        """A detector the live audit of ``serve`` (``live_audit.detector``, :mod:`sidecar.liveaudit`) runs on a
        sample of the queries that come in and go out: a text -> the identifiers found in it, counted by type
        (counts only, never the text). Built once per process. Default: None (this filter offers none)."""
        return None


@runtime_checkable
class ProfileSource(Protocol):
    """A filter that keeps per-user profiles and can answer for one user (the gRPC ``GetProfile``)."""

    def get_profile(self, user: str) -> Mapping[str, int] | None:
        """The user's counts by category, as the filter keys users (None: no such user)."""
        ...


# ---- sinks ------------------------------------------------------------------------------------


class Backpressure(Exception):
    """A sink cannot take more now (its outbox is full): nothing of the batch ran, nothing may be acknowledged.

    Raised by :meth:`Runtime.receive` and :meth:`Runtime.transform` before the chain runs. A source answers its
    client "busy, retry later" (gRPC RESOURCE_EXHAUSTED, HTTP 503 with ``Retry-After``, no forward ack) or stops
    reading until :meth:`Runtime.backpressure` is None again. ``sink`` names the sink, ``reason`` says why."""

    def __init__(self, sink: str, reason: str) -> None:
        super().__init__(f"outbox of sink {sink} is {reason}: not acknowledged, retry later")
        self.sink = sink
        self.reason = reason


class SinkError(Exception):
    """A sink cannot take events for a reason an operator must fix (a table whose columns do not match, say).

    The message names the sink, options and columns, never a value. ``replay`` stops with it (one line, exit
    1); a source answers its client with an error instead of an acknowledgement."""


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

    def reopen(self) -> None:
        """Sinks that write files reopen them: open the file again by its path (after logrotate moved it away,
        a new file), after writing what it buffered into the old one. Called on every reload (SIGHUP, ``POST
        /-/reload``) between batches, under the runtime's lock; an ``OSError`` is logged and the sink keeps
        writing where it was. Default: nothing (a sink that writes no file)."""

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
    #: A source position to commit together with this batch's state and delivery: ``(key, value)``; read it
    #: back with :meth:`Runtime.checkpoint` after a restart (a file source resumes from it). None: nothing.
    checkpoint: tuple[str, str] | None = None


@dataclass
class Receipt:
    """What became of a :class:`RecordBatch`: counts, and the events that left the chain (delivered)."""

    accepted: int = 0
    dead_lettered: int = 0
    delivered: list[Event] = field(default_factory=list)
    held: int = 0
    dropped: int = 0
    #: The dead-lettered records by reason (``invalid_utf8``, ``oversized_record``...): counts, never values.
    reasons: Counter[str] = field(default_factory=Counter)


class Runtime(Protocol):
    """What a source drives: the chain, the sinks and the dead letters, thread-safe."""

    @property
    def dead_letters(self) -> DeadLetterSink:
        """Where a source puts records it cannot even hand over (garbage on a socket...)."""
        ...

    @property
    def filters(self) -> Sequence[Filter[Any]]:
        """The chain, in order (read only)."""
        ...

    @property
    def sinks(self) -> Sequence[Sink[Any]]:
        """The configured sinks (read only)."""
        ...

    @property
    def lock(self) -> threading.RLock:
        """The runtime's re-entrant lock: every method below takes it, and ``transaction()`` holds it for its
        whole block. A source may hold it across several calls, or try it (``acquire(blocking=False)``) so
        an event loop never waits behind another source's batch."""
        ...

    def receive(self, batch: RecordBatch) -> Receipt:
        """Decode, run the chain, deliver to the sinks and flush them; durable when it returns.

        Raises :class:`Backpressure` (before anything ran) when a sink's outbox is full."""
        ...

    def transform(self, batch: RecordBatch) -> tuple[Receipt, list[Event]]:
        """For request/response callers (gRPC ``Filter``): decode and run the chain like :meth:`receive`, but
        return the batch's own events that came straight through (changed, in order) to the caller instead of
        delivering them. Events a buffering filter released meanwhile (other callers' events) go to the sinks,
        committed with the buffer's state. ``Receipt.delivered`` holds those released events."""
        ...

    def release(self, final: bool) -> int:
        """Ask buffering filters to release what their policy lets go, deliver it to the sinks and commit the
        release with its delivery; returns how many events left. The runtime calls it on its own timer (one
        per process) and once with ``final`` at shutdown; a source never runs a timer of its own."""
        ...

    def backpressure(self) -> str | None:
        """The name of a sink whose outbox is full (a source stops reading or acknowledging), else None."""
        ...

    def checkpoint(self, key: str) -> str | None:
        """The last position committed under ``key`` with a batch (:attr:`RecordBatch.checkpoint`), or None."""
        ...

    def ready(self) -> list[str]:
        """What keeps the runtime from taking traffic, by name (``draining``, ``outbox_full:<sink>``...; never a
        value); empty when ready. Cheap and lock-free: a server source's health check may call it on its loop."""
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

    def transaction(self) -> AbstractContextManager[None]:
        """A block whose state-store writes (the filters' SAVEPOINTs) commit together when it ends.

        Run the chain, deliver and flush the sinks inside it: events a filter released are then
        deleted from its durable state only together with their delivery, so a kill -9 at any point
        leaves each event delivered or still held (at worst delivered twice: at-least-once).
        """
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

    def listening(self) -> list[Listen]:
        """The addresses this source listens on, with the ports it bound (``listen: 127.0.0.1:0`` resolved).

        ``serve`` logs them (``listening``) once the source started. Default: none (a file, stdin)."""
        return []

    def authentication(self) -> list[str]:
        """How a client of this source proves who it is: any of ``"mtls"`` (client certificates), ``"token"``
        (a bearer token), ``"shared_key"`` (a shared secret of the protocol), or ``["none"]``.

        ``serve`` logs it with each listening address (``auth``) and ``check-config --strict`` refuses a config
        whose network sources do not all require one. Default: ``["none"]`` (override it in a server source)."""
        return ["none"]
