"""Asking a `querylog serve` whether it is alive and ready: its HTTP probes and its gRPC health."""

from __future__ import annotations

import urllib.error
import urllib.request
from typing import Any

from grpc_health.v1 import health_pb2, health_pb2_grpc

from adapters.grpc.client import channel


def get(port: int, path: str, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """GET ``path`` on 127.0.0.1:``port``: (status, body), error statuses included."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return int(answer.status), answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def health(port: int) -> Any:
    """The gRPC health status (``Check`` of service "") of the server on 127.0.0.1:``port``."""
    chan = channel(f"127.0.0.1:{port}")
    try:
        stub = health_pb2_grpc.HealthStub(chan)
        return stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=10).status
    finally:
        chan.close()
