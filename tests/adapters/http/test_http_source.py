"""The ``http`` source, driven by a real HTTP client (``http.client``) over loopback: what each answer means to a
sender (200 once durable, 400, 401, 413, 503), bodies (gzip, chunked, JSON arrays, bad lines), TLS, idle
connections, and that nothing it logs carries a record value or the token."""

from __future__ import annotations

import gzip
import http.client
import socket
import ssl
import threading
from pathlib import Path
from typing import Any

import pytest
import structlog
from helpers.certs import make_pki
from helpers.configs import report_invalid_lines
from helpers.httptest import Served, lines, post
from helpers.waiting import wait_until

from adapters.http.source import decompress, split_records
from sidecar.api import Event, Sink
from sidecar.config import load_config

TESTDATA = Path(__file__).parent / "testdata"
AOL = [
    {"AnonID": "142", "Query": "rentdirect.com", "QueryTime": "2006-03-01 07:17:12", "ItemRank": "", "ClickURL": ""},
    {"AnonID": "217", "Query": "lottery", "QueryTime": "2006-03-01 11:58:51", "ItemRank": "1", "ClickURL": "x"},
    {"AnonID": "993", "Query": "", "QueryTime": "2006-03-02 14:20:33", "ItemRank": "", "ClickURL": ""},
]


