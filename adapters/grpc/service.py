"""The RPC handlers of ``querylog.v1.QueryLogFilter``: ``Filter``, ``Ingest``, ``GetProfile``, ``Stats``.

The handlers are coroutines of the asynchronous server (:mod:`adapters.grpc.server`): a stream waiting for
its next message holds no thread, so idle streams cost nothing and never starve health or ``Stats``. Each
received batch is parsed, run through the chain and encoded on a worker thread (``server.workers``); the
chain, the sinks and the state store are used one batch at a time under :attr:`QueryLogService.lock`.

**What a caller receives.** ``Filter`` answers each request batch with one response batch. With a chain
that holds events (a ``BUFFERING`` filter such as ``category_buffer``) the delivery model is
``server.filter_release``:

* ``sinks`` (default): a response carries only events *of its own request* that passed straight through the
  chain (none, with ``category_buffer``, whose output events are all re-paired). Events a buffer releases,
  during a call or on the timer, go to the configured sinks, committed together with the buffer's state
  (``Runtime.transaction``) as ``Ingest`` does. With no sink configured, ``Filter`` is refused
  (FAILED_PRECONDITION) and the chain is never asked to release.
* ``any_stream``: released events go into the response of whichever ``Filter`` stream asks next (or the
  sinks, on the timer, when there are any). Single-tenant only: any caller may receive any user's events; and
  best effort: what a response carried to a client that went away meanwhile is gone.

``Ingest`` runs the chain into the sinks and answers once they are flushed; with a stateful chain each
batch's state commits in the same transaction as its delivery. ``GetProfile`` is served by the first
filter that is a :class:`~sidecar.api.ProfileSource`, only when a filter before it pseudonymizes the user
role (``server.profile_lookup: pseudonym``, the default), so profiles are looked up by the pseudonym the
sidecar emits, never by a raw user id; ``raw`` lifts that rule. ``Stats`` gives the pipeline's counters
and the RPCs refused by reason.

Bad input never breaks a stream: an unparseable message, an event with an empty
query or one over ``limits.max_record_bytes`` is dead-lettered (counted by reason)
and the stream goes on.
"""

from __future__ import annotations

import asyncio
import itertools
import operator
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import grpc
import grpc.aio
import structlog
from google.protobuf.message import DecodeError, Message

from adapters.grpc.codec import EventBatch, ProtoCodec, QueryEvent
from adapters.grpc.stats import stats_message
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import (
    IngestResponse,
    ProfileRequest,
    ProfileResponse,
    StatsRequest,
    StatsResponse,
)
from sidecar.api import Event, ProfileSource, Runtime
from sidecar.failures import describe_failure
from sidecar.protowire import read_varint

log = structlog.get_logger("querylog.grpc")

_is = operator.is_
M = TypeVar("M", bound=Message)
T = TypeVar("T")

#: A batch estimated to take less than this runs on the event loop (no thread hop); a slower one on a worker.
INLINE_SECONDS = 0.002
#: Batches smaller than this are costed as this size (their fixed overhead dominates).
MIN_COST_BYTES = 4096
#: Weight of the last batch in the running cost estimate.
COST_WEIGHT = 0.2

#: Why ``Filter`` is refused under ``filter_release: sinks`` when the chain buffers and no sink is configured.
NEEDS_SINK = "buffering chain: released events go to sinks; configure a sink or use Ingest"
NO_PROFILE_FILTER = "no profile filter in the chain"
RAW_PROFILES = (
    "profiles are keyed by raw user ids: put a pseudonymize filter of the user role before the profile filter "
    "(then look users up by their pseudonym), or set server.profile_lookup: raw"
)


@dataclass
class Incoming:
    """A request as received: the parsed batch (None when unparseable) and its size in bytes."""

    batch: EventBatch | None
    size: int
    data: bytes | None = None  # kept only when unparseable, for the dead-letter file
    #: wire bytes of events that could not be parsed while the rest of their batch could (salvaged)
    bad_events: tuple[bytes, ...] = ()


class Unparseable:
    """What a request deserializer returns for bytes that are no message (gRPC treats None as its own failure)."""


UNPARSEABLE = Unparseable()


