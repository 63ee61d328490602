"""`querylog serve` runs every configured source into one chain and its sinks (issue 12's configuration shape)."""

from __future__ import annotations

import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

from helpers import QUERYLOG

from adapters.grpc.client import channel, wait_serving
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import EventBatch
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_two_sources_feed_one_chain_and_its_sink(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """Two listed sources (two gRPC listeners here) deliver into the same file sink; SIGTERM exits 0."""
    ports = [free_port(), free_port()]
    config = write_config(
        "sources:\n"
        + "".join(f"  - grpc: {{listen: 127.0.0.1:{p}}}\n" for p in ports)
        + "filters:\n  - truncate_url: {}\nsinks:\n  - file: {path: out.tsv}\n"
    )
    proc = subprocess.Popen([QUERYLOG, "serve", "-c", str(config)], stderr=subprocess.PIPE, text=True)
    try:
        for n, port in enumerate(ports):
            chan = channel(f"127.0.0.1:{port}")
            assert wait_serving(chan, 30), f"source {n} did not become SERVING"
            batch = EventBatch()
            batch.events.add(user=str(n), query=f"query from source {n}", url="http://example.com/a/b")
            response = QueryLogFilterStub(chan).Ingest(iter([batch]), timeout=30)
            assert response.delivered == 1
            chan.close()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    header, *lines = (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()
    assert header.startswith("AnonID\tQuery")
    assert sorted(line.split("\t")[1] for line in lines) == ["query from source 0", "query from source 1"]
    assert all("/a/b" not in line for line in lines)


def test_serve_refuses_a_source_that_reads_to_its_end(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    (tmp_path / "in.tsv").write_text("AnonID\tQuery\n1\tq\n", encoding="utf-8")
    config = write_config("sources:\n  - file: {path: in.tsv}\n")
    run = subprocess.run([QUERYLOG, "serve", "-c", str(config)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 2
    assert "sources[0].file reads to its end: use `querylog replay`" in run.stderr
