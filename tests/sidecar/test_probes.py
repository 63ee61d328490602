"""Probes on the metrics endpoint (issue 26 item 1): /healthz, /readyz (503 naming what is not ready, no values),
/metrics, 404 elsewhere; the token guards /metrics only; gRPC health agrees with /readyz."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from grpc_health.v1 import health_pb2
from helpers import QUERYLOG
from helpers.probes import get, health
from helpers.serving import ServeLog

from adapters.grpc.client import channel, wait_serving
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import EventBatch
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub
from sidecar.config import load_config
from sidecar.metrics import serve_metrics
from sidecar.pipeline import Pipeline

STATS: dict[str, Any] = {
    "events_in": 0,
    "events_out": 0,
    "events_dropped": 0,
    "events_dead_lettered": 0,
    "events_held": 0,
    "dead_letters": {},
    "filters": [],
}


@pytest.fixture
def endpoint() -> Iterator[tuple[int, list[str]]]:
    """An endpoint with a bearer token whose readiness reasons the test sets (``reasons``)."""
    reasons: list[str] = []
    server, thread, port = serve_metrics(
        "127.0.0.1:0", lambda: STATS, token=b"t0ken-for-metrics", ready=lambda: reasons
    )
    yield port, reasons
    server.shutdown()
    server.server_close()
    thread.join()


class TestPaths:
    def test_healthz_readyz_metrics_and_404(self, endpoint: Any) -> None:
        """/healthz 200; /readyz 200 when nothing is named, else 503 with the names; any other path 404."""
        port, reasons = endpoint
        assert get(port, "/healthz") == (200, b'{"alive": true}\n')
        status, body = get(port, "/readyz")
        assert status == 200 and json.loads(body) == {"ready": True, "not_ready": []}
        reasons.extend(["draining", "outbox_full:forward"])
        status, body = get(port, "/readyz")
        assert status == 503 and json.loads(body) == {"ready": False, "not_ready": ["draining", "outbox_full:forward"]}
        for path in ("/", "/metric", "/healthz/x", "/favicon.ico", "/-/anything"):
            assert get(port, path)[0] == 404, path

    def test_token_guards_metrics_only(self, endpoint: Any) -> None:
        """Probes need no token (Kubernetes probes send none); /metrics answers 401 without it, 200 with it."""
        port, _ = endpoint
        assert get(port, "/metrics")[0] == 401
        status, body = get(port, "/metrics", {"Authorization": "Bearer t0ken-for-metrics"})
        assert status == 200 and b"querylog_events_in_total" in body
        assert get(port, "/healthz")[0] == 200 and get(port, "/readyz")[0] == 200

    def test_without_readiness_no_readyz(self) -> None:
        """An endpoint given no readiness (a grpc source's own metrics_listen) has /healthz and no /readyz."""
        server, thread, port = serve_metrics("127.0.0.1:0", lambda: STATS)
        try:
            assert get(port, "/healthz")[0] == 200 and get(port, "/readyz")[0] == 404
            assert get(port, "/metrics")[0] == 200
        finally:
            server.shutdown()
            server.server_close()
            thread.join()


def test_state_store_not_writable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A state folder the process cannot write (read-only mount, permissions) is named by the runtime's ready()."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("state_dir: state\n", encoding="utf-8")
    pipeline = Pipeline(load_config(cfg), with_sinks=True)
    try:
        assert pipeline.ready() == []
        monkeypatch.setattr("sidecar.readiness.os.access", lambda path, mode: False)
        assert pipeline.ready() == ["state_store_not_writable"]
        monkeypatch.undo()
        pipeline.draining = True
        assert pipeline.ready() == ["draining"]
    finally:
        pipeline.close()


def test_full_outbox_makes_serve_not_ready(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """serve with an http sink whose peer is down and an outbox of one batch: after one acknowledged event the
    outbox is full, /readyz is 503 naming it (no value) and gRPC health says NOT_SERVING; SIGTERM exits 0."""
    dead = socket.socket()  # bound, never listening: a connection to it is refused (and no one else gets it)
    dead.bind(("127.0.0.1", 0))
    dead_port = dead.getsockname()[1]
    config = write_config(
        "metrics_listen: 127.0.0.1:0\nsources:\n  - grpc: {listen: 127.0.0.1:0}\n"
        f"sinks:\n  - http: {{url: 'http://127.0.0.1:{dead_port}/', outbox_max_batches: 1, "
        "retry_initial_seconds: 5, close_drain_seconds: 0}\n"
    )
    proc = subprocess.Popen([QUERYLOG, "serve", "-c", str(config)], stderr=subprocess.PIPE, text=True)
    log = ServeLog(proc)
    try:
        (grpc_port,) = log.ports("grpc")
        metrics_port = log.metrics_port()
        assert get(metrics_port, "/readyz")[0] == 200
        chan = channel(f"127.0.0.1:{grpc_port}")
        assert wait_serving(chan, 30)
        batch = EventBatch()
        batch.events.add(user="u-probe-1", query="secret probe query")
        assert QueryLogFilterStub(chan).Ingest(iter([batch]), timeout=30).delivered == 1
        chan.close()
        status, body = get(metrics_port, "/readyz")
        assert status == 503
        (reason,) = json.loads(body)["not_ready"]
        assert reason.startswith("outbox_full:http_127_0_0_1_")
        assert b"u-probe-1" not in body and b"secret" not in body
        assert health(grpc_port) == health_pb2.HealthCheckResponse.NOT_SERVING
        assert get(metrics_port, "/healthz")[0] == 200  # alive all the same
    finally:
        proc.send_signal(signal.SIGTERM)
        err = log.text()
        dead.close()
    assert proc.returncode == 0, err