def parse_or_mark(cls: type[M]) -> Callable[[bytes], M | Unparseable]:
    """A request deserializer that never raises: garbage becomes UNPARSEABLE (the handler says INVALID_ARGUMENT)."""

    def parse(data: bytes) -> M | Unparseable:
        try:
            return cls.FromString(data)
        except (DecodeError, ValueError):  # ValueError: invalid UTF-8 in a string field
            return UNPARSEABLE

    return parse


def parse_batch(data: bytes) -> Incoming:
    """Request deserializer that never raises: garbage becomes a dead letter, not a dead stream.

    When the batch does not parse as a whole (one event with invalid UTF-8 in a string field, say), its
    events are parsed one by one: the good ones go on, each bad one is dead-lettered with its bytes.
    """
    try:
        return Incoming(EventBatch.FromString(data), len(data))
    except (DecodeError, ValueError):  # ValueError: invalid UTF-8 in a string field
        salvaged = _salvage(data)
        if salvaged is None:
            return Incoming(None, len(data), data)
        batch, bad = salvaged
        return Incoming(batch, len(data), None, tuple(bad))


def _salvage(data: bytes) -> tuple[EventBatch, list[bytes]] | None:
    """The EventBatch's events parsed one by one from the wire (field 1), with the ones that fail apart;
    None when the batch's own framing is broken (then the whole message is garbage)."""
    batch = EventBatch()
    bad: list[bytes] = []
    pos = 0
    try:
        while pos < len(data):
            key, pos = read_varint(data, pos)
            number, wire = key >> 3, key & 7
            if number == 0:  # no protobuf field has number 0: the message is garbage
                return None
            if wire == 3:  # an unknown group: skipped, as protobuf does
                pos = _skip_group(data, pos, number)
            elif wire == 2:
                size, pos = read_varint(data, pos)
                if pos + size > len(data):
                    return None
                chunk = data[pos : pos + size]
                pos += size
                if number == 1:
                    try:
                        batch.events.append(QueryEvent.FromString(chunk))
                    except (DecodeError, ValueError):
                        bad.append(chunk)
                elif number == 2:
                    batch.batch_id = chunk.decode("utf-8", "replace")
            elif wire == 0:
                _, pos = read_varint(data, pos)
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                return None
    except ValueError:
        return None
    return (batch, bad) if pos == len(data) else None


def _skip_group(data: bytes, pos: int, number: int, depth: int = 0) -> int:
    """The position after the end of the group ``number`` whose start tag ended at ``pos`` (nested groups
    skipped too); ValueError when it never ends or is malformed."""
    if depth > 64:
        raise ValueError("groups nested too deep")
    while pos < len(data):
        key, pos = read_varint(data, pos)
        inner, wire = key >> 3, key & 7
        if inner == 0:
            raise ValueError("field number 0")
        if wire == 4:
            if inner != number:
                raise ValueError("unmatched end group")
            return pos
        if wire == 3:
            pos = _skip_group(data, pos, inner, depth + 1)
        elif wire == 2:
            size, pos = read_varint(data, pos)
            pos += size
        elif wire == 0:
            _, pos = read_varint(data, pos)
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ValueError("bad wire type")
        if pos > len(data):
            raise ValueError("truncated")
    raise ValueError("group without end")


