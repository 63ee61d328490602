"""Client helpers for the sidecar's gRPC service: a channel, readiness, batches by ``seq``, ``Stats``, ``GetProfile``.

A channel can use TLS, a client certificate (mutual TLS) and a bearer token (see :func:`channel`).

Streaming a file through ``Filter`` is ``querylog send`` (:mod:`sidecar.tools.send`).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import grpc

from adapters.grpc.auth import BearerToken
from adapters.grpc.codec import EventBatch, ProtoCodec
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import ProfileRequest, ProfileResponse, StatsRequest, StatsResponse
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub
from sidecar.api import Event


def _text(value: Any) -> str:
    return "" if value is None else value if type(value) is str else str(value)


def channel(
    address: str,
    tls_ca: str | None = None,
    max_message_bytes: int = 64 * 1024 * 1024,
    *,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    token: str | None = None,
) -> grpc.Channel:
    """A channel to the sidecar.

    TLS when a CA certificate file is given (``tls_ca``; without it but with a client certificate, the
    system's roots); ``tls_cert`` and ``tls_key`` (both or neither) are the client certificate for mutual
    TLS; ``token`` is sent as ``authorization: Bearer <token>`` on every call.
    """
    if (tls_cert is None) != (tls_key is None):
        raise ValueError("a client certificate needs both tls_cert and tls_key")
    options = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
    ]
    chan: grpc.Channel
    if tls_ca or tls_cert:
        creds = grpc.ssl_channel_credentials(
            root_certificates=Path(tls_ca).read_bytes() if tls_ca else None,
            private_key=Path(tls_key).read_bytes() if tls_key else None,
            certificate_chain=Path(tls_cert).read_bytes() if tls_cert else None,
        )
        chan = grpc.secure_channel(address, creds, options=options)
    else:
        chan = grpc.insecure_channel(address, options=options)
    if token is not None:
        chan = grpc.intercept_channel(chan, BearerToken(token))
    return chan


def wait_serving(chan: grpc.Channel, timeout: float) -> bool:
    """Wait until the health service says SERVING (False on timeout)."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    stub = health_pb2_grpc.HealthStub(chan)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            request = health_pb2.HealthCheckRequest(service="")
            resp = stub.Check(request, timeout=1.0)  # type: ignore[attr-defined]  # the stubs omit HealthStub's methods
            if resp.status == health_pb2.HealthCheckResponse.SERVING:
                return True
        except grpc.RpcError:
            pass
        time.sleep(0.05)
    return False


def to_batch(events: list[Event], first_seq: int, batch_id: str = "") -> EventBatch:
    """An EventBatch of the events' roles, with seq numbers from ``first_seq``."""
    batch = EventBatch(batch_id=batch_id)
    add = batch.events.add
    seq = first_seq
    for ev in events:
        m = add()
        try:  # string roles (TSV, most JSON) go straight in; setting attributes beats add(**kwargs)
            m.user = ev.user
            m.query = ev.query
            t, r, u = ev.time, ev.rank, ev.url
            m.time = "" if t is None else t
            m.rank = "" if r is None else r
            m.url = "" if u is None else u
        except TypeError:  # a number, a boolean, a null user...: as text
            m.user, m.query = _text(ev.user), _text(ev.query)
            m.time, m.rank, m.url = _text(ev.time), _text(ev.rank), _text(ev.url)
        m.seq = seq
        seq += 1
    return batch


class Reassembler:
    """Matches returned QueryEvents with the records sent, by ``seq``."""

    def __init__(self) -> None:
        self.pending: dict[int, Event] = {}
        self.codec = ProtoCodec()
        self.unknown = 0

    def add(self, events: list[Event], first_seq: int) -> None:
        self.pending.update(zip(range(first_seq, first_seq + len(events)), events))

    def take(self, batch: EventBatch) -> list[Event]:
        """The sent events for a response batch, with the returned role values written in."""
        pop = self.pending.pop
        out: list[Event] = []
        for m in batch.events:
            ev = pop(m.seq, None)
            if ev is None:  # not ours (or a fresh event made by a filter): roles + attributes
                self.unknown += 1
                out.append(self.codec.decode(m))
                continue
            u, q, t, r, lk = m.user, m.query, m.time, m.rank, m.url
            old = ev.user
            if u != old and u != _text(old):
                ev.user = u
            old = ev.query
            if q != old and q != _text(old):
                ev.query = q
            old = ev.time
            if t != old and t != _text(old):
                ev.time = t
            old = ev.rank
            if r != old and r != _text(old):
                ev.rank = r
            old = ev.url
            if lk != old and lk != _text(old):
                ev.url = lk
            out.append(ev)
        return out


def get_stats(chan: grpc.Channel, timeout: float = 10.0) -> StatsResponse:
    resp: StatsResponse = QueryLogFilterStub(chan).Stats(StatsRequest(), timeout=timeout)
    return resp


def get_profile(chan: grpc.Channel, user: str, timeout: float = 10.0) -> ProfileResponse:
    resp: ProfileResponse = QueryLogFilterStub(chan).GetProfile(ProfileRequest(user=user), timeout=timeout)
    return resp
