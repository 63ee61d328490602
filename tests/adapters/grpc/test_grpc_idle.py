"""Idle streams cost nothing (issue 11, defect 4): health, Stats and new streams answer with many idle `Filter`
streams open; `querylog send --timeout` bounds the whole RPC, not only connecting."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from click.testing import CliRunner
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers.grpc_sidecar import sidecar, write_config

from adapters.grpc.client import get_stats
from adapters.grpc.codec import EventBatch
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub
from sidecar.cli import main


def _idle(gate: threading.Event) -> Iterator[EventBatch]:
    """A request stream that sends nothing until ``gate`` is set, then ends."""
    gate.wait(60)
    yield from ()


def _answers_within(sc: Any, seconds: float) -> None:
    health = health_pb2_grpc.HealthStub(sc.chan).Check(health_pb2.HealthCheckRequest(service=""), timeout=seconds)
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    assert get_stats(sc.chan, timeout=seconds).events_in >= 0
    batch = EventBatch()
    batch.events.add(user="1", query="weather", seq=1)
    (resp,) = list(QueryLogFilterStub(sc.chan).Filter(iter([batch]), timeout=seconds))
    assert [m.seq for m in resp.events] == [1]


def test_idle_filter_streams_do_not_starve_health_or_stats(tmp_path: Path) -> None:
    """With 3 x server.workers (24) idle Filter streams open, and then 200, the health check, Stats and a new
    Filter round trip each answer within a second (the thread-pool server answered none of them)."""
    config = write_config(tmp_path, "filters: []\n")
    gate = threading.Event()
    calls = []
    try:
        with sidecar(config) as sc:
            workers = sc.source.config.workers
            stub = QueryLogFilterStub(sc.chan)
            for target in (3 * workers, 200):
                while len(calls) < target:
                    calls.append(stub.Filter(_idle(gate)))
                deadline = time.monotonic() + 3  # until the server has taken every stream (or gives up)
                while sc.source.service is not None and sc.source.service.rpcs < target and time.monotonic() < deadline:
                    time.sleep(0.02)
                started = time.monotonic()
                _answers_within(sc, 1.0)
                assert time.monotonic() - started < 3.0
            gate.set()
            for call in calls:
                assert list(call) == []
    finally:
        gate.set()


def _holding_server() -> tuple[grpc.Server, int, threading.Event]:
    """A gRPC server whose Filter reads the requests and then holds the stream open (at most 20 s)."""
    release = threading.Event()

    def hold(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        for _ in requests:
            pass
        release.wait(20)
        yield from ()

    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    handler = grpc.method_handlers_generic_handler(
        "querylog.v1.QueryLogFilter", {"Filter": grpc.stream_stream_rpc_method_handler(hold)}
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port, release


def test_send_timeout_bounds_the_whole_rpc(tmp_path: Path) -> None:
    """`querylog send --timeout 1` against a server that connects and then holds the stream gives up after about a
    second with exit 1 and a message naming the timeout (it used to wait for as long as the server held on)."""
    src = tmp_path / "in.tsv"
    src.write_text("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n1\tweather\t\t\t\n", encoding="utf-8")
    server, port, release = _holding_server()
    try:
        started = time.monotonic()
        result = CliRunner().invoke(
            main, ["send", "--address", f"127.0.0.1:{port}", "--timeout", "1", str(src), "-o", str(tmp_path / "o.tsv")]
        )
        elapsed = time.monotonic() - started
    finally:
        release.set()
        server.stop(0)
    assert result.exit_code == 1, result.output
    assert "did not finish within --timeout 1.0 s" in result.output
    assert elapsed < 5


def _serving(chan: grpc.Channel) -> bool:
    """The health check says SERVING (False once the server is stopping: NOT_SERVING, or refused)."""
    try:
        check = health_pb2_grpc.HealthStub(chan).Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
    except grpc.RpcError:
        return False
    return bool(check.status == health_pb2.HealthCheckResponse.SERVING)


def _until(cond: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def test_graceful_stop_lets_an_inflight_ingest_finish_and_cuts_idle_streams(tmp_path: Path) -> None:
    """stop(grace) while an Ingest is mid-stream and a Filter stream is idle: the Ingest sends its last batch after
    the stop began and is acknowledged with every event delivered; the idle stream is cut when the grace ends; the
    stop returns soon after."""
    config = write_config(tmp_path, "sinks:\n  - file: {path: out.tsv}\n")
    stop_began, gate = threading.Event(), threading.Event()

    def batches() -> Iterator[EventBatch]:
        for i in range(2):
            batch = EventBatch()
            batch.events.add(user=str(i), query=f"query {i}", seq=i + 1)
            yield batch
            stop_began.wait(60)  # the next batch (or the end) comes once the server is stopping

    with sidecar(config, stop=False) as sc:
        stub = QueryLogFilterStub(sc.chan)
        idle = stub.Filter(_idle(gate))
        ingest = stub.Ingest.future(batches(), timeout=60)
        # real conditions, not sleeps: the server worked the first batch (the Ingest is mid-stream), and then
        # the stop began (health no longer SERVING) before the second batch is sent
        _until(lambda: get_stats(sc.chan, timeout=5).events_in >= 1, "the server never took the first batch")
        stopper = threading.Thread(target=sc.source.stop, kwargs={"grace": 3.0})
        started = time.monotonic()
        stopper.start()
        _until(lambda: not _serving(sc.chan), "the stop did not begin")
        stop_began.set()
        resp = ingest.result(timeout=30)
        stopper.join(timeout=15)
        elapsed = time.monotonic() - started
        try:
            list(idle)
            idle_code = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            idle_code = exc.code()  # type: ignore[attr-defined]  # RpcError is also a Call
        gate.set()
        sc.pipeline.close()
    assert (resp.accepted, resp.delivered) == (2, 2)
    assert not stopper.is_alive() and elapsed < 8
    assert idle_code != grpc.StatusCode.OK
    lines = (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert [line.split("\t")[1] for line in lines] == ["query 0", "query 1"]
