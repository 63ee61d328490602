"""Shared helpers of the Vector tests: log events built from Python values, an in-process sidecar with a
``vector`` source on a free port, and raw ``PushEvents`` calls."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from adapters.vector.codec import frame
from adapters.vector.source import VectorSource
from adapters.vector.stubs.event_pb2 import EventWrapper
from adapters.vector.stubs.vector_pb2 import HealthCheckRequest, HealthCheckResponse
from adapters.vector.values import set_value
from sidecar.api import Filter, Sink
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

#: The roles of the Vector tests' events: ``user_id``, ``message``, ``timestamp``.
ROLES_YAML = "schema: {roles: {user: user_id, query: message, time: timestamp, rank: null, url: null}}\n"


def log_event(fields: Mapping[str, Any], legacy: bool = False) -> EventWrapper:
    """A log event whose map holds ``fields`` (Python values, see adapters.vector.values); ``legacy``: in the
    deprecated ``Log.fields`` instead of ``Log.value``."""
    w = EventWrapper()
    if legacy:
        w.log.SetInParent()
        for key, value in fields.items():
            set_value(w.log.fields[key], value)
    else:
        set_value(w.log.value, dict(fields))
    return w


def wire(fields: Mapping[str, Any], legacy: bool = False) -> bytes:
    return log_event(fields, legacy).SerializeToString()


def request(events: Sequence[EventWrapper | bytes]) -> bytes:
    """A PushEventsRequest's bytes."""
    return frame([e if isinstance(e, bytes) else e.SerializeToString() for e in events])


@dataclass
class Running:
    pipeline: Pipeline
    source: VectorSource
    channel: grpc.Channel
    address: str

    def push(self, payload: bytes, timeout: float = 10.0) -> bytes:
        """PushEvents with raw request bytes; returns the raw response bytes (raises grpc.RpcError)."""
        call = self.channel.unary_unary("/vector.Vector/PushEvents")
        result: bytes = call(payload, timeout=timeout)
        return result

    def push_future(self, payload: bytes, timeout: float = 10.0) -> grpc.Future:
        return self.channel.unary_unary("/vector.Vector/PushEvents").future(payload, timeout=timeout)

    def health(self) -> HealthCheckResponse:
        call = self.channel.unary_unary(
            "/vector.Vector/HealthCheck",
            request_serializer=HealthCheckRequest.SerializeToString,
            response_deserializer=HealthCheckResponse.FromString,
        )
        response: HealthCheckResponse = call(HealthCheckRequest(), timeout=5)
        return response


@contextmanager
def vector_sidecar(
    config: Path,
    *,
    port: int = 0,
    extra_filters: Sequence[Filter[Any]] = (),
    extra_sinks: Sequence[Sink[Any]] = (),
) -> Iterator[Running]:
    """A Pipeline for ``config`` with its ``vector`` source on 127.0.0.1 (``port`` 0: a free one) and the runtime's
    release timer, as ``serve`` runs them; at the end the source stops, the runtime releases (final) and closes."""
    cfg = load_config(config)
    pipeline = Pipeline(cfg, seed=7)
    pipeline.chain.filters.extend(extra_filters)
    pipeline.sinks.extend(extra_sinks)
    spec = cfg.source("vector")
    assert spec is not None, "the config has no vector source"
    source = VectorSource(spec.config, pipeline.ctx, listen=f"127.0.0.1:{port}")
    try:
        source.start(pipeline)
        pipeline.start_release_timer()
        (bound,) = source.listening()
        address = f"127.0.0.1:{bound.port}"
        channel = grpc.insecure_channel(address)
        try:
            yield Running(pipeline, source, channel, address)
        finally:
            channel.close()
            source.stop(grace=1.0)
            if any(f.BUFFERING for f in pipeline.filters):  # serve's one final release
                pipeline.release(final=True)
    finally:
        pipeline.close()


def port_of_a_stopped_sidecar(config: Path) -> int:
    """Run ``config``'s vector sidecar once on port 0 and stop it: the port it bound, where nothing listens now
    (a downstream that went down). A test restarts it there with ``vector_sidecar(config, port=...)``: a restart
    keeps its address, so this port is the one the sidecar bound itself, not one picked before any bind."""
    with vector_sidecar(config) as running:
        port = int(running.address.rsplit(":", 1)[1])
    return port