class QueryLogService:
    """The RPC handlers. The chain and the sinks are used under :attr:`lock`, on the ``work`` executor's threads
    (never on the event loop); ``Stats`` runs on the ``admin`` executor so that it never queues behind batches."""

    def __init__(
        self,
        runtime: Runtime,
        max_record_bytes: int,
        work: Executor,
        admin: Executor,
        *,
        filter_release: Literal["sinks", "any_stream"] = "sinks",
        profile_lookup: Literal["pseudonym", "raw"] = "pseudonym",
    ) -> None:
        self.pipeline = runtime
        self.codec = ProtoCodec()
        self.limit = max_record_bytes
        #: the runtime's own (re-entrant) lock, shared with every other source of the runtime: a batch worked
        #: on by the event loop itself holds it around the whole call, and only takes it when it is free
        self.lock = runtime.lock
        #: running estimate of a batch's cost, seconds per request byte (None until one was measured)
        self.cost: float | None = None
        self.work = work
        self.admin = admin
        self.buffering = any(f.BUFFERING for f in runtime.filters)
        #: filters that keep state: Ingest then commits each batch's state with its delivery
        self.stateful = any(f.STATEFUL or f.BUFFERING for f in runtime.filters)
        #: released events go to the sinks only, never into another caller's Filter response
        self.release_to_sinks = filter_release == "sinks"
        self.profile_lookup = profile_lookup
        self._released: list[Event] = []  # any_stream: released by the timer, for the next Filter response
        self._rpcs = itertools.count(1)
        self.rpcs = 0
        #: RPCs refused before reaching the chain, by reason (missing_token, wrong_token)
        self.refused: Counter[str] = Counter()

    # ---- input -------------------------------------------------------------------------
    def accept(self, incoming: Incoming, method: str) -> tuple[list[Event], int]:
        """Decode a request into events (ProtoEvents); bad ones are dead-lettered. Returns (events, dead)."""
        dead = self.pipeline.dead_letters
        batch = incoming.batch
        if batch is None:
            data = incoming.data
            dead.add("invalid_message", f"grpc:{method}", None, data if data and len(data) <= self.limit else None)
            return [], 1
        salvage_bad = len(incoming.bad_events)
        for chunk in incoming.bad_events:  # the rest of the batch goes on
            dead.add("invalid_event", f"grpc:{method}", None, chunk if len(chunk) <= self.limit else None)
        messages = batch.events
        empties: list[tuple[int, str]] = []
        events = self.codec.decode_many(messages, "\n", empties)  # ProtoEvents, in a list of the chain's own
        for i, reason in empties:
            record = messages[i].SerializeToString()
            dead.add(reason, f"grpc:{method}", None, record if len(record) <= self.limit else None)
        bad = salvage_bad + len(empties)
        # No event can be larger than the batch minus 2 bytes (tag + length) for each other event.
        if incoming.size - 2 * (len(messages) - 1) > self.limit:
            limit = self.limit
            sizes = [ev.record.ByteSize() for ev in events]
            if max(sizes, default=0) > limit:
                keep: list[Event] = []
                for ev, size in zip(events, sizes):
                    if size > limit:
                        dead.add("oversized_record", f"grpc:{method}", None, None)
                        bad += 1
                    else:
                        keep.append(ev)
                events = keep
        return events, bad

    def _detach_held(self, taken: list[Event], out: list[Event]) -> None:
        """Copy the messages of events a filter kept, so they do not pin their whole request batch."""
        left = {id(e) for e in out}
        for ev in taken:
            if id(ev) not in left:
                copy = QueryEvent()
                copy.CopyFrom(ev.record)
                ev.record = copy

    def _run(self, events: list[Event]) -> tuple[list[Event], int]:
        """The chain on one batch (caller holds the lock). Returns (out, change of held)."""
        runtime = self.pipeline
        if not self.buffering:
            return (runtime.process(events) if events else []), 0
        before = runtime.held()
        taken = list(events)
        out = runtime.process(events) if events else []
        self._detach_held(taken, out)
        return out, runtime.held() - before

    # ---- output ------------------------------------------------------------------------
    def response(self, request: EventBatch, taken: list[Event], out: list[Event]) -> EventBatch:
        """The response batch: the request itself when every event comes back in order (messages reused)."""
        encode = self.codec.encode
        if len(out) == len(request.events) and len(taken) == len(out) and all(map(_is, out, taken)):
            for ev in out:
                u, q, t, r, lk = ev.orig  # type: ignore[attr-defined]  # ev is taken[i] (checked above): a ProtoEvent
                if ev.user is not u or ev.query is not q or ev.time is not t or ev.rank is not r or ev.url is not lk:
                    encode(ev)
            return request
        return EventBatch(events=[encode(e) for e in out], batch_id=request.batch_id)

    def _take_released(self) -> list[Event]:
        if not self._released:
            return []
        out, self._released = self._released, []
        return out

    def _deliver(self, events: list[Event]) -> None:
        """Write to the sinks (caller holds the lock)."""
        if events:
            self.pipeline.deliver(events)

    def flush(self, final: bool) -> int:
        """Ask buffering filters to release; deliver to the sinks, else keep for Filter streams (``any_stream``).

        Under ``filter_release: sinks`` without sinks nobody may receive a release: the chain is not asked (what
        it holds stays in the state store)."""
        with self.lock:
            runtime = self.pipeline
            if not runtime.sinks:
                if self.release_to_sinks:
                    return 0
                released = runtime.flush(final)
                self._released.extend(released)
                return len(released)
            with runtime.transaction():  # a release commits only together with its delivery
                released = runtime.flush(final)
                if released:
                    self._deliver(released)
                    runtime.flush_sinks()
            return len(released)

    def drain_undeliverable(self) -> int:
        """At shutdown, events nobody can take any more go to the dead-letter file (never lost silently)."""
        with self.lock:
            left = self._take_released()
            for ev in left:
                record = self.codec.encode(ev).SerializeToString()
                self.pipeline.dead_letters.add("undelivered_at_shutdown", "grpc", None, record)
            return len(left)

    # ---- one batch, on a worker thread ------------------------------------------------------
    def filter_batch(self, data: bytes) -> bytes:
        """One ``Filter`` request (wire bytes) through the chain; the serialized response."""
        incoming = parse_batch(data)
        events, bad = self.accept(incoming, "Filter")
        if bad:
            self.pipeline.dead_letters.flush()
        taken = events[:]
        runtime = self.pipeline
        with self.lock:
            if not self.buffering:
                out = runtime.process(events) if events else []
            elif self.release_to_sinks:
                # released events (anything that is not one of this request's own events) go to the sinks only,
                # committed together with the buffer's state
                with runtime.transaction():
                    out = runtime.process(events) if events else []
                    self._detach_held(taken, out)
                    own = {id(e) for e in taken}
                    released = [e for e in out if id(e) not in own]
                    if released:
                        out = [e for e in out if id(e) in own]
                        self._deliver(released)
                        runtime.flush_sinks()
            else:
                out = runtime.process(events) if events else []
                self._detach_held(taken, out)
                out += self._take_released()
        request = incoming.batch if incoming.batch is not None else EventBatch()
        return self.response(request, taken, out).SerializeToString()

    def filter_tail(self) -> bytes | None:
        """After a ``Filter`` stream's last request: the events released meanwhile (``any_stream`` only)."""
        if self.release_to_sinks:
            return None
        with self.lock:
            released = self._take_released()
        if not released:
            return None
        return EventBatch(events=[self.codec.encode(e) for e in released]).SerializeToString()

    def ingest_batch(self, data: bytes, resp: IngestResponse) -> None:
        """One ``Ingest`` request (wire bytes) into the sinks; adds its counts to ``resp``."""
        incoming = parse_batch(data)
        events, bad = self.accept(incoming, "Ingest")
        n = len(events)
        dead = self.pipeline.dead_letters
        with self.lock:
            before = dead.total
            if self.stateful:
                # held rows change only together with the delivery of what left the chain
                with self.pipeline.transaction():
                    out, held = self._run(events)
                    self._deliver(out)
                    self.pipeline.flush_sinks()
            else:
                out, held = self._run(events)
                self._deliver(out)
            refused = dead.total - before  # what a sink refused (a value that would break its framing)
        resp.accepted += n
        resp.delivered += max(0, len(out) - refused)
        resp.held += held
        resp.dropped += max(0, n - len(out) - held)
        resp.dead_lettered += bad + refused
        if bad:
            self.pipeline.dead_letters.flush()

    def flush_sinks(self) -> None:
        with self.lock:
            self.pipeline.flush_sinks()

    def locked_stats(self) -> dict[str, Any]:
        """The pipeline's counters and the refused RPCs (counts and reasons only)."""
        with self.lock:
            s = self.pipeline.stats()
        s["rpcs_refused"] = dict(self.refused)
        return s

    def profile_getter(self) -> tuple[Callable[[str], Mapping[str, int] | None] | None, str]:
        """The ``get_profile`` GetProfile may use, or None and why not (see ``server.profile_lookup``)."""
        filters = list(self.pipeline.filters)
        for i, f in enumerate(filters):
            if isinstance(f, ProfileSource):
                if self.profile_lookup == "raw" or any("user" in g.pseudonymized_roles() for g in filters[:i]):
                    return f.get_profile, ""
                return None, RAW_PROFILES
        return None, NO_PROFILE_FILTER

    def _locked_profile(self, get_profile: Callable[[str], Mapping[str, int] | None], user: str) -> Any:
        with self.lock:
            return get_profile(user)

    # ---- RPCs (coroutines on the server's event loop) ----------------------------------------
    async def _offload(self, fn: Callable[..., T], *args: Any) -> T:
        """Run ``fn`` on a worker thread; the event loop goes on serving other streams meanwhile."""
        return await asyncio.get_running_loop().run_in_executor(self.work, fn, *args)

    def _timed(self, fn: Callable[..., T], data: bytes, *args: Any) -> T:
        started = time.perf_counter()
        try:
            return fn(data, *args)
        finally:
            per_byte = (time.perf_counter() - started) / max(len(data), MIN_COST_BYTES)
            cost = self.cost
            self.cost = per_byte if cost is None else cost + (per_byte - cost) * COST_WEIGHT

    async def _batch(self, fn: Callable[..., T], data: bytes, *args: Any) -> T:
        """Work on one received batch: on the event loop itself when the running estimate says it takes less than
        ``INLINE_SECONDS`` and the chain is free (a thread hop costs more than such a batch), else on a worker
        thread, so a slow chain never holds up health, ``Stats`` or the other streams."""
        cost = self.cost
        if cost is not None and cost * max(len(data), MIN_COST_BYTES) < INLINE_SECONDS and self.lock.acquire(False):
            try:
                return self._timed(fn, data, *args)
            finally:
                self.lock.release()
        return await self._offload(self._timed, fn, data, *args)

    async def Filter(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        self.rpcs = next(self._rpcs)
        if self.buffering and self.release_to_sinks and not self.pipeline.sinks:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, NEEDS_SINK)
        try:
            async for data in requests:
                yield await self._batch(self.filter_batch, data)
            tail = None if self.release_to_sinks else await self._offload(self.filter_tail)
            if tail is not None:
                yield tail
        except asyncio.CancelledError:
            log.info("rpc_cancelled", method="Filter")
            raise
        except Exception as exc:  # values may sit in the message: log the type only
            await self._failed("Filter", exc, context)

    async def Ingest(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, IngestResponse]
    ) -> IngestResponse:
        self.rpcs = next(self._rpcs)
        if not self.pipeline.sinks:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no sinks configured")
        resp = IngestResponse()
        try:
            async for data in requests:
                await self._batch(self.ingest_batch, data, resp)
            await self._offload(self.flush_sinks)
        except asyncio.CancelledError:
            log.info("rpc_cancelled", method="Ingest")
            raise
        except Exception as exc:
            await self._failed("Ingest", exc, context)
        return resp

    @staticmethod
    async def _failed(method: str, exc: Exception, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        """A stream ended by an error: the client went away (cancelled); a full outbox (RESOURCE_EXHAUSTED); a
        state database or output that cannot be written now (UNAVAILABLE, naming the file and what to do); or a
        bug (INTERNAL, the exception's type only)."""
        if context.cancelled() or context.done():
            log.info("rpc_cancelled", method=method)
            return
        failure = describe_failure(exc)  # names a file or an outbox and what to do, never a value
        code = {
            "busy": grpc.StatusCode.RESOURCE_EXHAUSTED,
            "unavailable": grpc.StatusCode.UNAVAILABLE,
            "internal": grpc.StatusCode.INTERNAL,
        }[failure.kind]
        log.error("rpc_failed", method=method, error=type(exc).__name__, status=code.name, problem=failure.message)
        await context.abort(code, failure.message)

    async def GetProfile(
        self, request: ProfileRequest | Unparseable, context: grpc.aio.ServicerContext[Any, ProfileResponse]
    ) -> ProfileResponse:
        if isinstance(request, Unparseable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unparseable ProfileRequest")
        get_profile, why = self.profile_getter()
        if get_profile is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, why)
        try:
            profile: Mapping[str, int] | None = await self._offload(self._locked_profile, get_profile, request.user)
        except Exception as exc:  # the message may hold the user id: log the type only
            await self._failed("GetProfile", exc, context)
            return ProfileResponse()  # reached only when the client has gone
        if profile is None:
            await context.abort(grpc.StatusCode.NOT_FOUND, "unknown user")
        total = sum(profile.values())
        return ProfileResponse(
            user=request.user,
            counts={str(k): int(v) for k, v in profile.items()},
            weights={str(k): (v / total if total else 0.0) for k, v in profile.items()},
            total=total,
        )

    async def Stats(
        self, request: StatsRequest | Unparseable, context: grpc.aio.ServicerContext[Any, StatsResponse]
    ) -> StatsResponse:
        if isinstance(request, Unparseable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unparseable StatsRequest")
        try:
            s = await asyncio.get_running_loop().run_in_executor(self.admin, self.locked_stats)
            return stats_message(s)
        except Exception as exc:
            await self._failed("Stats", exc, context)
            return StatsResponse()  # reached only when the client has gone
