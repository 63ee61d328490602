"""The ``http`` source on the shared host (aiohttp's server on one event loop): idle connections cost no thread,
mutual TLS, msgpack bodies, ``Expect: 100-continue``, a stalled body, errors of the parser answered as JSON and
logged without a value, the bound address, and bad records decoded once."""

from __future__ import annotations

import http.client
import json
import logging
import resource
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
import structlog
from helpers.certs import make_pki
from helpers.httptest import Served, lines, post

from sidecar.api import Listen

R1 = {"AnonID": "142", "Query": "rentdirect.com", "QueryTime": "2006-03-01 07:17:12", "ItemRank": "", "ClickURL": ""}
R2 = {"AnonID": "217", "Query": "lottery", "QueryTime": "2006-03-01 11:58:51", "ItemRank": "1", "ClickURL": "x"}
IDLE = 1100


@pytest.fixture
def open_files() -> Iterator[None]:
    """Room for the idle connections' file descriptors (both ends live in this process)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = 4 * IDLE
    if soft >= want:
        yield
        return
    if hard != resource.RLIM_INFINITY and hard < want:
        pytest.skip(f"the open-file limit ({hard}) is too low for {IDLE} connections")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _raw(port: int, request: bytes, timeout: float = 10) -> bytes:
    """Send ``request`` on a fresh connection; everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        return s.makefile("rb").read()


class TestIdleConnections:
    def test_many_idle_connections_cost_no_thread_and_lock_no_one_out(self, serve: Any, open_files: None) -> None:
        """1,100 idle connections (more than the 1,024 that locked every client out of the thread-per-connection
        server) stay open with default options, the process gains no thread for them, and a normal POST is
        answered 200. (Bounded by the client's socket timeout: the POST is answered or raises.)"""
        served: Served = serve()
        threads = threading.active_count()
        idle: list[socket.socket] = []
        try:
            for _ in range(IDLE):
                idle.append(socket.create_connection(("127.0.0.1", served.port), timeout=30))
            answer = post(served.port, lines(R1))
            assert answer.status == 200 and answer.body["accepted"] == 1
            # connections are accepted in order: the POST's was accepted after every idle one
            assert served.source.stats()["open_connections"] >= IDLE
            assert threading.active_count() <= threads + 4  # at most the host's workers, never one per connection
        finally:
            for s in idle:
                s.close()
        assert served.out.read_bytes() == lines(R1)


class TestMutualTls:
    def test_a_client_needs_a_certificate_from_the_client_ca(self, serve: Any, tmp_path: Path) -> None:
        """With tls_client_ca_file a client with a certificate from that CA is served; one without a certificate,
        or with one from another CA, does not get through."""
        pki = make_pki(tmp_path)
        served: Served = serve(
            tls_cert_file=str(pki.server.cert), tls_key_file=str(pki.server.key), tls_client_ca_file=str(pki.ca)
        )

        def client(pair: Any) -> ssl.SSLContext:
            context = ssl.create_default_context(cafile=str(pki.ca))
            if pair is not None:
                context.load_cert_chain(pair.cert, pair.key)
            return context

        assert post(served.port, lines(R1), tls=client(pki.client)).status == 200
        for pair in (None, pki.stranger):
            with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
                post(served.port, lines(R2), tls=client(pair))
        assert served.out.read_bytes() == lines(R1)


class TestBodies:
    def test_msgpack_body(self, serve: Any) -> None:
        """`application/msgpack`: a stream of maps, Fluent Bit's [time, map] pairs too; a non-map is counted."""
        served: Served = serve()
        body = msgpack.packb(R1) + msgpack.packb([1141251120, R2]) + msgpack.packb("not a map")
        answer = post(served.port, body, headers={"Content-Type": "application/msgpack"})
        assert answer.status == 200
        assert answer.body["accepted"] == 2 and answer.body["reasons"] == {"msgpack_not_map": 1}
        assert [json.loads(line) for line in served.out.read_text().splitlines()] == [R1, R2]

    def test_bad_records_are_decoded_once(self, serve: Any) -> None:
        """The reasons of the records the codec refused come from the runtime's receipt: the body is decoded
        once (it was decoded a second time to learn them)."""
        served: Served = serve()
        codec = served.source.codec
        calls: list[int] = []
        decode_many = codec.decode_many

        def counting(*args: Any, **kwargs: Any) -> Any:
            calls.append(1)
            return decode_many(*args, **kwargs)

        codec.decode_many = counting
        answer = post(served.port, lines(R1) + b"{not json\n" + b'{"Query":"no user"}\n')
        assert answer.status == 200 and answer.body["reasons"] == {"invalid_json": 1, "missing_user": 1}
        assert len(calls) == 1

    def test_expect_100_continue(self, serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """`Expect: 100-continue` gets `100 Continue` before the body is sent; with a wrong token the refusal
        comes instead, before any body."""
        monkeypatch.setenv("QUERYLOG_TEST_HTTP_TOKEN", "t0k")
        served: Served = serve(auth_token_env="QUERYLOG_TEST_HTTP_TOKEN")
        body = lines(R1)
        head = (
            f"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\nContent-Length: {len(body)}\r\n"
            "Expect: 100-continue\r\nConnection: close\r\n"
        ).encode()
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as s:
            s.sendall(head + b"Authorization: Bearer t0k\r\n\r\n")
            stream = s.makefile("rb")
            assert stream.readline() == b"HTTP/1.1 100 Continue\r\n" and stream.readline() == b"\r\n"
            s.sendall(body)
            assert stream.readline().startswith(b"HTTP/1.1 200 ")
        refused = _raw(served.port, head + b"Authorization: Bearer nope\r\n\r\n")
        assert refused.startswith(b"HTTP/1.1 401 ") and b"100 Continue" not in refused
        assert served.out.read_bytes() == body

    def test_a_body_that_stops_arriving_is_answered_408(self, serve: Any) -> None:
        """Half a body, then silence for idle_timeout_seconds: 408 and the connection is closed; nothing taken."""
        served: Served = serve(idle_timeout_seconds=0.3)
        got = _raw(served.port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n" + b'{"AnonID":"1"')
        assert got.startswith(b"HTTP/1.1 408 ") and got.endswith(b'{"error": "body_timeout"}\n')
        assert served.source.stats()["body_timeout"] == 1


class TestServer:
    def test_listening_reports_the_bound_port(self, serve: Any) -> None:
        served: Served = serve()
        assert served.source.listening() == [Listen("127.0.0.1", served.port)] and served.port > 0

    def test_a_bad_request_is_answered_as_json_and_logged_without_a_value(
        self, serve: Any, caplog: pytest.LogCaptureFixture
    ) -> None:
        """Garbage for a request line is answered 400 JSON (no echo), counted; neither structlog nor the HTTP
        library's own loggers see the bytes."""
        served: Served = serve()
        with structlog.testing.capture_logs() as logs, caplog.at_level(logging.DEBUG):
            got = _raw(served.port, b"SECRET-QUERY-7 /\x01 HTTP/1.1\r\n\r\n")
            again = _raw(served.port, b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: nope-SECRET-8\r\n\r\n")
            served.source.stop(grace=1)
        for answer in (got, again):
            assert answer.startswith((b"HTTP/1.0 400 ", b"HTTP/1.1 400 ")), answer[:20]
            assert answer.endswith(b'{"error": "bad_request"}\n')
            assert b"SECRET" not in answer
        assert served.source.stats()["bad_request"] == 2
        text = repr(logs) + caplog.text
        assert "SECRET" not in text
