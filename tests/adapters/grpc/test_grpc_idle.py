"""Idle streams cost nothing (issue 11, defect 4): health, Stats and new streams answer with many idle `Filter`
streams open; `querylog send --timeout` bounds the whole RPC, not only connecting."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
from click.testing import CliRunner
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers import wait_until
from helpers.grpc_sidecar import sidecar, write_config

from adapters.grpc.client import get_stats
from adapters.grpc.codec import EventBatch
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub
from sidecar.cli import main


def _idle(gate: threading.Event) -> Iterator[EventBatch]:
    """A request stream that sends nothing until ``gate`` is set, then ends."""
    gate.wait(60)
    yield from ()


#: Seconds each call may take: generous (a loaded machine), since a starved server never answers while the idle
#: streams are open (they stay open for up to 60 s, longer than this deadline).
ANSWER_DEADLINE = 30.0


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
    Filter round trip each answer before a generous deadline, while every idle stream is still open (the
    thread-pool server answered none of them: its workers were all taken by the idle streams)."""
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
                service = sc.source.service
                assert service is not None
                wait_until(lambda s=service, n=target: s.rpcs >= n, what=f"the server to take {target} streams")
                _answers_within(sc, ANSWER_DEADLINE)
            gate.set()
            for call in calls:
                assert list(call) == []
    finally:
        gate.set()


def _holding_server() -> tuple[grpc.Server, int, threading.Event, threading.Event]:
    """A gRPC server whose Filter reads the requests and then holds the stream open until ``release`` is set (at
    most 60 s); ``held`` is set while a stream is being held."""
    release, held = threading.Event(), threading.Event()

    def hold(requests: Iterator[bytes], context: grpc.ServicerContext) -> Iterator[bytes]:
        for _ in requests:
            pass
        held.set()
        release.wait(60)
        held.clear()
        yield from ()

    server = grpc.server(ThreadPoolExecutor(max_workers=4))
    handler = grpc.method_handlers_generic_handler(
        "querylog.v1.QueryLogFilter", {"Filter": grpc.stream_stream_rpc_method_handler(hold)}
    )
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port, release, held


def test_send_timeout_bounds_the_whole_rpc(tmp_path: Path) -> None:
    """`querylog send --timeout 1` against a server that connects and then holds the stream gives up while the
    server still holds it, with exit 1 and a message naming the timeout (it used to wait for as long as the
    server held on)."""
    src = tmp_path / "in.tsv"
    src.write_text("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n1\tweather\t\t\t\n", encoding="utf-8")
    server, port, release, held = _holding_server()
    try:
        result = CliRunner().invoke(
            main, ["send", "--address", f"127.0.0.1:{port}", "--timeout", "1", str(src), "-o", str(tmp_path / "o.tsv")]
        )
        still_held = held.is_set()  # the server had not let go (for up to 60 s): the timeout ended the RPC
    finally:
        release.set()
        server.stop(0)
    assert result.exit_code == 1, result.output
    assert "did not finish within --timeout 1.0 s" in result.output
    assert still_held


def _serving(chan: grpc.Channel) -> bool:
    """The health check says SERVING (False once the server is stopping: NOT_SERVING, or refused)."""
    try:
        check = health_pb2_grpc.HealthStub(chan).Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
    except grpc.RpcError:
        return False
    return bool(check.status == health_pb2.HealthCheckResponse.SERVING)


def test_graceful_stop_lets_an_inflight_ingest_finish_and_cuts_idle_streams(tmp_path: Path) -> None:
    """stop(grace) while an Ingest is mid-stream and a Filter stream is idle: the Ingest sends its last batch after
    the stop began and is acknowledged with every event delivered; the idle stream is cut when the grace ends; the
    stop returns while the idle stream's client still holds it open (the stop did not wait for it)."""
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
        wait_until(lambda: get_stats(sc.chan, timeout=5).events_in >= 1, what="the server to take the first batch")
        stopper = threading.Thread(target=sc.source.stop, kwargs={"grace": 3.0})
        stopper.start()
        wait_until(lambda: not _serving(sc.chan), what="the stop to begin")
        stop_began.set()
        resp = ingest.result(timeout=30)
        stopper.join(timeout=30)  # generous, and shorter than the 60 s the idle stream's client holds it open
        stopped_first = not stopper.is_alive()
        try:
            list(idle)
            idle_code = grpc.StatusCode.OK
        except grpc.RpcError as exc:
            idle_code = exc.code()  # RpcError is also a Call
        gate.set()
        sc.pipeline.close()
    assert (resp.accepted, resp.delivered) == (2, 2)
    assert stopped_first
    assert idle_code != grpc.StatusCode.OK
    lines = (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert [line.split("\t")[1] for line in lines] == ["query 0", "query 1"]
