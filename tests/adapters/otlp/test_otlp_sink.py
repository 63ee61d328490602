"""The ``otlp`` sink: into a second otlp source (our own, gRPC and HTTP) with every record byte for byte; a
throttling peer (429 + Retry-After honoured instead of the outbox's backoff); a peer that refuses a batch for good
(dead-lettered); a peer's partial_success counted."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from helpers import wait_until
from helpers.otlp import QUICK, otlp_sidecar, request_bytes, send, sending_sidecar, write_config
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

from adapters.otlp.wire import split_request


@dataclass
class Peer:
    """An OTLP/HTTP receiver that records each request's body and answers the statuses it is given in turn."""

    answers: list[tuple[int, dict[str, str], bytes]] = field(default_factory=list)
    bodies: list[tuple[float, bytes]] = field(default_factory=list)
    port: int = 0


@contextmanager
def peer(answers: list[tuple[int, dict[str, str], bytes]]) -> Iterator[Peer]:
    state = Peer(list(answers))

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.bodies.append((time.monotonic(), body))
            status, headers, reply = state.answers.pop(0) if state.answers else (200, {}, b"")
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_records_reach_a_second_otlp_source_byte_for_byte(protocol: str, tmp_path: Path) -> None:
    """sidecar A's otlp sink -> sidecar B's otlp source: B decodes the very LogRecord bytes A received, with their
    resources and scopes."""
    data = request_bytes()
    received: list[bytes] = []
    (tmp_path / "b").mkdir()
    with otlp_sidecar(write_config(tmp_path / "b")) as b:
        original = b.source.server
        assert original is not None
        export = original.exporter.export

        def spy(payload: bytes) -> object:
            received.append(payload)
            return export(payload)

        original.exporter.export = spy  # type: ignore[method-assign]
        endpoint = b.http_endpoint if protocol == "http" else b.grpc_endpoint
        with sending_sidecar(tmp_path, f"{{endpoint: '{endpoint}', protocol: {protocol}, {QUICK}}}") as a:
            send(a, data)
            wait_until(lambda: sum(len(split_request(r, 1000)) for r in received) == 6, what="B to receive A's batch")
    got = [p for r in received for p in split_request(r, 1000)]
    assert got == split_request(data, 1000)  # every record, resource and scope part as A received it


def test_a_throttling_peer_is_retried_after_its_retry_after_not_the_backoff(tmp_path: Path) -> None:
    with peer([(429, {"Retry-After": "1"}, b""), (503, {"Retry-After": "1"}, b"")]) as p:
        sink = f"{{endpoint: 'http://127.0.0.1:{p.port}/v1/logs', {QUICK}}}"
        with sending_sidecar(tmp_path, sink) as a:
            send(a, request_bytes())
            (otlp,) = a.sinks
            wait_until(lambda: otlp.stats()["sent_batches"] == 1, what="the third attempt's 200", timeout=20)  # type: ignore[attr-defined]
            stats = otlp.stats()  # type: ignore[attr-defined]
    (t1, b1), (t2, b2), (t3, b3) = p.bodies[:3]
    assert b1 == b2 == b3 == request_bytes()
    assert 0.95 <= t2 - t1 < 10 and 0.95 <= t3 - t2 < 10  # the peer's second, never the 30 s backoff
    assert stats["throttled"] == 2 and stats["sent_batches"] == 1


def test_a_batch_refused_for_good_is_dead_lettered_and_partial_success_counted(tmp_path: Path) -> None:
    rejected = ExportLogsServiceResponse()
    rejected.partial_success.rejected_log_records = 2
    rejected.partial_success.error_message = "two bad"
    with peer([(400, {}, b"bad request"), (200, {}, rejected.SerializeToString())]) as p:
        sink = f"{{endpoint: 'http://127.0.0.1:{p.port}/v1/logs', {QUICK}}}"
        with sending_sidecar(tmp_path, sink) as a:
            send(a, request_bytes())
            send(a, request_bytes(2))
            wait_until(lambda: len(p.bodies) >= 2, what="both batches")
            (otlp,) = a.sinks
            wait_until(lambda: otlp.stats().get("records_rejected_by_peer") == 2, what="the count")  # type: ignore[attr-defined]
            stats = otlp.stats()  # type: ignore[attr-defined]
    assert stats["batches_refused"] == 1 and stats["sent_batches"] == 2
    dead = (tmp_path / "a" / "state" / "dead-letter.jsonl").read_text(encoding="utf-8").splitlines()
    assert [json.loads(line)["reason"] for line in dead] == ["otlp_rejected"]


def test_grpc_with_tls_and_a_bearer_token_into_a_second_otlp_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from helpers.certs import make_pki

    pki = make_pki(tmp_path / "pki")
    monkeypatch.setenv("OTLP_SINK_TOKEN", "t0ken-for-b")
    (tmp_path / "b").mkdir()
    options = {"tls_cert_file": str(pki.server.cert), "tls_key_file": str(pki.server.key)}
    with otlp_sidecar(write_config(tmp_path / "b"), auth_token_env="OTLP_SINK_TOKEN", **options) as b:
        sink = (
            f"{{endpoint: '{b.grpc_endpoint}', protocol: grpc, tls_ca_file: '{pki.ca}',"
            f" bearer_token_env: OTLP_SINK_TOKEN, {QUICK}}}"
        )
        with sending_sidecar(tmp_path, sink) as a:
            send(a, request_bytes())
            wait_until(lambda: b.source.stats().get("records_accepted", 0) == 6, what="B to take A's batch")
    assert len((tmp_path / "b" / "out.jsonl").read_text(encoding="utf-8").splitlines()) == 6
