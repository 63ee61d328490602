"""The ``vector.Vector`` gRPC service on the shared server host (:mod:`sidecar.serving`): ``PushEvents`` and
``HealthCheck``.

The host runs the ``grpc.aio`` server on its event loop; a ``PushEvents`` request is split into its events and
handed to ``Runtime.receive`` in the host's work (a worker thread, or the loop itself for a cheap request while
the runtime's lock is free), and answered only when ``receive`` has returned: the events are then delivered, in
a sink's durable outbox, held by a filter, dropped by rule or dead-lettered. When ``receive`` fails the answer
is an error status, never OK, so Vector keeps the events and retries:

* ``RESOURCE_EXHAUSTED``: a sink's outbox is full (:class:`~sidecar.api.Backpressure`) or the disk is full;
* ``UNAVAILABLE``: any other failure (a sink that cannot write, a state store error...);
* ``INVALID_ARGUMENT``: the request's own framing is broken (dead-lettered as ``invalid_request``; Vector
  does not retry it), or it holds more than ``max_events_per_message`` events (counted as
  ``requests_too_many_events``, refused before any event is split out: lower the Vector sink's
  ``batch.max_events``).

A request larger than ``max_message_bytes`` is refused by gRPC itself (RESOURCE_EXHAUSTED). Inside a good
request, each bad event is dead-lettered by reason (see :mod:`adapters.vector.codec`; one longer than
``limits.max_record_bytes`` as ``record_too_large``, without its bytes) and the others go on.

Buffering filters release on the runtime's one timer (a top-level option). Stop: ``HealthCheck`` says
NOT_SERVING, in-flight requests get ``shutdown_grace_seconds``; the runtime's owner then releases (final).
"""

from __future__ import annotations

import errno
import sqlite3
from typing import Any

import grpc
import grpc.aio
import structlog

from adapters.vector.codec import split_request
from adapters.vector.stubs.vector_pb2 import NOT_SERVING, SERVING, HealthCheckRequest, HealthCheckResponse
from sidecar.api import Backpressure, Codec, Listen, RecordBatch, Runtime
from sidecar.protowire import scan_field
from sidecar.serving import ServerHost

log = structlog.get_logger("querylog.vector")

SERVICE = "vector.Vector"
ORIGIN = "vector:PushEvents"
_EMPTY = b""  # a PushEventsResponse has no fields
_REQUESTS = "requests_"


class InvalidRequest(Exception):
    """The request's own framing is broken."""


class TooManyEvents(Exception):
    """The request holds more events than ``max_events_per_message``."""


def status_for(exc: BaseException) -> tuple[grpc.StatusCode, str]:
    """The status answered when ``receive`` failed with ``exc``, and its detail (never a value)."""
    if isinstance(exc, Backpressure):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, "outbox full: events not accepted, retry later"
    if isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return grpc.StatusCode.RESOURCE_EXHAUSTED, "disk full: events not accepted, retry later"
    if isinstance(exc, sqlite3.Error) and getattr(exc, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL:
        return grpc.StatusCode.RESOURCE_EXHAUSTED, "disk full: events not accepted, retry later"
    return grpc.StatusCode.UNAVAILABLE, f"events not stored ({type(exc).__name__}): retry later"


class VectorProtocol:
    """``vector.Vector`` as a :class:`~sidecar.serving.ServerProtocol`: the handlers and the request split."""

    def __init__(
        self,
        runtime: Runtime,
        host: ServerHost,
        codec: Codec,  # the vector codec, or the schema's UBI codec over the logs' maps (ObjectRecords)
        *,
        listen: Listen,
        max_message_bytes: int,
        max_record_bytes: int,
        max_events: int = 100_000,
        creds: grpc.ServerCredentials | None,
        interceptors: list[grpc.aio.ServerInterceptor] | None = None,
    ) -> None:
        self.runtime = runtime
        self.host = host
        self.codec = codec
        self.listen = listen
        self.max_message_bytes = max_message_bytes
        self.max_record_bytes = max_record_bytes
        self.max_events = max_events
        self.creds = creds
        self.interceptors = interceptors or []
        self.serving = False
        self.server: grpc.aio.Server | None = None
        self._last: str | None = None  # the outcome of the last request

    @property
    def counts(self) -> dict[str, int]:
        """Requests by outcome (``ok``, ``invalid_argument``, ``resource_exhausted``, ``unavailable``)."""
        stats = self.host.stats()
        return {
            k[len(_REQUESTS) :]: v for k, v in stats.items() if k.startswith(_REQUESTS) and k != "requests_in_flight"
        }

    async def start(self, host: ServerHost) -> list[Listen]:
        size = self.max_message_bytes
        server = grpc.aio.server(
            interceptors=self.interceptors,
            options=[
                ("grpc.max_receive_message_length", size),
                ("grpc.max_send_message_length", size),
                ("grpc.so_reuseport", 0),  # a second sidecar on the same port fails instead of sharing it
            ],
        )
        handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
            # PushEvents takes wire bytes: the request is split and parsed in the host's work
            "PushEvents": grpc.unary_unary_rpc_method_handler(self.push_events),
            "HealthCheck": grpc.unary_unary_rpc_method_handler(
                self.health_check,
                request_deserializer=HealthCheckRequest.FromString,
                response_serializer=HealthCheckResponse.SerializeToString,
            ),
        }
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
        address = str(self.listen)
        try:
            port = server.add_secure_port(address, self.creds) if self.creds else server.add_insecure_port(address)
        except RuntimeError as exc:
            raise OSError(f"cannot listen on {address}") from exc
        if not port:
            raise OSError(f"cannot listen on {address}")
        await server.start()
        self.server = server
        self.serving = True
        return [Listen(self.listen.host, port)]

    async def stop(self, host: ServerHost, grace: float) -> None:
        self.serving = False
        if self.server is not None:
            await self.server.stop(grace)

    # ---- the RPCs -------------------------------------------------------------------------------
    async def push_events(self, request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        """Receive the events; answer only once ``receive`` returned, an error status when it failed."""
        try:
            await self.host.work(self.push, len(request), request)
        except InvalidRequest:
            self._count("invalid_argument")
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "not a PushEventsRequest (dead-lettered)")
        except TooManyEvents:
            self._count("too_many_events")
            await context.abort(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"more than {self.max_events} events in one request (max_events_per_message): "
                "lower the sink's batch.max_events",
            )
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
        """Split a request into events and hand them to the runtime; returns the count.

        Raises :class:`InvalidRequest` when the framing is broken, :class:`TooManyEvents` over the per-message
        bound and :class:`~sidecar.api.Backpressure` when a sink's outbox is full (both before anything is split
        or dead-lettered), and whatever ``receive`` raised.
        """
        # n events take at least 2n bytes (tag and length): only a request that long can hold too many
        if len(data) >= 2 * (self.max_events + 1) and scan_field(data, 1, self.max_events, 0)[0] > self.max_events:
            raise TooManyEvents
        full = self.runtime.backpressure()
        if full is not None:  # take nothing: Vector keeps the events and retries
            raise Backpressure(full, "full")
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
        self.host.count(_REQUESTS + outcome)
        self._last = outcome