class TestAnswers:
    def test_body_is_acknowledged_after_delivery_byte_for_byte(self, serve: Any) -> None:
        """A 200 carries the counts, and by then the file sink holds every line of the body, unchanged."""
        served: Served = serve()
        body = lines(*AOL).replace(b'"Query":"lottery"', b'"Query": "lottery"')  # its own spacing, kept
        answer = post(served.port, body)
        assert answer.status == 200
        assert answer.body == {"accepted": 3, "dead_lettered": 0, "delivered": 3, "held": 0, "dropped": 0}
        assert served.out.read_bytes() == body

    def test_gzip_body(self, serve: Any) -> None:
        """`Content-Encoding: gzip` (also two gzip members one after the other) is decompressed."""
        served: Served = serve()
        body = gzip.compress(lines(AOL[0])) + gzip.compress(lines(AOL[1]))
        answer = post(served.port, body, headers={"Content-Encoding": "gzip"})
        assert (answer.status, answer.body["accepted"]) == (200, 2)
        assert served.out.read_bytes() == lines(AOL[0], AOL[1])

    def test_chunked_body_and_keep_alive(self, serve: Any) -> None:
        """A chunked body is read; several requests go over one kept-alive connection."""
        served: Served = serve()
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        for record in AOL:
            conn.request("POST", "/", body=iter([lines(record)]), headers={"Content-Type": "application/x-ndjson"})
            resp = conn.getresponse()
            assert resp.status == 200 and resp.getheader("Connection") != "close"
            resp.read()
        conn.close()
        assert served.out.read_bytes() == lines(*AOL)

    def test_json_array_body(self, serve: Any) -> None:
        """An `application/json` body that is one array (Fluent Bit `format json`) is taken as its objects."""
        served: Served = serve()
        answer = post(
            served.port,
            b'[{"AnonID":"1","Query":"a"}, 7, {"AnonID":"x","Query":"\\ud800"}, {"AnonID":"2","Query":"b"}]',
            headers={"Content-Type": "application/json"},
        )
        assert answer.status == 200
        assert answer.body["accepted"] == 2
        assert answer.body["reasons"] == {"json_not_object": 1, "lone_surrogate": 1}
        assert served.out.read_bytes() == b'{"AnonID":"1","Query":"a"}\n{"AnonID":"2","Query":"b"}\n'

    def test_some_bad_lines_answer_200_and_are_dead_lettered(self, serve: Any) -> None:
        """Good lines of a body with bad ones are taken (200, counted by reason); the bad lines are in the
        dead-letter file with their position in the body; blank lines are skipped."""
        served: Served = serve()
        body = lines(AOL[0]) + b"{not json\n\n" + b'{"Query":"no user"}\n' + b"\xff\xfe\n" + lines(AOL[1])
        answer = post(served.port, body)
        assert answer.status == 200
        assert answer.body["accepted"] == 2 and answer.body["dead_lettered"] == 3
        assert answer.body["reasons"] == {"invalid_json": 1, "invalid_utf8": 1, "missing_user": 1}
        assert served.out.read_bytes() == lines(AOL[0], AOL[1])
        dead = {(d["reason"], d["line"]) for d in served.dead_letters()}
        assert dead == {("invalid_json", 2), ("missing_user", 4), ("invalid_utf8", 5)}

    def test_only_bad_lines_answer_400(self, serve: Any) -> None:
        """Nothing taken: 400 (the sender drops it; retrying could not help), counted, dead-lettered."""
        served: Served = serve()
        answer = post(served.port, b"{nope\n[1,2]\n")
        assert answer.status == 400
        assert answer.body["accepted"] == 0 and answer.body["reasons"] == {"invalid_json": 1, "json_not_object": 1}
        assert len(served.dead_letters()) == 2
        assert served.source.stats()["no_line_taken"] == 1

    def test_empty_body_is_200(self, serve: Any) -> None:
        served: Served = serve()
        answer = post(served.port, b"")
        assert answer.status == 200 and answer.body["accepted"] == 0

    def test_oversized_body_is_413(self, serve: Any) -> None:
        """Over max_body_bytes as sent (refused before it is read) or once decompressed (a gzip bomb)."""
        served: Served = serve(max_body_bytes=4096)
        assert post(served.port, b"x" * 5000).status == 413
        bomb = gzip.compress(b" " * 100_000)
        assert len(bomb) < 4096
        assert post(served.port, bomb, headers={"Content-Encoding": "gzip"}).status == 413
        assert served.source.stats()["body_too_large"] == 2
        assert not served.out.exists() or served.out.read_bytes() == b""

    def test_oversized_line_is_dead_lettered(self, serve: Any) -> None:
        """A line over limits.max_record_bytes is dead-lettered (without its text); the others are taken."""
        served: Served = serve()
        long = {"AnonID": "1", "Query": "q" * 70_000}
        answer = post(served.port, lines(long, AOL[0]))
        assert answer.status == 200 and answer.body["reasons"] == {"oversized_record": 1}
        assert served.dead_letters() == [{"reason": "oversized_record", "source": "http", "line": 1}]

    def test_wrong_path_method_type_encoding(self, serve: Any) -> None:
        served: Served = serve(path="/ingest")
        assert post(served.port, lines(AOL[0]), path="/").status == 404
        assert post(served.port, lines(AOL[0]), path="/ingest", headers={"Content-Type": "text/csv"}).status == 415
        assert post(served.port, lines(AOL[0]), path="/ingest", headers={"Content-Encoding": "br"}).status == 415
        assert (
            post(served.port, b"\x1f\x8bnot gzip", path="/ingest", headers={"Content-Encoding": "gzip"}).status == 400
        )
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        conn.request("PUT", "/ingest", body=b"x")
        assert conn.getresponse().status == 405
        conn.close()
        assert post(served.port, lines(AOL[0]), path="/ingest?source=fluentbit").status == 200

    def test_health(self, serve: Any) -> None:
        served: Served = serve()
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        conn.request("GET", "/health")
        resp = conn.getresponse()
        assert resp.status == 200 and resp.read() == b'{"status": "ok", "backpressure": null}\n'
        conn.close()


class _FailingSink(Sink[Any]):
    NAME = "failing"

    def __init__(self) -> None:
        self.fail = True
        self.written = 0

    def write(self, events: list[Event]) -> None:
        self.written += len(events)

    def flush(self) -> None:
        if self.fail:
            raise OSError(28, "No space left on device")


class TestUnavailable:
    def test_503_with_retry_after_when_a_sink_fails_then_200(self, serve: Any) -> None:
        """receive raising (a full disk under a sink) is a 503 with Retry-After: the sender sends again."""
        served: Served = serve(retry_after_seconds=3)
        failing = _FailingSink()
        served.pipeline.sinks.append(failing)
        answer = post(served.port, lines(AOL[0]))
        assert answer.status == 503 and answer.headers["retry-after"] == "3"
        assert served.source.stats()["receive_failed"] == 1
        failing.fail = False
        assert post(served.port, lines(AOL[0])).status == 200

    def test_503_backpressure_when_an_outbox_is_full(self, serve: Any, tmp_path: Path) -> None:
        """An http sink whose peer is down and whose outbox holds its bound: the next body is refused before
        the chain runs (503), and /health names the full outbox."""
        dead = socket.socket()  # bound, never listening: a connection to it is refused (and no one else gets it)
        dead.bind(("127.0.0.1", 0))
        dead_port = dead.getsockname()[1]
        served: Served = serve(
            sinks_yaml=f"sinks:\n  - http: {{url: 'http://127.0.0.1:{dead_port}/', outbox_max_batches: 1, "
            "retry_initial_seconds: 5, close_drain_seconds: 0}\n"
        )
        assert post(served.port, lines(AOL[0])).status == 200  # in the outbox: durable, acknowledged
        answer = post(served.port, lines(AOL[1]))
        assert answer.status == 503 and answer.body == {"error": "backpressure"}
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        conn.request("GET", "/health")
        health = conn.getresponse().read()
        conn.close()
        assert b'"backpressure": "http_127_0_0_1_' in health
        dead.close()


