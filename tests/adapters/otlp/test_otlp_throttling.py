"""OTLP/gRPC throttling with ``google.rpc.RetryInfo``, both ways: the sink against a real gRPC server answering
RESOURCE_EXHAUSTED / UNAVAILABLE with a RetryInfo (written by googleapis-common-protos, not by us, in either
trailer) waits its delay, not the outbox's backoff; the OpenTelemetry SDK's gRPC exporter against our source with
a full outbox waits the RetryInfo the source sends."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.rpc import code_pb2, error_details_pb2, status_pb2
from helpers import wait_until
from helpers.otlp import QUICK, otlp_sidecar, request_bytes, send, sending_sidecar, write_config

from adapters.otlp.throttle import DETAILS_KEY, RETRY_INFO_KEY, retry_delay, throttle_trailers

SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"


def retry_info(seconds: int, nanos: int = 0) -> error_details_pb2.RetryInfo:
    info = error_details_pb2.RetryInfo()
    info.retry_delay.seconds, info.retry_delay.nanos = seconds, nanos
    return info


def retry_info_status(code: int, seconds: int, nanos: int = 0) -> bytes:
    """A ``google.rpc.Status`` with a ``RetryInfo``, as googleapis-common-protos writes it."""
    status = status_pb2.Status(code=code, message="slow down")
    status.details.add().Pack(retry_info(seconds, nanos))
    return status.SerializeToString()


@dataclass
class GrpcPeer:
    """A gRPC LogsService whose answers are given in turn: (status code, trailing metadata), then OK."""

    answers: list[tuple[grpc.StatusCode, tuple[tuple[str, bytes], ...]]]
    calls: list[tuple[float, bytes]] = field(default_factory=list)
    port: int = 0


@contextmanager
def grpc_peer(answers: list[tuple[grpc.StatusCode, tuple[tuple[str, bytes], ...]]]) -> Iterator[GrpcPeer]:
    state = GrpcPeer(list(answers))

    def export(request: bytes, context: grpc.ServicerContext) -> bytes:
        state.calls.append((time.monotonic(), request))
        if state.answers:
            code, trailers = state.answers.pop(0)
            context.set_trailing_metadata(trailers)
            context.abort(code, "throttled")
        return b""  # an empty ExportLogsServiceResponse: all taken

    server = grpc.server(ThreadPoolExecutor(2))
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {"Export": grpc.unary_unary_rpc_method_handler(export)}
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE, handlers),))
    state.port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield state
    finally:
        server.stop(0)


def test_retry_info_is_read_as_googleapis_writes_it_and_ours_reads_back() -> None:
    assert retry_delay([(DETAILS_KEY, retry_info_status(code_pb2.RESOURCE_EXHAUSTED, 3, 250_000_000))]) == 3.25
    assert retry_delay([(RETRY_INFO_KEY, retry_info(2, 500_000_000).SerializeToString())]) == 2.5
    assert retry_delay([("other-bin", retry_info_status(8, 3))]) is None
    assert retry_delay([(DETAILS_KEY, b"\x1a\xff")]) is None  # broken framing: no delay, never an error
    assert retry_delay([(DETAILS_KEY, status_pb2.Status(code=14).SerializeToString())]) is None  # no RetryInfo
    assert retry_delay([(DETAILS_KEY, retry_info_status(8, -5))]) is None  # a negative delay is none
    (details_key, details), (info_key, info_bytes) = throttle_trailers(code_pb2.RESOURCE_EXHAUSTED, "busy", 2)
    assert (details_key, info_key) == (DETAILS_KEY, RETRY_INFO_KEY)
    ours = status_pb2.Status.FromString(details)
    info = error_details_pb2.RetryInfo()
    assert ours.code == code_pb2.RESOURCE_EXHAUSTED and ours.message == "busy" and ours.details[0].Unpack(info)
    assert info.retry_delay.seconds == 2 and error_details_pb2.RetryInfo.FromString(info_bytes) == info


def test_a_grpc_peer_throttling_with_retry_info_is_retried_after_its_delay_not_the_backoff(tmp_path: Path) -> None:
    answers = [
        (grpc.StatusCode.RESOURCE_EXHAUSTED, ((DETAILS_KEY, retry_info_status(code_pb2.RESOURCE_EXHAUSTED, 1)),)),
        (grpc.StatusCode.UNAVAILABLE, ((RETRY_INFO_KEY, retry_info(0, 500_000_000).SerializeToString()),)),
    ]
    with grpc_peer(answers) as p:
        sink = f"{{endpoint: '127.0.0.1:{p.port}', protocol: grpc, {QUICK}}}"  # a backoff of 30 s
        with sending_sidecar(tmp_path, sink) as a:
            send(a, request_bytes())
            (otlp,) = a.sinks
            wait_until(lambda: otlp.stats()["sent_batches"] == 1, what="the third attempt's OK", timeout=20)  # type: ignore[attr-defined]
            stats = otlp.stats()  # type: ignore[attr-defined]
    (t1, b1), (t2, b2), (t3, b3) = p.calls
    assert b1 == b2 == b3 == request_bytes()
    assert 0.95 <= t2 - t1 < 10 and 0.45 <= t3 - t2 < 10  # the peer's delays, never the 30 s backoff
    assert stats["throttled"] == 2 and stats["sent_batches"] == 1 and stats["retries"] == 0


def test_a_grpc_peer_unavailable_without_retry_info_waits_for_the_backoff(tmp_path: Path) -> None:
    quick = QUICK.replace("retry_initial_seconds: 30", "retry_initial_seconds: 0.5")
    with grpc_peer([(grpc.StatusCode.UNAVAILABLE, ())]) as p:
        sink = f"{{endpoint: '127.0.0.1:{p.port}', protocol: grpc, {quick}}}"
        with sending_sidecar(tmp_path, sink) as a:
            send(a, request_bytes())
            (otlp,) = a.sinks
            wait_until(lambda: otlp.stats()["sent_batches"] == 1, what="the retry's OK", timeout=20)  # type: ignore[attr-defined]
            stats = otlp.stats()  # type: ignore[attr-defined]
    assert len(p.calls) == 2 and stats.get("throttled", 0) == 0 and stats["retries"] >= 1


def test_the_sdk_exporter_waits_the_retry_info_of_a_full_outbox(tmp_path: Path) -> None:
    """Our source answers a full outbox with RESOURCE_EXHAUSTED and a RetryInfo of retry_after_seconds: the SDK's
    gRPC exporter (timeout 10 s) comes back after 1 s each time, six attempts (its most) in about 5 s. With its own
    backoff (1, 2, 4 s) it would make four in about 7 s."""
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs.export import LogRecordExportResult

    from sidecar.tools.bench.otlp import sdk_batches

    sinks = (
        "  - file: {path: out.jsonl}\n"
        "  - otlp: {endpoint: 'http://127.0.0.1:9/v1/logs', outbox_max_batches: 1, close_drain_seconds: 0,"
        " retry_initial_seconds: 30, retry_max_seconds: 30, timeout_seconds: 1}\n"
    )
    with otlp_sidecar(write_config(tmp_path, sinks=sinks), retry_after_seconds=1) as sc:
        with grpc.insecure_channel(sc.grpc_endpoint) as chan:  # a batch that fills the otlp sink's outbox
            chan.unary_unary(f"/{SERVICE}/Export")(request_bytes(), timeout=10)
        exporter = OTLPLogExporter(endpoint=sc.grpc_endpoint, insecure=True, timeout=10)
        (batch,) = sdk_batches([{"user_id": "u1"}], 1)  # refused before it is read
        try:
            started = time.monotonic()
            assert exporter.export(batch) == LogRecordExportResult.FAILURE
            elapsed = time.monotonic() - started
        finally:
            exporter.shutdown()
        refused = sc.source.stats()["requests_refused_busy"]
    assert refused == 6 and 4.5 <= elapsed < 9
