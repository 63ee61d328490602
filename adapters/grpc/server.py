"""The gRPC source: service ``querylog.v1.QueryLogFilter`` over the configured chain.

* ``Filter`` (bidi stream): each request batch is answered by one response batch
  holding the events that left the chain during that call, plus events a timer
  flush released while no sink was configured. Held events come back later, in
  the response to another batch (possibly of another stream).
* ``Ingest`` (client stream): events go through the chain into the configured
  sinks; the response is sent once the sinks are flushed.
* ``GetProfile``: served by the first filter in the chain that has
  ``get_profile(user) -> dict[str, int] | None``.
* ``Stats``: the pipeline's counters.

Bad input never breaks a stream: an unparseable message, an event with an empty
query or one over ``limits.max_record_bytes`` is dead-lettered (counted by reason)
and the stream goes on. The chain runs under one lock; a timer thread asks
buffering filters to release every ``server.flush_interval_seconds``.
"""

from __future__ import annotations

import itertools
import json
import operator
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import grpc
import structlog
from google.protobuf.message import DecodeError
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from adapters.grpc.codec import EventBatch, ProtoCodec, ProtoEvent, QueryEvent
from adapters.grpc.config import GrpcSourceConfig
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import (
    IngestResponse,
    ProfileRequest,
    ProfileResponse,
    StatsRequest,
    StatsResponse,
)
from sidecar.api import BuildContext, Event, Runtime, Source

log = structlog.get_logger("querylog.grpc")

SERVICE = "querylog.v1.QueryLogFilter"
_is = operator.is_


@dataclass
class Incoming:
    """A request as received: the parsed batch (None when unparseable) and its size in bytes."""

    batch: EventBatch | None
    size: int
    data: bytes | None = None  # kept only when unparseable, for the dead-letter file


def parse_batch(data: bytes) -> Incoming:
    """Request deserializer that never raises: garbage becomes a dead letter, not a dead stream."""
    try:
        return Incoming(EventBatch.FromString(data), len(data))
    except (DecodeError, ValueError):  # ValueError: invalid UTF-8 in a string field
        return Incoming(None, len(data), data)


class QueryLogService:
    """The RPC handlers. Thread-safe: the chain and the sinks are used under :attr:`lock`."""

    def __init__(self, runtime: Runtime, max_record_bytes: int) -> None:
        self.pipeline = runtime
        self.codec = ProtoCodec()
        self.limit = max_record_bytes
        self.lock = threading.Lock()
        self.buffering = any(f.BUFFERING for f in runtime.filters)
        self._released: list[Event] = []  # released by the timer, for the next Filter response
        self._rpcs = itertools.count(1)
        self.rpcs = 0

    # ---- input -------------------------------------------------------------------------
    def accept(self, incoming: Incoming, method: str) -> tuple[list[ProtoEvent], int]:
        """Decode a request into events; bad ones are dead-lettered. Returns (events, dead)."""
        dead = self.pipeline.dead_letters
        batch = incoming.batch
        if batch is None:
            data = incoming.data
            dead.add("invalid_message", f"grpc:{method}", None, data if data and len(data) <= self.limit else None)
            return [], 1
        messages = batch.events
        events = self.codec.decode_batch(messages)
        bad = 0
        # No event can be larger than the batch minus 2 bytes (tag + length) for each other event.
        if incoming.size - 2 * (len(events) - 1) > self.limit:
            limit = self.limit
            sizes = [m.ByteSize() for m in messages]
            if max(sizes, default=0) > limit:
                keep = []
                for ev, size in zip(events, sizes):
                    if size > limit:
                        dead.add("oversized_record", f"grpc:{method}", None, None)
                        bad += 1
                    else:
                        keep.append(ev)
                events = keep
        for ev in events:
            q = ev.query
            if not q or q.isspace():
                break
        else:
            return events, bad
        keep = []
        for ev in events:
            q = ev.query
            if not q or q.isspace():
                dead.add("empty_query", f"grpc:{method}", None, ev.record.SerializeToString())
                bad += 1
            else:
                keep.append(ev)
        return keep, bad

    def _detach_held(self, taken: list[ProtoEvent], out: list[Event]) -> None:
        """Copy the messages of events a filter kept, so they do not pin their whole request batch."""
        left = {id(e) for e in out}
        for ev in taken:
            if id(ev) not in left:
                copy = QueryEvent()
                copy.CopyFrom(ev.record)
                ev.record = copy

    def _run(self, events: list[ProtoEvent]) -> tuple[list[Event], int]:
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
    def response(self, request: EventBatch, taken: list[ProtoEvent], out: list[Event]) -> EventBatch:
        """The response batch: the request itself when every event comes back in order (messages reused)."""
        encode = self.codec.encode
        if len(out) == len(request.events) and len(taken) == len(out) and all(map(_is, out, taken)):
            for ev in out:
                u, q, t, r, lk = ev.orig  # type: ignore[attr-defined]
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
            released = self.pipeline.flush(final)
            if not released:
                return 0
            if self.pipeline.sinks:
                self._deliver(released)
                self.pipeline.flush_sinks()
            else:
                self._released.extend(released)
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
                events, _ = self.accept(incoming, "Filter")
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
                    out, held = self._run(events)
                    self._deliver(out)
                resp.accepted += n
                resp.delivered += len(out)
                resp.held += held
                resp.dropped += max(0, n - len(out) - held)
                resp.dead_lettered += bad
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

    def GetProfile(self, request: ProfileRequest, context: grpc.ServicerContext) -> ProfileResponse:
        provider = next((f for f in self.pipeline.filters if callable(getattr(f, "get_profile", None))), None)
        if provider is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, "no profile filter in the chain")
        try:
            with self.lock:
                profile = provider.get_profile(request.user)  # type: ignore[union-attr]
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

    def Stats(self, request: StatsRequest, context: grpc.ServicerContext) -> StatsResponse:
        try:
            with self.lock:
                s = self.pipeline.stats()
            return stats_message(s)
        except Exception as exc:
            self._failed("Stats", exc, context)
            return StatsResponse()  # reached only when the client has gone