class TestAuth:
    def test_bearer_token(self, serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """With a token, a POST without it or with another is 401 (counted by reason); /health needs none."""
        monkeypatch.setenv("QUERYLOG_TEST_HTTP_TOKEN", "s3cret-token")
        served: Served = serve(auth_token_env="QUERYLOG_TEST_HTTP_TOKEN")
        assert post(served.port, lines(AOL[0])).status == 401
        wrong = post(served.port, lines(AOL[0]), headers={"Authorization": "Bearer s3cret-tokeN"})
        assert wrong.status == 401 and wrong.headers["www-authenticate"].startswith("Bearer")
        assert post(served.port, lines(AOL[0]), headers={"Authorization": "Basic czNjcmV0"}).status == 401
        ok = post(served.port, lines(AOL[0]), headers={"Authorization": "Bearer s3cret-token"})
        assert ok.status == 200
        assert served.source.stats()["missing_token"] == 2 and served.source.stats()["wrong_token"] == 1
        conn = http.client.HTTPConnection("127.0.0.1", served.port, timeout=10)
        conn.request("GET", "/health")
        assert conn.getresponse().status == 200
        conn.close()

    def test_token_from_file(self, serve: Any, tmp_path: Path) -> None:
        (tmp_path / "token").write_text("file-token\n")
        served: Served = serve(auth_token_file=str(tmp_path / "token"))
        assert post(served.port, lines(AOL[0]), headers={"Authorization": "Bearer file-token"}).status == 200

    def test_tls(self, serve: Any, tmp_path: Path) -> None:
        """HTTPS with the configured certificate; a plain-text client on the TLS port does not get through."""
        pki = make_pki(tmp_path)
        served: Served = serve(tls_cert_file=str(pki.server.cert), tls_key_file=str(pki.server.key))
        context = ssl.create_default_context(cafile=str(pki.ca))
        assert post(served.port, lines(AOL[0]), tls=context).status == 200
        with pytest.raises((ConnectionError, http.client.HTTPException, OSError)):
            post(served.port, lines(AOL[1]))
        assert post(served.port, lines(AOL[2]), tls=context).status == 200
        assert served.out.read_bytes() == lines(AOL[0], AOL[2])


def _refused(port: int) -> bool:
    """A connection to ``port`` is refused (the listener is closed). A connection reset while connecting is the
    listener closing with the attempt in its backlog: not refused yet, asked again."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except ConnectionRefusedError:
        return True
    except ConnectionResetError:
        return False
    return False


class TestConnections:
    def test_idle_connections_do_not_starve_a_sender(self, serve: Any) -> None:
        """200 idle keep-alive connections (one with half a request line) leave a normal POST answered."""
        served: Served = serve()
        idle = []
        try:
            for i in range(200):
                s = socket.create_connection(("127.0.0.1", served.port), timeout=10)
                if i == 0:
                    s.sendall(b"POST / HTTP/1.1\r\nContent-Le")
                idle.append(s)
            answer = post(served.port, lines(AOL[0]))  # answered, not timed out (10 s) behind the idle ones
            assert answer.status == 200
            assert served.source.stats()["open_connections"] >= 200
        finally:
            for s in idle:
                s.close()

    def test_max_connections(self, serve: Any) -> None:
        """One connection over max_connections is answered 503 at once and closed; freed room is usable again.
        (The held connections are busy, each with a body in progress: an idle one would be closed to make room.)"""
        served: Served = serve(max_connections=2)
        held = [socket.create_connection(("127.0.0.1", served.port), timeout=10) for _ in range(2)]
        for s in held:
            s.sendall(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
        wait_until(lambda: served.source.stats().get("requests_in_flight", 0) >= 2, what="the two connections busy")
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as extra:
            answer = extra.makefile("rb").read()
        assert answer.startswith(b"HTTP/1.1 503 ") and answer.endswith(b'{"error": "too_many_connections"}\n')
        for s in held:
            s.close()
        wait_until(lambda: post(served.port, lines(AOL[0])).status == 200, what="a POST taken once room is freed")

    def test_idle_timeout_closes_a_silent_connection(self, serve: Any) -> None:
        served: Served = serve(idle_timeout_seconds=0.3)
        s = socket.create_connection(("127.0.0.1", served.port), timeout=5)
        assert s.recv(100) == b""  # closed by the server
        s.close()

    def test_stop_finishes_requests_in_progress(self, serve: Any) -> None:
        """stop() lets a request that is in receive finish (200), closes idle connections, then refuses."""
        served: Served = serve()
        gate = threading.Event()
        entered = threading.Event()
        receive = served.pipeline.receive

        def slow_receive(batch: Any) -> Any:
            entered.set()
            gate.wait(5)
            return receive(batch)

        served.pipeline.receive = slow_receive
        idle = socket.create_connection(("127.0.0.1", served.port), timeout=5)
        results: list[int] = []
        worker = threading.Thread(target=lambda: results.append(post(served.port, lines(AOL[0])).status))
        worker.start()
        assert entered.wait(5)
        stopper = threading.Thread(target=served.source.stop, kwargs={"grace": 5})
        stopper.start()
        wait_until(lambda: _refused(served.port), what="the listener closed")  # stop is waiting for the request
        gate.set()
        worker.join(5)
        stopper.join(10)
        assert results == [200]
        assert idle.recv(10) == b""
        idle.close()
        assert served.out.read_bytes() == lines(AOL[0])


class TestPrivacy:
    def test_logs_carry_no_values_or_token(self, serve: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        """Refusals, bad lines and failures are logged by reason and count: no record value, no token."""
        monkeypatch.setenv("QUERYLOG_TEST_HTTP_TOKEN", "tok-9f8e7d")
        with structlog.testing.capture_logs() as logs:
            served: Served = serve(auth_token_env="QUERYLOG_TEST_HTTP_TOKEN", max_body_bytes=2048)
            auth = {"Authorization": "Bearer tok-9f8e7d"}
            post(served.port, b'{"AnonID":"u-777","Query":"secret-query-1"}\n{bad secret-query-2\n', headers=auth)
            post(served.port, b'{"secret-query-3"\n', headers=auth)
            post(served.port, b"secret-query-4" * 500, headers=auth)
            post(served.port, b"{}", headers={"Authorization": "Bearer secret-query-5"})
            served.source.stop(grace=1)
        text = repr(logs)
        for needle in ("secret-query", "u-777", "tok-9f8e7d"):
            assert needle not in text


class TestParsing:
    """The body helpers on byte literals."""

    def test_split_records(self) -> None:
        body = b'{"a":1}\r\n\n  \n{"b":2}'  # CRLF kept on the line (the codec keeps it), blanks skipped, no final \n
        assert split_records(body, False, 1000) == (['{"a":1}\r', '{"b":2}'], [1, 4], [])

    def test_split_records_bad_utf8_and_oversized(self) -> None:
        body = b'{"a":"\xe9"}\n' + b'{"b":"' + b"x" * 100 + b'"}\n{"c":3}\n'
        got = split_records(body, False, 64)
        assert got == (['{"c":3}'], [3], [(1, "invalid_utf8", b'{"a":"\xe9"}'), (2, "oversized_record", None)])

    def test_decompress_limits(self) -> None:
        data = b"a" * 1000
        assert decompress(gzip.compress(data), "gzip", 1000) == data
        with pytest.raises(Exception, match="body_too_large"):
            decompress(gzip.compress(data), "gzip", 999)
        with pytest.raises(Exception, match="invalid_gzip"):
            decompress(gzip.compress(data)[:-12], "gzip", 2000)


def test_source_options_invalid_values_are_located() -> None:
    """testdata/source_invalid.yaml: every `# invalid` line of the http source's options is a located error."""
    report_invalid_lines(TESTDATA / "source_invalid.yaml", lambda p, text: load_config(p, text=text))
