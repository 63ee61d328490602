"""The RPC handlers of ``querylog.v1.QueryLogFilter``: ``Filter``, ``Ingest``, ``GetProfile``, ``Stats``.

Bad input never breaks a stream: an unparseable message, an event with an empty
query or one over ``limits.max_record_bytes`` is dead-lettered (counted by reason)
and the stream goes on. The chain runs under one lock.
"""

from __future__ import annotations

import itertools
import operator
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import TypeVar

import grpc
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
from sidecar.api import Event, Runtime

log = structlog.get_logger("querylog.grpc")

_is = operator.is_
M = TypeVar("M", bound=Message)


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


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """A protobuf varint at ``pos``: (value, position after it); ValueError when truncated or too long."""
    value = shift = 0
    while pos < len(data) and shift < 64:
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
    raise ValueError("bad varint")


def _salvage(data: bytes) -> tuple[EventBatch, list[bytes]] | None:
    """The EventBatch's events parsed one by one from the wire (field 1), with the ones that fail apart;
    None when the batch's own framing is broken (then the whole message is garbage)."""
    batch = EventBatch()
    bad: list[bytes] = []
    pos = 0
    try:
        while pos < len(data):
            key, pos = _varint(data, pos)
            number, wire = key >> 3, key & 7
            if wire == 2:
                size, pos = _varint(data, pos)
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
                _, pos = _varint(data, pos)
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                return None
    except ValueError:
        return None
    return (batch, bad) if pos == len(data) else None


class QueryLogService:
    """The RPC handlers. Thread-safe: the chain and the sinks are used under :attr:`lock`."""

    def __init__(self, runtime: Runtime, max_record_bytes: int) -> None:
        self.pipeline = runtime
        self.codec = ProtoCodec()
        self.limit = max_record_bytes
        self.lock = threading.Lock()
        self.buffering = any(f.BUFFERING for f in runtime.filters)
        #: filters that keep state: Ingest then commits each batch's state with its delivery
        self.stateful = any(f.STATEFUL or f.BUFFERING for f in runtime.filters)
        self._released: list[Event] = []  # released by the timer, for the next Filter response
        self._rpcs = itertools.count(1)
        self.rpcs = 0

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
        """Ask buffering filters to release; deliver to the sinks, else keep for Filter streams."""
        with self.lock:
            runtime = self.pipeline
            if not runtime.sinks:
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

    # ---- RPCs --------------------------------------------------------------------------
    def Filter(self, requests: Iterator[Incoming], context: grpc.ServicerContext) -> Iterator[EventBatch]:
        self.rpcs = next(self._rpcs)
        try:
            for incoming in requests:
                events, bad = self.accept(incoming, "Filter")
                if bad:
                    self.pipeline.dead_letters.flush()
                taken = events[:]
                with self.lock:
                    out = self.pipeline.process(events) if events else []
                    if self.buffering:
                        self._detach_held(taken, out)
                    released = self._take_released()
                if released:
                    out = out + released
                request = incoming.batch if incoming.batch is not None else EventBatch()
                yield self.response(request, taken, out)
            with self.lock:
                released = self._take_released()
            if released:
                yield EventBatch(events=[self.codec.encode(e) for e in released])
        except Exception as exc:  # values may sit in the message: log the type only
            self._failed("Filter", exc, context)

    def Ingest(self, requests: Iterator[Incoming], context: grpc.ServicerContext) -> IngestResponse:
        self.rpcs = next(self._rpcs)
        if not self.pipeline.sinks:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no sinks configured")
        resp = IngestResponse()
        try:
            for incoming in requests:
                events, bad = self.accept(incoming, "Ingest")
                n = len(events)
                with self.lock:
                    if self.stateful:
                        # held rows change only together with the delivery of what left the chain
                        with self.pipeline.transaction():
                            out, held = self._run(events)
                            self._deliver(out)
                            self.pipeline.flush_sinks()
                    else:
                        out, held = self._run(events)
                        self._deliver(out)
                resp.accepted += n
                resp.delivered += len(out)
                resp.held += held
                resp.dropped += max(0, n - len(out) - held)
                resp.dead_lettered += bad
                if bad:
                    self.pipeline.dead_letters.flush()
            with self.lock:
                self.pipeline.flush_sinks()
        except Exception as exc:
            self._failed("Ingest", exc, context)
        return resp

    @staticmethod
    def _failed(method: str, exc: Exception, context: grpc.ServicerContext) -> None:
        """A stream ended by an error: the client went away (cancelled), or a bug (INTERNAL, type only)."""
        if not context.is_active():
            log.info("rpc_cancelled", method=method)
            return
        log.error("rpc_failed", method=method, error=type(exc).__name__)
        context.abort(grpc.StatusCode.INTERNAL, f"internal error ({type(exc).__name__})")

    def GetProfile(self, request: ProfileRequest | Unparseable, context: grpc.ServicerContext) -> ProfileResponse:
        if isinstance(request, Unparseable):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unparseable ProfileRequest")
        getters = (getattr(f, "get_profile", None) for f in self.pipeline.filters)
        get_profile: Callable[[str], Mapping[str, int] | None] | None = next((g for g in getters if callable(g)), None)
        if get_profile is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no profile filter in the chain")
        try:
            with self.lock:
                profile = get_profile(request.user)
        except Exception as exc:  # the message may hold the user id: log the type only
            self._failed("GetProfile", exc, context)
            return ProfileResponse()  # reached only when the client has gone
        if profile is None:
            context.abort(grpc.StatusCode.NOT_FOUND, "unknown user")
        total = sum(profile.values())
        return ProfileResponse(
            user=request.user,
            counts={str(k): int(v) for k, v in profile.items()},
            weights={str(k): (v / total if total else 0.0) for k, v in profile.items()},
            total=total,
        )

    def Stats(self, request: StatsRequest | Unparseable, context: grpc.ServicerContext) -> StatsResponse:
        if isinstance(request, Unparseable):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unparseable StatsRequest")
        try:
            with self.lock:
                s = self.pipeline.stats()
            return stats_message(s)
        except Exception as exc:
            self._failed("Stats", exc, context)
            return StatsResponse()  # reached only when the client has gone
