"""The RPC handlers of ``querylog.v1.QueryLogFilter``: ``Filter``, ``Ingest``, ``GetProfile``, ``Stats``.

The handlers are coroutines on the shared server host (:mod:`sidecar.serving`, set up by
:mod:`adapters.grpc.server`): a stream waiting for its next message holds no thread, so idle streams cost
nothing and never starve health or ``Stats``. Each received batch is parsed, decoded (once), run through the
runtime and encoded in the host's work (a worker thread, ``server.workers``, or the loop itself for a cheap
batch while the runtime's lock is free); the chain, the sinks and the state store are used one batch at a time
under the runtime's lock.

**What a caller receives.** ``Filter`` answers each request batch with one response batch. With a chain
that holds events (a ``BUFFERING`` filter such as ``category_buffer``) the delivery model is
``server.filter_release``:

* ``sinks`` (default, :meth:`~sidecar.api.Runtime.transform`): a response carries only events *of its own
  request* that passed straight through the chain (none, with ``category_buffer``, whose output events are all
  re-paired). Events a buffer releases, during a call or on the runtime's timer, go to the configured sinks,
  committed together with the buffer's state, as ``Ingest`` does. With no sink configured, ``Filter`` is
  refused (FAILED_PRECONDITION) and the chain is never asked to release.
* ``any_stream``: each ``Filter`` request first asks buffering filters to release what their policy lets go,
  and that comes back in its response after the request's own events (the runtime's timer releases into the
  sinks, when there are any). Single-tenant only: any caller may receive any user's events; and best effort:
  what a response carried to a client that went away meanwhile is gone.

``Ingest`` hands each batch to :meth:`~sidecar.api.Runtime.receive` and answers once every batch of the stream
is durable (delivered to the sinks and flushed, or held by a filter, committed together). ``GetProfile``
answers only the configured profile reader (``server.profile_reader_token_*``: a token of its own, or
``server.profile_reader_subject``: a client certificate under mutual TLS); with none configured it is refused
(PERMISSION_DENIED), since any client may learn the pseudonym of any raw id through ``Filter``. It is served by
the first filter that is a :class:`~sidecar.api.ProfileSource`, only when a filter before it pseudonymizes the
user role (``server.profile_lookup: pseudonym``, the default), so profiles are looked up by the pseudonym the
sidecar emits, never by a raw user id; ``raw`` lifts that rule. ``Stats`` gives the
pipeline's counters and the RPCs refused by reason.

Bad input never breaks a stream: an unparseable message or event, or one over ``limits.max_record_bytes``,
is dead-lettered (counted by reason) and the stream goes on; an empty query is a valid event. A message of more
than ``server.max_events_per_message`` events ends its RPC with INVALID_ARGUMENT before any event is parsed
(counted as ``too_many_events``): what the stream sent before it stands, the client splits the batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import operator
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, Literal

import grpc
import grpc.aio
import structlog

from adapters.grpc.codec import DECODED, EventBatch, ProtoCodec, QueryEvent
from adapters.grpc.stats import stats_message
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import (
    IngestResponse,
    ProfileRequest,
    ProfileResponse,
    StatsRequest,
    StatsResponse,
)
from adapters.grpc.wire import Incoming, TooManyEvents, Unparseable, parse_batch
from sidecar.api import Backpressure, Event, ProfileSource, RecordBatch, Runtime
from sidecar.failures import describe_failure
from sidecar.grpcauth import carries, peer_subjects
from sidecar.serving import ServerHost

log = structlog.get_logger("querylog.grpc")

_is = operator.is_

#: Why ``Filter`` is refused under ``filter_release: sinks`` when the chain buffers and no sink is configured.
NEEDS_SINK = "buffering chain: released events go to sinks; configure a sink or use Ingest"
NO_PROFILE_FILTER = "no profile filter in the chain"
NO_PROFILE_READER = (
    "GetProfile is off: profiles are readable only by a configured reader; set server.profile_reader_token_file "
    "(or _env: the reader sends it as its bearer token) or server.profile_reader_subject (a client certificate, "
    "with mutual TLS)"
)
NOT_PROFILE_READER = (
    "not the profile reader: GetProfile needs the token of server.profile_reader_token_file/_env or the client "
    "certificate of server.profile_reader_subject"
)
RAW_PROFILES = (
    "profiles are keyed by raw user ids: put a pseudonymize filter of the user role before the profile filter "
    "(then look users up by their pseudonym), or set server.profile_lookup: raw"
)

#: Cancelled RPCs (a client that went away) are logged at most once per this many seconds, with their count.
CANCELLED_LOG_SECONDS = 10.0


class CancelledLog:
    """One ``rpc_cancelled`` line per interval: the first cancellation is logged at once, later ones are counted
    (by method) and logged with the next cancellation after the interval (``Stats`` counts every one)."""

    def __init__(self) -> None:
        self.clock = time.monotonic
        self.since: Counter[str] = Counter()
        self.logged_at: float | None = None

    def note(self, method: str) -> None:
        self.since[method] += 1
        now = self.clock()
        if self.logged_at is None or now - self.logged_at >= CANCELLED_LOG_SECONDS:
            by_method, self.since, self.logged_at = dict(self.since), Counter(), now
            log.info("rpc_cancelled", count=sum(by_method.values()), by_method=by_method)


class QueryLogService:
    """The RPC handlers. A received batch is worked on by the host (:meth:`~sidecar.serving.ServerHost.work`): on a
    worker thread, or on the loop when it is cheap and the runtime's lock is free; ``Stats`` runs on the host's
    side thread so that it never queues behind batches."""

    def __init__(
        self,
        runtime: Runtime,
        host: ServerHost,
        max_record_bytes: int,
        *,
        max_events: int = 100_000,
        filter_release: Literal["sinks", "any_stream"] = "sinks",
        profile_lookup: Literal["pseudonym", "raw"] = "pseudonym",
        reader_token: bytes | None = None,
        reader_subject: str | None = None,
    ) -> None:
        self.pipeline = runtime
        self.host = host
        self.codec = ProtoCodec()
        self.limit = max_record_bytes
        self.max_events = max_events
        #: the runtime's own (re-entrant) lock, shared with every other source of the runtime
        self.lock = runtime.lock
        self.buffering = any(f.BUFFERING for f in runtime.filters)
        #: released events go to the sinks only, never into another caller's Filter response
        self.release_to_sinks = filter_release == "sinks"
        self.profile_lookup = profile_lookup
        self.reader_token = reader_token
        self.reader_subject = reader_subject
        self._rpcs = itertools.count(1)
        self.rpcs = 0
        #: RPCs refused before reaching the chain, by reason (missing_token, wrong_token)
        self.refused: Counter[str] = Counter()
        self.cancelled_log = CancelledLog()

    def refuse(self, reason: str) -> int:
        """Count an RPC refused for ``reason`` (on the event loop); returns the count so far."""
        self.refused[reason] += 1
        return self.refused[reason]

    # ---- input -------------------------------------------------------------------------
    def accept(self, incoming: Incoming, method: str) -> tuple[list[Event], int]:
        """Decode a request into events (ProtoEvents, decoded once: the runtime takes them as they are); bad ones
        are dead-lettered. Returns (events, dead)."""
        dead = self.pipeline.dead_letters
        batch = incoming.batch
        if batch is None:
            data = incoming.data
            dead.add("invalid_message", f"grpc:{method}", None, data if data and len(data) <= self.limit else None)
            return [], 1
        bad = len(incoming.bad_events) + incoming.oversized
        for chunk in incoming.bad_events:  # the rest of the batch goes on
            dead.add("invalid_event", f"grpc:{method}", None, chunk if len(chunk) <= self.limit else None)
        for _ in range(incoming.oversized):
            dead.add("oversized_record", f"grpc:{method}", None, None)
        messages = batch.events
        events: list[Event] = list(self.codec.decode_batch(messages))
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
        """Copy the messages of events a filter kept, so they do not pin their whole request batch (caller holds
        the lock: a held event is the chain's)."""
        left = {id(e) for e in out}
        for ev in taken:
            if id(ev) not in left:
                copy = QueryEvent()
                copy.CopyFrom(ev.record)
                ev.record = copy

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

    # ---- one batch, in the host's work ---------------------------------------------------------
    def filter_batch(self, data: bytes) -> bytes:
        """One ``Filter`` request (wire bytes) through the chain; the serialized response.

        ``sinks``: :meth:`Runtime.transform` (what a buffer releases goes to the sinks, committed with its state).
        ``any_stream``: what buffering filters may release now (``flush``) comes back with this response, after
        the request's own events (so a stream pulls what the old timer pushed; nothing is kept in memory)."""
        incoming = parse_batch(data, self.max_events, self.limit)
        events, bad = self.accept(incoming, "Filter")
        request = incoming.batch if incoming.batch is not None else EventBatch()
        taken = events[:]
        runtime = self.pipeline
        if self.release_to_sinks and events:
            with self.lock if self.buffering else contextlib.nullcontext():
                receipt, out = runtime.transform(RecordBatch(events, DECODED, "grpc:Filter"))
                if self.buffering:
                    self._detach_held(taken, out + receipt.delivered)
        elif self.release_to_sinks or not self.buffering:  # nothing to run, or any_stream without buffering
            if bad:
                runtime.dead_letters.flush()
            out = runtime.process(events) if events else []
        else:  # any_stream: even an empty request takes what may be released now
            if bad:
                runtime.dead_letters.flush()
            with self.lock:
                released = runtime.flush(False)
                out = runtime.process(events) if events else []
                self._detach_held(taken, out)
                out += released
        return self.response(request, taken, out).SerializeToString()

    def ingest_batch(self, data: bytes, resp: IngestResponse) -> None:
        """One ``Ingest`` request (wire bytes) into the sinks (:meth:`Runtime.receive`); adds its counts to
        ``resp``."""
        incoming = parse_batch(data, self.max_events, self.limit)
        events, bad = self.accept(incoming, "Ingest")
        if not events:
            if bad:
                self.pipeline.dead_letters.flush()
            resp.dead_lettered += bad
            return
        taken = events[:]
        with self.lock if self.buffering else contextlib.nullcontext():
            receipt = self.pipeline.receive(RecordBatch(events, DECODED, "grpc:Ingest"))
            if self.buffering:
                self._detach_held(taken, receipt.delivered)
        refused = receipt.reasons["refused_by_sink"]  # a value that would break a sink's framing
        resp.accepted += receipt.accepted
        resp.delivered += max(0, len(receipt.delivered) - refused)
        resp.held += receipt.held
        resp.dropped += receipt.dropped
        resp.dead_lettered += bad + receipt.dead_lettered

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

    def profile_reader_refusal(self, context: grpc.aio.ServicerContext[Any, Any]) -> str | None:
        """None when the caller is the configured profile reader, else why it may not read profiles."""
        token, subject = self.reader_token, self.reader_subject
        if token is None and subject is None:
            return NO_PROFILE_READER
        if token is not None and carries(context.invocation_metadata(), token):
            return None
        if subject is not None and subject in peer_subjects(context):
            return None
        return NOT_PROFILE_READER

    def _locked_profile(self, get_profile: Callable[[str], Mapping[str, int] | None], user: str) -> Any:
        with self.lock:
            return get_profile(user)

    # ---- RPCs (coroutines on the host's event loop) -------------------------------------------
    async def Filter(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        self.rpcs = next(self._rpcs)
        if self.buffering and self.release_to_sinks and not self.pipeline.sinks:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, NEEDS_SINK)
        work = self.host.work
        try:
            async for data in requests:
                yield await work(self.filter_batch, len(data), data)
        except asyncio.CancelledError:
            self._cancelled("Filter")
            raise
        except Exception as exc:  # values may sit in the message: log the type only
            await self._failed("Filter", exc, context)
            return
        self.host.count("rpcs_ok")

    async def Ingest(
        self, requests: AsyncIterator[bytes], context: grpc.aio.ServicerContext[bytes, IngestResponse]
    ) -> IngestResponse:
        self.rpcs = next(self._rpcs)
        if not self.pipeline.sinks:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no sinks configured")
        resp = IngestResponse()
        work = self.host.work
        try:
            async for data in requests:
                await work(self.ingest_batch, len(data), data, resp)
        except asyncio.CancelledError:
            self._cancelled("Ingest")
            raise
        except Exception as exc:
            await self._failed("Ingest", exc, context)
            return resp  # reached only when the client has gone
        self.host.count("rpcs_ok")
        return resp

    def _cancelled(self, method: str) -> None:
        """Count a cancelled RPC (on the event loop); logged at most once per ``CANCELLED_LOG_SECONDS``."""
        self.host.count("rpcs_cancelled")
        self.cancelled_log.note(method)

    async def _failed(self, method: str, exc: Exception, context: grpc.aio.ServicerContext[Any, Any]) -> None:
        """A stream ended by an error: the client went away (cancelled); a full outbox (RESOURCE_EXHAUSTED); a
        state database or output that cannot be written now (UNAVAILABLE, naming the file and what to do); or a
        bug (INTERNAL, the exception's type only)."""
        if context.cancelled() or context.done():
            self._cancelled(method)
            return
        if isinstance(exc, TooManyEvents):  # the client's to fix: nothing of the message was parsed
            if self.refuse("too_many_events") == 1:
                log.warning("rpc_refused", method=method, reason="too_many_events", bound=exc.bound)
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, str(exc))
        if isinstance(exc, Backpressure):
            code, message = grpc.StatusCode.RESOURCE_EXHAUSTED, str(exc)
            detail = message
        else:
            failure = describe_failure(exc)  # says what failed and what to do, never a value nor a server path
            code = {
                "busy": grpc.StatusCode.RESOURCE_EXHAUSTED,
                "unavailable": grpc.StatusCode.UNAVAILABLE,
                "internal": grpc.StatusCode.INTERNAL,
            }[failure.kind]
            message, detail = failure.message, failure.detail  # the server's own log keeps the file's path
        self.host.count(f"rpcs_{code.name.lower()}")
        log.error("rpc_failed", method=method, error=type(exc).__name__, status=code.name, problem=detail)
        await context.abort(code, message)

    async def GetProfile(
        self, request: ProfileRequest | Unparseable, context: grpc.aio.ServicerContext[Any, ProfileResponse]
    ) -> ProfileResponse:
        if isinstance(request, Unparseable):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "unparseable ProfileRequest")
        denied = self.profile_reader_refusal(context)
        if denied is not None:
            self.refuse("not_profile_reader")
            await context.abort(grpc.StatusCode.PERMISSION_DENIED, denied)
        get_profile, why = self.profile_getter()
        if get_profile is None:
            await context.abort(grpc.StatusCode.FAILED_PRECONDITION, why)
        try:
            profile = await self.host.run_in_worker(self._locked_profile, get_profile, request.user)
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
            return stats_message(await self.host.run_aside(self.locked_stats))
        except Exception as exc:
            await self._failed("Stats", exc, context)
            return StatsResponse()  # reached only when the client has gone