_FILTER_KEYS = {"name", "events_in", "events_out", "held", "counts"}


def stats_message(s: dict[str, Any]) -> StatsResponse:
    """Pipeline.stats() as a StatsResponse (filter extras in a Struct)."""
    resp = StatsResponse(
        events_in=max(0, s["events_in"]),
        events_out=max(0, s["events_out"]),
        events_held=max(0, s["events_held"]),
        events_dropped=max(0, s["events_dropped"]),
        events_dead_lettered=s["events_dead_lettered"],
        dead_letters=s["dead_letters"],
        uptime_seconds=float(s.get("uptime_seconds", 0.0)),
    )
    for f in s["filters"]:
        fs = resp.filters.add(
            name=f["name"],
            events_in=max(0, f["events_in"]),
            events_out=max(0, f["events_out"]),
            held=max(0, f["held"]),
            counts={str(k): int(v) for k, v in f["counts"].items()},
        )
        extra = {k: v for k, v in f.items() if k not in _FILTER_KEYS}
        if extra:
            fs.extra.update(json.loads(json.dumps(extra, default=str)))
    return resp


def stats_dict(resp: StatsResponse) -> dict[str, Any]:
    """A StatsResponse as plain data (for printing)."""
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(resp, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)


class SidecarServer:
    """The gRPC server around a runtime: start, periodic flush, graceful stop (the runtime stays open)."""

    def __init__(self, cfg: GrpcSourceConfig, ctx: BuildContext, runtime: Runtime, listen: str | None = None) -> None:
        self.cfg = cfg
        self.pipeline = runtime
        self.service = QueryLogService(runtime, ctx.max_record_bytes)
        self.listen = listen or self.cfg.listen
        size = self.cfg.max_message_bytes
        self.server = grpc.server(
            ThreadPoolExecutor(max_workers=self.cfg.workers, thread_name_prefix="querylog-rpc"),
            options=[
                ("grpc.max_receive_message_length", size),
                ("grpc.max_send_message_length", size),
                ("grpc.so_reuseport", 0),  # a second sidecar on the same port fails instead of sharing it
            ],
        )
        svc = self.service
        handlers = {
            "Filter": grpc.stream_stream_rpc_method_handler(
                svc.Filter, request_deserializer=parse_batch, response_serializer=EventBatch.SerializeToString
            ),
            "Ingest": grpc.stream_unary_rpc_method_handler(
                svc.Ingest, request_deserializer=parse_batch, response_serializer=IngestResponse.SerializeToString
            ),
            "GetProfile": grpc.unary_unary_rpc_method_handler(
                svc.GetProfile,
                request_deserializer=ProfileRequest.FromString,
                response_serializer=ProfileResponse.SerializeToString,
            ),
            "Stats": grpc.unary_unary_rpc_method_handler(
                svc.Stats,
                request_deserializer=StatsRequest.FromString,
                response_serializer=StatsResponse.SerializeToString,
            ),
        }
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        self.health = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(self.health, self.server)
        self.tls = self.cfg.tls_cert_file is not None
        if self.tls:
            assert self.cfg.tls_cert_file is not None and self.cfg.tls_key_file is not None
            cert = ctx.resolve(self.cfg.tls_cert_file).read_bytes()
            key = ctx.resolve(self.cfg.tls_key_file).read_bytes()
            creds = grpc.ssl_server_credentials([(key, cert)])
            self.port = self.server.add_secure_port(self.listen, creds)
        else:
            self.port = self.server.add_insecure_port(self.listen)
        if not self.port:
            raise OSError(f"cannot listen on {self.listen}")
        self._stop_timer = threading.Event()
        self._timer = threading.Thread(target=self._flush_loop, name="querylog-flush", daemon=True)
        self.metrics_port: int | None = None

    def _flush_loop(self) -> None:
        interval = self.cfg.flush_interval_seconds
        while not self._stop_timer.wait(interval):
            try:
                self.service.flush(final=False)
            except Exception as exc:
                log.error("timer_flush_failed", error=type(exc).__name__)

    def start(self) -> None:
        self.server.start()
        for name in ("", SERVICE):
            self.health.set(name, health_pb2.HealthCheckResponse.SERVING)
        self._timer.start()
        if self.cfg.metrics_listen:
            from sidecar.metrics import serve_metrics

            self._metrics, _, self.metrics_port = serve_metrics(self.cfg.metrics_listen, self._locked_stats)
        log.info(
            "server_started",
            metrics_port=self.metrics_port,
            port=self.port,
            tls=self.tls,
            workers=self.cfg.workers,
            filters=len(self.pipeline.filters),
            sinks=len(self.pipeline.sinks),
        )

    def _locked_stats(self) -> dict[str, Any]:
        with self.service.lock:
            return self.pipeline.stats()

    def stop(self, grace: float | None = None) -> dict[str, int]:
        """Stop accepting, let in-flight RPCs finish within ``grace``, flush filters (final) and deliver."""
        started = time.monotonic()
        self.health.enter_graceful_shutdown()
        self.server.stop(self.cfg.shutdown_grace_seconds if grace is None else grace).wait()
        self._stop_timer.set()
        if self._timer.is_alive():
            self._timer.join()
        released = self.service.flush(final=True)
        undelivered = self.service.drain_undeliverable()
        with self.service.lock:
            stats = self.pipeline.stats()
        if self.metrics_port is not None:
            self._metrics.shutdown()
        counts = {k: v for k, v in stats.items() if k.startswith("events_")}
        log.info(
            "server_stopped",
            rpcs=self.service.rpcs,
            released_at_stop=released,
            undelivered_dead_lettered=undelivered,
            stop_seconds=round(time.monotonic() - started, 3),
            **counts,
        )
        return counts


class GrpcSource(Source[GrpcSourceConfig]):
    """The ``QueryLogFilter`` service as a source: ``Ingest`` into the sinks, ``Filter`` back to the caller."""

    NAME = "grpc"
    Config = GrpcSourceConfig
    SUMMARY = "gRPC service querylog.v1.QueryLogFilter (Filter, Ingest, GetProfile, Stats) + health checking"

    def __init__(self, config: GrpcSourceConfig, ctx: BuildContext, listen: str | None = None) -> None:
        super().__init__(config, ctx)
        self.listen = listen
        self.server: SidecarServer | None = None
        self.final_counts: dict[str, int] = {}

    def start(self, runtime: Runtime) -> None:
        """Bind and serve; returns at once (RPCs run on the server's threads)."""
        self.server = SidecarServer(self.config, self.ctx, runtime, self.listen)
        self.server.start()

    @property
    def port(self) -> int:
        """The bound port (useful with ``listen: host:0``)."""
        assert self.server is not None, "start() first"
        return int(self.server.port)

    def stop(self, grace: float | None = None) -> None:
        """Graceful stop: in-flight RPCs finish within ``grace``, buffers flush, released events are delivered."""
        if self.server is not None:
            self.final_counts = self.server.stop(grace)
            self.server = None
