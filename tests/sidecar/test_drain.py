"""A graceful drain of `querylog serve` (issue 26 item 3): on SIGTERM readiness turns 503 at once, the sources keep
taking input for `drain_seconds` (a second signal ends the wait), then stop; in-flight work finishes, filters
flush, outboxes deliver for their close_drain_seconds, exit 0, and the log says what the outboxes still hold."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

from grpc_health.v1 import health_pb2
from helpers import QUERYLOG, exited, wait_until
from helpers.probes import get, health
from helpers.serving import ServeLog, events

from adapters.grpc.client import channel, wait_serving
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import EventBatch
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub


def ingest(port: int, user: str, query: str) -> int:
    """Ingest one event through the grpc source on ``port``; returns how many were delivered."""
    chan = channel(f"127.0.0.1:{port}")
    try:
        batch = EventBatch()
        batch.events.add(user=user, query=query)
        return int(QueryLogFilterStub(chan).Ingest(iter([batch]), timeout=30).delivered)
    finally:
        chan.close()


def test_sigterm_flips_readiness_first_then_exits_0(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """After SIGTERM, while serve is still draining: /readyz is 503 naming `draining`, gRPC health NOT_SERVING,
    /healthz 200, and the source still takes input; a second SIGTERM ends the drain, exit 0, nothing lost."""
    config = write_config(
        "metrics_listen: 127.0.0.1:0\ndrain_seconds: 600\nsources:\n  - grpc: {listen: 127.0.0.1:0}\n"
        "sinks:\n  - file: {path: out.tsv}\n"
    )
    proc = subprocess.Popen([QUERYLOG, "serve", "-c", str(config)], stderr=subprocess.PIPE, text=True)
    log = ServeLog(proc)
    try:
        (grpc_port,) = log.ports("grpc")
        metrics_port = log.metrics_port()
        chan = channel(f"127.0.0.1:{grpc_port}")
        assert wait_serving(chan, 30)
        chan.close()
        assert get(metrics_port, "/readyz")[0] == 200
        assert ingest(grpc_port, "u1", "before the drain") == 1
        proc.send_signal(signal.SIGTERM)
        _, body = wait_until(
            lambda: (answer := get(metrics_port, "/readyz"))[0] == 503 and answer,
            what="/readyz to answer 503 after SIGTERM",
            abort=exited(proc),
        )
        assert json.loads(body) == {"ready": False, "not_ready": ["draining"]}
        assert health(grpc_port) == health_pb2.HealthCheckResponse.NOT_SERVING
        assert get(metrics_port, "/healthz")[0] == 200
        assert ingest(grpc_port, "u2", "during the drain") == 1  # not ready, still taking input
        assert proc.poll() is None  # still draining (drain_seconds: 600)
    finally:
        proc.send_signal(signal.SIGTERM)
        err = log.text()
    assert proc.returncode == 0, err
    lines = err.splitlines()
    assert events(lines, "draining")[0]["drain_seconds"] == 600
    order = [e["event"] for e in map(json.loads, (x for x in lines if x.startswith("{")))]
    assert order.index("draining") < order.index("server_stopped") < order.index("outbox_left")
    rows = (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert sorted(row.split("\t")[1] for row in rows) == ["before the drain", "during the drain"]


def test_the_log_says_what_the_outbox_still_holds(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """A sink whose peer is down: at exit (0) the `outbox_left` event counts the events, batches and bytes its
    outbox keeps for the next start, by outbox name, and nothing else (no value)."""
    dead = socket.socket()  # bound, never listening: a connection to it is refused
    dead.bind(("127.0.0.1", 0))
    config = write_config(
        "sources:\n  - grpc: {listen: 127.0.0.1:0}\n"
        f"sinks:\n  - http: {{url: 'http://127.0.0.1:{dead.getsockname()[1]}/', retry_initial_seconds: 5, "
        "close_drain_seconds: 0}\n"
    )
    proc = subprocess.Popen([QUERYLOG, "serve", "-c", str(config)], stderr=subprocess.PIPE, text=True)
    log = ServeLog(proc)
    try:
        (grpc_port,) = log.ports("grpc")
        chan = channel(f"127.0.0.1:{grpc_port}")
        assert wait_serving(chan, 30)
        chan.close()
        assert ingest(grpc_port, "u-left-1", "secret left query") == 1
    finally:
        proc.send_signal(signal.SIGTERM)
        err = log.text()
        dead.close()
    assert proc.returncode == 0, err
    (left,) = events(err.splitlines(), "outbox_left")
    assert left["level"] == "warning" and left["events"] == 1
    ((name, counts),) = left["outboxes"].items()
    assert name.startswith("http_127_0_0_1_") and counts["events"] == 1 and counts["batches"] == 1
    assert "u-left-1" not in err and "secret left" not in err
