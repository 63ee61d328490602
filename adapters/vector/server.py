"""The ``vector.Vector`` gRPC service around a runtime: ``PushEvents``, ``HealthCheck``, the periodic flush.

The server is ``grpc.aio`` on an event loop of its own thread; a ``PushEvents`` request is split into its
events, handed to ``runtime.receive`` on a worker thread (the runtime is synchronous and runs one batch at
a time), and answered only when ``receive`` has returned: the events are then delivered, in a sink's
durable outbox, held by a filter, dropped by rule or dead-lettered. When ``receive`` fails the answer is an
error status, never OK, so Vector keeps the events and retries:

* ``RESOURCE_EXHAUSTED``: a sink's outbox is full (backpressure) or the disk is full;
* ``UNAVAILABLE``: any other failure (a sink that cannot write, a state store error...);
* ``INVALID_ARGUMENT``: the request's own framing is broken (dead-lettered as ``invalid_request``; Vector
  does not retry it).

A request larger than ``max_message_bytes`` is refused by gRPC itself (RESOURCE_EXHAUSTED). Inside a good
request, each bad event is dead-lettered by reason (see :mod:`adapters.vector.codec`; one longer than
``limits.max_record_bytes`` as ``record_too_large``, without its bytes) and the others go on.

A timer thread asks buffering filters to release every ``flush_interval_seconds`` (their events go to the
sinks in the same transaction as the filters' state). Stop: ``HealthCheck`` says NOT_SERVING, in-flight
requests get ``shutdown_grace_seconds``, then the filters flush (final) into the sinks.
"""

from __future__ import annotations

import asyncio
import errno
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import grpc
import grpc.aio
import structlog

from adapters.vector.codec import VectorCodec, split_request
from adapters.vector.config import VectorSourceConfig
from adapters.vector.stubs.vector_pb2 import NOT_SERVING, SERVING, HealthCheckRequest, HealthCheckResponse
from sidecar.api import BuildContext, RecordBatch, RolesConfig, Runtime
from sidecar.outbox import OutboxFull, backpressure

log = structlog.get_logger("querylog.vector")

SERVICE = "vector.Vector"
ORIGIN = "vector:PushEvents"
#: worker threads for received requests (parsing runs in parallel; the chain one batch at a time)
WORKERS = 4
_EMPTY = b""  # a PushEventsResponse has no fields
T = TypeVar("T")


