"""The ``otlp`` sink against peers that throttle or demand a client certificate: a real gRPC server answering
RESOURCE_EXHAUSTED / UNAVAILABLE with a ``google.rpc.RetryInfo`` (encoded by googleapis-common-protos, not by us)
is retried after its delay, not the outbox's backoff; our own otlp source requiring mutual TLS takes the sink's
batches with its client certificate (gRPC and HTTP) and never without one."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.rpc import code_pb2, error_details_pb2, status_pb2
from helpers import wait_until
from helpers.certs import make_pki
from helpers.otlp import QUICK, otlp_sidecar, request_bytes, send, sending_sidecar, write_config

from adapters.otlp.throttle import DETAILS_KEY, retry_delay, status_details
from sidecar.config import ConfigError

SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"


def retry_info_status(code: int, seconds: int, nanos: int = 0) -> bytes:
    """A ``google.rpc.Status`` with a ``RetryInfo``, as googleapis-common-protos writes it."""
    info = error_details_pb2.RetryInfo()
    info.retry_delay.seconds, info.retry_delay.nanos = seconds, nanos
    status = status_pb2.Status(code=code, message="slow down")
    status.details.add().Pack(info)
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
    assert retry_delay([("other-bin", retry_info_status(8, 3))]) is None
    assert retry_delay([(DETAILS_KEY, b"\x1a\xff")]) is None  # broken framing: no delay, never an error
    assert retry_delay([(DETAILS_KEY, status_pb2.Status(code=14).SerializeToString())]) is None  # no RetryInfo
    assert retry_delay([(DETAILS_KEY, retry_info_status(8, -5))]) is None  # a negative delay is none
    ours = status_pb2.Status.FromString(status_details(code_pb2.RESOURCE_EXHAUSTED, "busy", 2))
    info = error_details_pb2.RetryInfo()
    assert ours.code == code_pb2.RESOURCE_EXHAUSTED and ours.details[0].Unpack(info)
    assert info.retry_delay.seconds == 2


def test_a_grpc_peer_throttling_with_retry_info_is_retried_after_its_delay_not_the_backoff(tmp_path: Path) -> None:
    answers = [
        (grpc.StatusCode.RESOURCE_EXHAUSTED, ((DETAILS_KEY, retry_info_status(code_pb2.RESOURCE_EXHAUSTED, 1)),)),
        (grpc.StatusCode.UNAVAILABLE, ((DETAILS_KEY, retry_info_status(code_pb2.UNAVAILABLE, 0, 500_000_000)),)),
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


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_the_sink_presents_its_client_certificate_to_a_source_requiring_mutual_tls(
    protocol: str, tmp_path: Path
) -> None:
    """Sidecar B's otlp source requires a client certificate of its CA: A's sink delivers with one; a sink without
    one (or with another CA's) delivers nothing, its batch kept in the outbox and retried."""
    pki = make_pki(tmp_path / "pki")
    (tmp_path / "b").mkdir()
    options = {
        "tls_cert_file": str(pki.server.cert),
        "tls_key_file": str(pki.server.key),
        "tls_client_ca_file": str(pki.ca),
    }
    with otlp_sidecar(write_config(tmp_path / "b"), **options) as b:
        if protocol == "grpc":
            endpoint = f"localhost:{b.source.port}"
        else:
            endpoint = f"https://localhost:{b.source.http_port}/v1/logs"
        base = f"endpoint: '{endpoint}', protocol: {protocol}, tls_ca_file: '{pki.ca}', {QUICK}"
        for n, pair in enumerate((None, pki.stranger)):  # refused: no certificate, another CA's
            folder = tmp_path / f"refused-{n}"
            folder.mkdir()
            cert = f", tls_cert_file: '{pair.cert}', tls_key_file: '{pair.key}'" if pair else ""
            no_drain = base.replace("close_drain_seconds: 5", "close_drain_seconds: 0")  # nothing will get through
            with sending_sidecar(folder, f"{{{no_drain}{cert}}}") as refused:
                send(refused, request_bytes())
                (sink,) = refused.sinks
                wait_until(lambda: sink.stats()["failures"] >= 1, what="the refused attempt", timeout=20)  # type: ignore[attr-defined]  # noqa: B023
                assert sink.stats()["sent_batches"] == 0  # type: ignore[attr-defined]
        assert b.source.stats().get("records_accepted", 0) == 0
        client = f", tls_cert_file: '{pki.client.cert}', tls_key_file: '{pki.client.key}'"
        with sending_sidecar(tmp_path, f"{{{base}{client}}}") as a:
            send(a, request_bytes())
            wait_until(lambda: b.source.stats().get("records_accepted", 0) == 6, what="B to take A's batch")
    assert len((tmp_path / "b" / "out.jsonl").read_text(encoding="utf-8").splitlines()) == 6


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_client_certificate_that_cannot_be_read_is_an_error_at_its_key(protocol: str, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    endpoint = "127.0.0.1:9" if protocol == "grpc" else "https://127.0.0.1:9/v1/logs"
    sink = (
        f"{{endpoint: '{endpoint}', protocol: {protocol}, tls_ca_file: '{pki.ca}', tls_cert_file: missing.pem,"
        " tls_key_file: missing.key}"
    )
    located = r"sidecar.yaml:\d+: sinks\[0\]\.otlp\.tls_(cert|key)_file: cannot"
    with pytest.raises(ConfigError, match=located), sending_sidecar(tmp_path, sink):
        pass
