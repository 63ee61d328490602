"""`querylog serve` runs every configured source into one chain and its sinks (issue 12's configuration shape)."""

from __future__ import annotations

import json
import signal
import subprocess
import urllib.request
from collections.abc import Callable
from pathlib import Path

from helpers import QUERYLOG, exited, wait_until
from helpers.kb import kb_file
from helpers.serving import ServeLog

from adapters.grpc.client import channel, wait_serving
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import EventBatch
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub


def test_two_sources_feed_one_chain_and_its_sink(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """Two listed sources (two gRPC listeners here) deliver into the same file sink; SIGTERM exits 0."""
    config = write_config(
        "sources:\n"
        + "  - grpc: {listen: 127.0.0.1:0}\n" * 2
        + "filters:\n  - truncate_url: {}\nsinks:\n  - file: {path: out.tsv}\n"
    )
    proc = subprocess.Popen([QUERYLOG, "serve", "-c", str(config)], stderr=subprocess.PIPE, text=True)
    log = ServeLog(proc)
    try:
        for n, port in enumerate(log.ports("grpc", count=2)):
            chan = channel(f"127.0.0.1:{port}")
            assert wait_serving(chan, 30), f"source {n} did not become SERVING"
            batch = EventBatch()
            batch.events.add(user=str(n), query=f"query from source {n}", url="http://example.com/a/b")
            response = QueryLogFilterStub(chan).Ingest(iter([batch]), timeout=30)
            assert response.delivered == 1
            chan.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        err = log.text()
    assert proc.returncode == 0, err
    header, *lines = (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()
    assert header.startswith("AnonID\tQuery")
    assert sorted(line.split("\t")[1] for line in lines) == ["query from source 0", "query from source 1"]
    assert all("/a/b" not in line for line in lines)


def test_serve_releases_buffered_events_on_its_timer(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """A source without a timer of its own (HTTP): serve's timed release lets max_hold merge two lone categories
    and delivers the release to the sink while no request comes in (flush_interval_seconds)."""
    config = write_config(
        "flush_interval_seconds: 0.2\nsources:\n  - http: {listen: 127.0.0.1:0}\n"
        f"filters:\n  - classify: {{kb_path: {kb_file()}}}\n"
        "  - category_buffer: {k: 2, max_hold: merge, max_hold_seconds: 0.3, time: query}\n"
        "sinks:\n  - file: {path: out.jsonl}\n"
    )
    proc = subprocess.Popen([QUERYLOG, "serve", "-c", str(config)], stderr=subprocess.PIPE, text=True)
    log = ServeLog(proc)
    out = tmp_path / "out.jsonl"
    try:
        (port,) = log.ports("http")
        body = b'{"AnonID": "1", "Query": "weather forecast"}\n{"AnonID": "2", "Query": "football scores"}\n'

        def posted() -> bool:
            request = urllib.request.Request(
                f"http://127.0.0.1:{port}/", data=body, headers={"Content-Type": "application/x-ndjson"}
            )
            try:
                with urllib.request.urlopen(request, timeout=10) as answer:
                    assert answer.status == 200
                    return True
            except OSError:
                return False

        wait_until(posted, what="the http source to take a request", abort=exited(proc), interval=0.1)
        wait_until(
            lambda: out.exists() and out.read_text(encoding="utf-8").strip(),
            what="a release while the sidecar is idle",
            abort=exited(proc),
            interval=0.05,
        )
    finally:
        proc.send_signal(signal.SIGTERM)
        err = log.text()
    assert proc.returncode == 0, err
    first = json.loads(out.read_text(encoding="utf-8").splitlines()[0])
    assert (first["AnonID"], first["Query"]) in {("2", "weather forecast"), ("1", "football scores")}


def test_serve_exports_metrics_with_sink_counters(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """The top-level metrics_listen: /metrics while serve runs, with each sink's counters (written, an outbox's
    pending counts), names and counts only."""
    config = write_config(
        "metrics_listen: 127.0.0.1:0\nsources:\n  - grpc: {listen: 127.0.0.1:0}\nsinks:\n  - file: {path: out.tsv}\n"
    )
    proc = subprocess.Popen([QUERYLOG, "serve", "-c", str(config)], stderr=subprocess.PIPE, text=True)
    log = ServeLog(proc)
    try:
        (grpc_port,) = log.ports("grpc")
        metrics_port = log.metrics_port()
        chan = channel(f"127.0.0.1:{grpc_port}")
        assert wait_serving(chan, 30)
        batch = EventBatch()
        batch.events.add(user="u-metrics-1", query="secret metrics query")
        assert QueryLogFilterStub(chan).Ingest(iter([batch]), timeout=30).delivered == 1
        chan.close()
        body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    finally:
        proc.send_signal(signal.SIGTERM)
        err = log.text()
    assert proc.returncode == 0, err
    assert "querylog_events_in_total 1.0" in body
    assert 'querylog_sink_stat{index="0",name="written",sink="file"} 1.0' in body
    assert "u-metrics-1" not in body and "secret metrics" not in body