class InvalidRequest(Exception):
    """The request's own framing is broken."""


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status answered when ``receive`` failed with ``exc``, and its detail (never a value)."""
    if isinstance(exc, OutboxFull):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, "outbox full: events not accepted, retry later"
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, "disk full: events not accepted, retry later"
    if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return grpc.StatusCode.RESOURCE_EXHAUSTED, "disk full: events not accepted, retry later"
    return grpc.StatusCode.UNAVAILABLE, f"events not stored ({type(exc).__name__}): retry later"


class VectorServer:
    """The ``vector.Vector`` service around a runtime: start, periodic flush, graceful stop (runtime stays open)."""

    def __init__(self, cfg: VectorSourceConfig, ctx: BuildContext, runtime: Runtime, listen: str | None = None) -> None:
        self.cfg = cfg
        self.runtime = runtime
        self.listen = listen or cfg.listen
        self.codec = VectorCodec(ctx.schema)
        self.max_record_bytes = ctx.max_record_bytes
        self.serving = False
        #: requests by outcome (``ok``, ``invalid_argument``, ``resource_exhausted``, ``unavailable``)
        self.counts: Counter[str] = Counter()
        self._count_lock = threading.Lock()
        self._last: str | None = None  # the outcome of the last request
        self._work = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="querylog-vector")
        creds = self._credentials(ctx)
        self._loop = asyncio.new_event_loop()
        self._loop_thread = threading.Thread(target=self._loop.run_forever, name="querylog-vector", daemon=True)
        self._loop_thread.start()
        try:
            self.port = self._call(self._bind(creds))
        except BaseException:
            self._close_loop()
            self._work.shutdown(wait=False)
            raise
        self._stop_timer = threading.Event()
        self._timer = threading.Thread(target=self._flush_loop, name="querylog-vector-flush", daemon=True)

    def _credentials(self, ctx: BuildContext) -> grpc.ServerCredentials | None:
        if self.cfg.tls_cert_file is None or self.cfg.tls_key_file is None:
            return None
        cert = ctx.resolve(self.cfg.tls_cert_file).read_bytes()
        key = ctx.resolve(self.cfg.tls_key_file).read_bytes()
        return grpc.ssl_server_credentials([(key, cert)])

    def _call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    async def _bind(self, creds: grpc.ServerCredentials | None) -> int:
        size = self.cfg.max_message_bytes
        self.server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", size),
                ("grpc.max_send_message_length", size),
                ("grpc.so_reuseport", 0),  # a second sidecar on the same port fails instead of sharing it
            ]
        )
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            # PushEvents takes wire bytes: the request is split and parsed on a worker thread
            "PushEvents": grpc.unary_unary_rpc_method_handler(self.push_events),
            "HealthCheck": grpc.unary_unary_rpc_method_handler(
                self.health_check,
                request_deserializer=HealthCheckRequest.FromString,
                response_serializer=HealthCheckResponse.SerializeToString,
            ),
        }
        self.server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        try:
            port = (
                self.server.add_secure_port(self.listen, creds)
                if creds is not None
                else self.server.add_insecure_port(self.listen)
            )
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {self.listen}") from exc
        if not port:
            raise OSError(f"cannot listen on {self.listen}")
        return port

    # ---- the RPCs -------------------------------------------------------------------------------
    async def push_events(self, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        """Receive the events; answer only once ``receive`` returned, an error status when it failed."""
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._work, self.push, request)
        except InvalidRequest:
            self._count("invalid_argument")
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "not a PushEventsRequest (dead-lettered)")
        except Exception as exc:
            code, detail = status_for(exc)
            outcome = code.name.lower()
            if self._last != outcome:  # once per episode: a sender retrying against a full outbox is no news
                log.error("push_events_refused", status=code.name, error=type(exc).__name__)
            self._count(outcome)
            await context.abort(code, detail)
        if self._last not in (None, "ok"):
            log.info("push_events_accepted_again", after=self._last)
        self._count("ok")
        return _EMPTY

    async def health_check(
        self, request: HealthCheckRequest, context: grpc.aio.ServicerContext[HealthCheckRequest, HealthCheckResponse]
    ) -> HealthCheckResponse:
        return HealthCheckResponse(status=SERVING if self.serving else NOT_SERVING)

    def push(self, data: bytes) -> int:
        """Split a request into events and hand them to the runtime (on a worker thread); returns the count.

        Raises :class:`InvalidRequest` when the framing is broken, and whatever ``receive`` raised.
        """
        full = backpressure(self.runtime.sinks)
        if full is not None:  # a sink's outbox is full: take nothing (Vector keeps the events and retries)
            raise OutboxFull(full, "backpressure")
        dead = self.runtime.dead_letters
        try:
            wires = split_request(data)
        except ValueError:
            dead.add("invalid_request", ORIGIN, None, data if len(data) <= self.max_record_bytes else None)
            dead.flush()
            raise InvalidRequest from None
        limit = self.max_record_bytes
        positions: range | list[int] = range(1, len(wires) + 1)  # an event's 1-based place in its request
        if any(len(w) > limit for w in wires):
            kept: list[bytes] = []
            places: list[int] = []
            for i, w in enumerate(wires, 1):
                if len(w) > limit:
                    dead.add("record_too_large", ORIGIN, i, None)  # too large to keep in the dead-letter file
                else:
                    kept.append(w)
                    places.append(i)
            wires, positions = kept, places
        self.runtime.receive(RecordBatch(wires, self.codec, ORIGIN, positions))
        return len(wires)

    def _count(self, outcome: str) -> None:
        with self._count_lock:
            self.counts[outcome] += 1
            self._last = outcome

    # ---- lifecycle ------------------------------------------------------------------------------
    def flush(self, final: bool) -> int:
        """Ask buffering filters to release and deliver what they release, in one transaction."""
        runtime = self.runtime
        if not runtime.sinks or not any(f.BUFFERING for f in runtime.filters):
            return 0
        with runtime.transaction():  # a release commits only together with its delivery
            released = runtime.flush(final)
            if released:
                runtime.deliver(released)
                runtime.flush_sinks()
        return len(released)

    def _flush_loop(self) -> None:
        while not self._stop_timer.wait(self.cfg.flush_interval_seconds):
            try:
                self.flush(final=False)
            except Exception as exc:
                log.error("timer_flush_failed", source="vector", error=type(exc).__name__)

    async def _start(self) -> None:
        await self.server.start()
        self.serving = True

    def start(self) -> None:
        self._call(self._start())
        self._timer.start()
        log.info("vector_source_started", port=self.port, tls=self.cfg.tls_cert_file is not None)
        if self.codec.schema.roles == RolesConfig():
            log.warning(
                "vector_roles_are_the_aol_defaults",
                hint="set schema.roles to your events' keys (e.g. user: user_id, query: message, time: timestamp); "
                "events without the query and user keys are dead-lettered",
            )

    async def _stop(self, grace: float) -> None:
        self.serving = False
        await self.server.stop(grace)

    def _close_loop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._loop_thread.join()
        self._loop.close()

    def stop(self, grace: float | None = None) -> dict[str, int]:
        """Stop accepting, let in-flight requests finish within ``grace``, flush filters (final) and deliver."""
        started = time.monotonic()
        self._call(self._stop(self.cfg.shutdown_grace_seconds if grace is None else grace))
        self._work.shutdown(wait=True, cancel_futures=True)
        self._close_loop()
        self._stop_timer.set()
        if self._timer.is_alive():
            self._timer.join()
        released = 0
        try:
            released = self.flush(final=True)
        except Exception as exc:
            log.error("final_flush_failed", source="vector", error=type(exc).__name__)
        counts = dict(self.counts)
        log.info(
            "vector_source_stopped",
            released_at_stop=released,
            stop_seconds=round(time.monotonic() - started, 3),
            **{f"requests_{k}": v for k, v in counts.items()},
        )
        return counts
