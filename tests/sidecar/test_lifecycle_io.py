"""The lifecycle of every registered source and sink (the filters': tests/filters/test_lifecycle.py).

Each component is built from a minimal valid config through the loader and the runtime (a real
:class:`~sidecar.pipeline.Pipeline`), started, given a small batch, flushed and closed:

* a source listens on port 0 (``listen: 127.0.0.1:0``), takes one small batch over the wire from its protocol's
  real client (a file source reads a small file), and the batch reaches the runtime's file sink; then it stops,
  the runtime releases (final) and closes, as ``serve`` does. A source whose ``listening()`` is empty (not yet
  reporting its port) only starts and stops.
* a sink gets the batch through ``Runtime.receive`` (start, write, flush) and is closed with the runtime. A
  network sink points at a peer that is down (a bound port that does not listen): it still builds, starts,
  writes into its outbox and closes cleanly.

The leak check runs the lifecycle twice and compares what the second run left behind (the first one may create
process-wide resources once: gRPC's pollers, the structlog config): no thread, file descriptor or socket of it
may outlive it. No captured log event quotes a record value.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import structlog
import yaml
from helpers import find_leaks, wait_until

from sidecar.api import SINKS, SOURCES, RecordBatch
from sidecar.codecs import codec_for
from sidecar.config import load_config
from sidecar.pipeline import Pipeline, build_component
from sidecar.registry import plugins

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
#: The small batch, as AOL-format rows: (user, query, time, rank, url). Values are test values found nowhere else.
ROWS = [
    ("71402", "lifecycle zebra crossing", "2006-03-01 07:17:12", "1", "http://www.example.org"),
    ("71403", "lifecycle ferry timetable", "2006-03-01 07:18:40", "", ""),
]
NEEDLES: tuple[set[str], list[str], list[re.Pattern[str]]] = (
    {v for row in ROWS for v in row[:2]},
    [r[1] for r in ROWS],
    [],
)


def tsv_lines() -> list[str]:
    return ["\t".join(row) for row in ROWS]


def records() -> list[dict[str, str]]:
    """The batch as records keyed by the AOL column names (the schema's default roles)."""
    return [dict(zip(HEADER.split("\t"), row, strict=True)) for row in ROWS]


# --- resources a run may leave behind ----------------------------------------------------------------------


@dataclass(frozen=True)
class Resources:
    """Live threads and open file descriptors (sockets among them) of this process."""

    threads: frozenset[threading.Thread]
    fds: frozenset[tuple[int, str]]

    @classmethod
    def now(cls) -> Resources:
        fds = set()
        for name in os.listdir("/proc/self/fd"):
            try:
                fds.add((int(name), os.readlink(f"/proc/self/fd/{name}")))
            except FileNotFoundError:  # the descriptor listdir itself used
                continue
        return cls(frozenset(t for t in threading.enumerate() if t.is_alive()), frozenset(fds))

    def left_since(self, before: Resources) -> list[str]:
        """What exists now and did not before: thread names, descriptors (``socket:[...]``, paths)."""
        threads = [f"thread {t.name}" for t in self.threads - before.threads if t.is_alive()]
        return threads + [f"fd {fd} -> {target}" for fd, target in sorted(self.fds - before.fds)]


def assert_no_leak(run: Callable[[Path], None], tmp_path: Path) -> None:
    """``run`` twice (in fresh folders); what the second run started must be gone soon after it returned."""
    run(tmp_path / "warm-up")
    before = Resources.now()
    run(tmp_path / "measured")
    leaked: list[str] = []

    def settled() -> bool:
        leaked[:] = Resources.now().left_since(before)
        return not leaked

    try:
        wait_until(settled, what="the run's threads and descriptors to close", timeout=20, interval=0.05)
    except AssertionError:
        raise AssertionError(f"left behind: {leaked}") from None


@pytest.fixture
def down_peer() -> Iterator[int]:
    """A port bound on 127.0.0.1 that does not listen: a peer that is down (connections are refused)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield int(sock.getsockname()[1])


def config_file(folder: Path, body: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "sidecar.yaml"
    path.write_text(yaml.safe_dump({"state_dir": "state", "filters": [], **body}, sort_keys=False), encoding="utf-8")
    return path


# --- sources ------------------------------------------------------------------------------------------------


def _send_grpc(port: int) -> None:
    from adapters.grpc.client import channel
    from adapters.grpc.stubs.querylog.v1.querylog_pb2 import EventBatch
    from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub

    batch = EventBatch()
    for user, query, time, rank, url in ROWS:
        batch.events.add(user=user, query=query, time=time, rank=rank, url=url)
    chan = channel(f"127.0.0.1:{port}")
    try:
        response = QueryLogFilterStub(chan).Ingest(iter([batch]), timeout=30)
    finally:
        chan.close()
    assert response.delivered == len(ROWS)


def _send_vector(port: int) -> None:
    import grpc
    from helpers.vector import log_event, request

    chan = grpc.insecure_channel(f"127.0.0.1:{port}")
    try:
        push: Any = chan.unary_unary("/vector.Vector/PushEvents")
        push(request([log_event(r) for r in records()]), timeout=30)
    finally:
        chan.close()


def _send_forward(port: int) -> None:
    from helpers.forward import RawClient

    client = RawClient(port, timeout=30)
    try:
        client.send(["lifecycle", [[1141197432, r] for r in records()], {"chunk": "bGlmZWN5Y2xl"}])
        assert client.read(timeout=30) == {"ack": "bGlmZWN5Y2xl"}
    finally:
        client.close()


def _send_http(port: int) -> None:
    from helpers.httptest import lines, post

    assert post(port, lines(*records())).status == 200


def _send_otlp(port: int) -> None:
    from opentelemetry._logs import LogRecord
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk._logs.export import LogRecordExportResult
    from opentelemetry.sdk.resources import Resource

    exporter = OTLPLogExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=30)
    try:  # the default roles are bare names: attributes of those keys
        batch = [ReadableLogRecord(LogRecord(attributes=r), Resource({})) for r in records()]
        assert exporter.export(batch) == LogRecordExportResult.SUCCESS
    finally:
        exporter.shutdown()


def _otlp_attributes(line: dict[str, Any]) -> dict[str, Any]:
    """An OTLP/JSON line's one log record's attributes."""
    (record,) = line["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
    return {a["key"]: next(iter(a["value"].values())) for a in record["attributes"]}


#: How to send the small batch to a source over its protocol, with the protocol's real client (by source name).
CLIENTS: dict[str, Callable[[int], None]] = {
    "grpc": _send_grpc,
    "vector": _send_vector,
    "forward": _send_forward,
    "http": _send_http,
    "otlp": _send_otlp,
}


def source_options(name: str, cls: Any, folder: Path) -> dict[str, Any]:
    """A minimal valid config of a source: a small input file for the file source, ``listen`` on port 0 else."""
    if name == "file":
        (folder / "in.tsv").write_text(HEADER + "\n" + "\n".join(tsv_lines()) + "\n", encoding="utf-8")
        return {"path": "in.tsv"}
    if name == "nats":  # a client of a server that is down here: starts and stops (test_nats_lifecycle.py: a real one)
        return {"servers": ["nats://127.0.0.1:9"], "connect_timeout_seconds": 0.2}
    fields = getattr(cls.Config, "__dataclass_fields__", {})
    return {"listen": "127.0.0.1:0"} if "listen" in fields else {}


def run_source(name: str, folder: Path) -> None:
    """Build, start (a server on port 0), one small batch, stop, final release, close; the batch must reach the
    runtime's sink (unless the source reports no address yet)."""
    cls = plugins(SOURCES)[name]
    folder.mkdir(parents=True)
    body = {"sources": [{name: source_options(name, cls, folder)}], "sinks": [{"file": {"path": "out.jsonl"}}]}
    cfg = load_config(config_file(folder, body))
    pipeline = Pipeline(cfg, seed=7)
    try:
        source = build_component(cfg.sources[0], pipeline.ctx, cfg)
        pipeline.start_release_timer()
        source.start(pipeline)  # a finite source (a file) returns at its end, a server at once
        try:
            sent = source.FINITE
            if not source.FINITE and source.listening() and name in CLIENTS:
                (address,) = source.listening()[:1]
                assert address.port != 0, "listening() reports the bound port, not 0"
                CLIENTS[name](address.port)
                sent = True
        finally:
            source.stop(grace=1.0)
        pipeline.release(final=True)
    finally:
        pipeline.close()
    if sent:
        out = [json.loads(line) for line in (folder / "out.jsonl").read_text(encoding="utf-8").splitlines()]
        if name == "otlp":  # a file sink writes OTLP records as OTLP/JSON
            out = [_otlp_attributes(line) for line in out]
        assert sorted((r["AnonID"], r["Query"]) for r in out) == sorted((row[0], row[1]) for row in ROWS)


@pytest.mark.parametrize("name", sorted(plugins(SOURCES)))
def test_source_lifecycle_start_receive_stop_close_leaves_nothing_behind(
    name: str, tmp_path: Path, debug_structlog: None
) -> None:
    """Every registered source: build -> start -> a small batch over the wire -> stop -> release -> close, twice;
    the second run leaves no thread, descriptor or socket behind and no log event quotes a value."""
    with structlog.testing.capture_logs() as logs:
        assert_no_leak(lambda folder: run_source(name, folder), tmp_path)
    assert find_leaks(logs, NEEDLES) == []


# --- sinks --------------------------------------------------------------------------------------------------


def sink_options(name: str, port: int) -> dict[str, Any]:
    """A minimal valid config of a sink; a network sink points at ``port`` (down) and does not wait on close."""
    peer = f"127.0.0.1:{port}"
    quick = {"close_drain_seconds": 0}
    options: dict[str, dict[str, Any]] = {
        "file": {"path": "out.tsv"},
        "stdout": {},
        "forward": {"address": peer, "connect_timeout_seconds": 1, **quick},
        "vector": {"address": peer, "timeout_seconds": 1, **quick},
        "http": {"url": f"http://{peer}/ingest", "timeout_seconds": 1, **quick},
        "otlp": {"endpoint": f"http://{peer}/v1/logs", "timeout_seconds": 1, **quick},
        "clickhouse": {"table": "events", "url": f"http://{peer}", "timeout_seconds": 1, **quick},
        "nats": {"servers": [f"nats://{peer}"], "connect_timeout_seconds": 0.5, "timeout_seconds": 1, **quick},
        # credentials: any variable that is set (the peer is down; boto3's default chain would look for a role)
        "s3": {"bucket": "lifecycle", "endpoint_url": f"http://{peer}", "timeout_seconds": 1, **quick}
        | {"access_key_id_env": "PATH", "secret_access_key_env": "PATH"},
    }
    if name not in options:
        pytest.fail(f"sink {name} is registered but has no minimal config here: add one to sink_options")
    return options[name]


def run_sink(name: str, port: int, folder: Path) -> None:
    """Build through the runtime, receive one small TSV batch (start, write, flush), final release, close."""
    cfg = load_config(config_file(folder, {"sinks": [{name: sink_options(name, port)}]}))
    pipeline = Pipeline(cfg, seed=7)
    try:
        (sink,) = pipeline.sinks
        codec = codec_for(replace(cfg.sidecar.schema, format="tsv"), None)
        codec.accept_header(HEADER)
        receipt = pipeline.receive(RecordBatch(tsv_lines(), codec, "lifecycle", last_eol="\n"))
        assert (receipt.accepted, receipt.dead_lettered, len(receipt.delivered)) == (len(ROWS), 0, len(ROWS))
        assert sink.written == len(ROWS)
        stats_of = getattr(sink, "stats", None)
        stats = stats_of() if callable(stats_of) else {}
        if "pending_events" in stats:  # an outbox: the batch is in it (its peer is down), durable
            assert stats["pending_events"] + stats.get("sent_events", 0) == len(ROWS), stats
        pipeline.release(final=True)
    finally:
        pipeline.close()
    if name == "file":
        assert (folder / "out.tsv").read_text(encoding="utf-8") == HEADER + "\n" + "\n".join(tsv_lines()) + "\n"


@pytest.mark.parametrize("name", sorted(plugins(SINKS)))
def test_sink_lifecycle_start_write_flush_close_leaves_nothing_behind(
    name: str, tmp_path: Path, down_peer: int, capfd: pytest.CaptureFixture[str], debug_structlog: None
) -> None:
    """Every registered sink: build -> start -> write -> flush (a network sink: into its outbox, the peer down)
    -> close, twice; the second run leaves no thread, descriptor or socket behind and no log event quotes a
    value."""
    with structlog.testing.capture_logs() as logs:
        assert_no_leak(lambda folder: run_sink(name, down_peer, folder), tmp_path)
    assert find_leaks(logs, NEEDLES) == []
    if name == "stdout":
        assert capfd.readouterr().out.count("lifecycle zebra crossing") == 2  # once per run
