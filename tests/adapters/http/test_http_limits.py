"""Bounded cost for any single HTTP message or connection (issue 24, items 4, 8, 9), in process: chunk sizes the
parser refuses, every body path capped by ``max_body_bytes``, deep nesting in each body format answered with its
status and a counted reason, a trickling body cut at ``body_timeout_seconds``, idle connections making room for a
new one, a refusal over TLS, and half-open TLS handshakes closed. The same hostile clients against a ``serve``
process, with its memory and a good client's wait measured, are in ``tests/faults/test_hostile_http.py``."""

from __future__ import annotations

import contextlib
import gzip
import socket
import ssl
import sys
import time
from pathlib import Path
from typing import Any

import msgpack
import pytest
from helpers import wait_until
from helpers.certs import make_pki
from helpers.httptest import Served, lines, post
from helpers.kb import kb_file

R1 = {"AnonID": "142", "Query": "rentdirect.com", "QueryTime": "2006-03-01 07:17:12", "ItemRank": "", "ClickURL": ""}
HEAD = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: %s\r\n"


def _raw(port: int, request: bytes, timeout: float = 10) -> bytes:
    """Send ``request`` on a fresh connection; everything the server answers until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        return s.makefile("rb").read()


def _chunked(body: bytes, content_type: bytes = b"application/x-ndjson", extra: bytes = b"") -> bytes:
    return HEAD % content_type + extra + b"Transfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n0\r\n\r\n" % (len(body), body)


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


class TestChunkedBodies:
    @pytest.mark.parametrize("size", [b"-1", b"-0", b"+5", b"0x10", b"fffffffffffffffffffffff", b"5 5"])
    def test_a_chunk_size_the_parser_refuses_is_400(self, serve: Any, size: bytes) -> None:
        """A negative chunk size (`-1` read the body with no limit: 1 GB took 2.6 GB) or any other malformed one
        is answered 400 at once, counted; nothing is taken."""
        served: Served = serve()
        got = _raw(served.port, HEAD % b"application/x-ndjson" + b"Transfer-Encoding: chunked\r\n\r\n" + size + b"\r\n")
        assert _status(got) == 400 and got.endswith(b'{"error": "bad_request"}\n')
        assert served.source.stats()["bad_request"] == 1 and not served.out.exists()

    def test_a_chunked_body_over_max_body_bytes_is_413(self, serve: Any) -> None:
        """Chunked (no Content-Length to refuse up front): the body is cut at max_body_bytes, 413."""
        served: Served = serve(max_body_bytes=4096)
        got = _raw(served.port, _chunked(lines(R1) * 100))
        assert _status(got) == 413 and got.endswith(b'{"error": "body_too_large"}\n')

    def test_a_chunked_gzip_body_expanding_past_the_bound_is_413(self, serve: Any) -> None:
        """4 KiB of gzip on the wire expanding to 8 MiB: 413, decompressed no further than the bound."""
        served: Served = serve(max_body_bytes=1 << 20)
        bomb = gzip.compress(b" " * (8 << 20))
        assert len(bomb) < 10_000
        got = _raw(served.port, _chunked(bomb, extra=b"Content-Encoding: gzip\r\n"))
        assert _status(got) == 413 and got.endswith(b'{"error": "body_too_large"}\n')
        assert served.source.stats()["body_too_large"] == 1


def _nested_msgpack(depth: int) -> bytes:
    """A map holding a value nested ``depth`` arrays deep (0x91: an array of one)."""
    return (
        b"\x83"
        + msgpack.packb("AnonID")
        + msgpack.packb("1")
        + msgpack.packb("Query")
        + msgpack.packb("q")
        + (msgpack.packb("x") + b"\x91" * depth + b"\x01")
    )


class TestDeepNesting:
    @pytest.mark.parametrize(
        ("content_type", "body", "reason"),
        [
            # one JSON array body, `[` 200,000 deep: raised RecursionError and closed the connection with no status
            (b"application/json", b"[" * 200_000, "json_too_deep"),
            (b"application/json", b'[{"a":' + b"[" * 60_000, "json_too_deep"),
            # one NDJSON line within max_record_bytes, nested deeper than any record
            (b"application/x-ndjson", b"[" * 60_000 + b"\n", "json_too_deep"),
            (b"application/x-ndjson", b'{"Query":"q","AnonID":"1","x":' + b"[" * 60_000 + b"\n", "json_too_deep"),
            # msgpack: deeper than the unpacker's stack; and deep enough for JSON but not for the unpacker
            (b"application/msgpack", b"\x91" * 200_000, "msgpack_too_deep"),
            (b"application/msgpack", _nested_msgpack(1020), "json_too_deep"),
        ],
        ids=["json-array", "json-array-of-objects", "ndjson-array", "ndjson-object", "msgpack", "msgpack-1020"],
    )
    def test_each_format_answers_400_with_a_counted_reason(
        self, serve: Any, content_type: bytes, body: bytes, reason: str
    ) -> None:
        served: Served = serve()
        answer = post(served.port, body, headers={"Content-Type": content_type.decode()})
        assert answer.status == 400 and answer.body["reasons"] == {reason: 1}
        assert answer.body["accepted"] == 0 and answer.body["dead_lettered"] == 1
        assert [entry["reason"] for entry in served.dead_letters()] == [reason]
        assert "http_500" not in served.source.stats()
        assert post(served.port, lines(R1)).status == 200  # the server goes on

    def test_a_kb_built_by_the_process_leaves_the_bound_as_it_was(
        self, serve: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The KB builder raises the interpreter's recursion limit (process-wide) to compile; it kept it raised,
        so after a KB rebuilt in process (classify's load_kb, the tests' kb_file) a 1020-deep msgpack record was
        accepted (this class's msgpack-1020 case failed in full runs that rebuilt a stale KB before it)."""
        from knowledge import build as kb_build

        compiled = kb_file().read_bytes()
        limits: list[int] = []

        def compile_kb(categories: Any = None) -> bytes:  # the session's compiled KB, without 20 s of work
            limits.append(sys.getrecursionlimit())
            return compiled

        monkeypatch.setattr(kb_build, "compile_kb", compile_kb)
        before = sys.getrecursionlimit()
        try:
            kb_build.build(tmp_path / "kb.qlkb")
            assert limits[0] >= 10_000 and sys.getrecursionlimit() == before
        finally:
            sys.setrecursionlimit(before)  # however the test ends, the tests after it see the limit they had
        served: Served = serve()
        answer = post(served.port, _nested_msgpack(1020), headers={"Content-Type": "application/msgpack"})
        assert answer.status == 400 and answer.body["reasons"] == {"json_too_deep": 1}


class TestSlowClients:
    def test_a_body_trickling_in_is_cut_at_body_timeout(self, serve: Any) -> None:
        """A byte every 20 ms never trips the idle timeout; body_timeout_seconds still answers 408 and closes."""
        served: Served = serve(idle_timeout_seconds=5, body_timeout_seconds=0.5)
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as s:
            s.sendall(HEAD % b"application/x-ndjson" + b"Content-Length: 100000\r\n\r\n")
            got = b""
            s.setblocking(False)
            for _ in range(100_000):
                try:
                    s.send(b" ")
                except OSError:  # the server closed after answering
                    break
                with contextlib.suppress(BlockingIOError):
                    got += s.recv(4096)
                if got.endswith(b"\n"):
                    break
                time.sleep(0.02)  # the pace of a slow sender, not a wait for a condition
            s.setblocking(True)
            got += s.makefile("rb").read()
        assert _status(got) == 408 and got.endswith(b'{"error": "body_timeout"}\n')
        assert time.monotonic() - started < 5  # cut by the body deadline, not the idle timeout
        assert served.source.stats()["body_timeout"] == 1


class TestConnections:
    def test_idle_connections_make_room_for_a_new_one(self, serve: Any) -> None:
        """max_connections idle peers: a new client is served anyway, the connection idle the longest closed."""
        served: Served = serve(max_connections=5)
        idle = [socket.create_connection(("127.0.0.1", served.port), timeout=10) for _ in range(5)]
        try:
            wait_until(lambda: served.source.stats()["open_connections"] == 5, what="5 open connections")
            assert post(served.port, lines(R1)).status == 200
            assert idle[0].recv(1) == b""  # the oldest idle one was closed (EOF), without an answer
            assert served.source.stats()["idle_connection_closed"] >= 1
            assert "too_many_connections" not in served.source.stats()
        finally:
            for s in idle:
                s.close()

    def test_on_a_tls_port_a_refusal_is_sent_over_tls(self, serve: Any, tmp_path: Path) -> None:
        """Every connection busy (a body in progress): the next TLS client reads the 503 through TLS (it was sent
        in plaintext before the handshake)."""
        pki = make_pki(tmp_path)
        served: Served = serve(tls_cert_file=str(pki.server.cert), tls_key_file=str(pki.server.key), max_connections=1)
        context = ssl.create_default_context(cafile=str(pki.ca))
        with (
            socket.create_connection(("127.0.0.1", served.port), timeout=10) as raw_busy,
            context.wrap_socket(raw_busy, server_hostname="localhost") as busy,
        ):
            busy.sendall(HEAD % b"application/x-ndjson" + b"Content-Length: 100\r\n\r\n{")
            wait_until(lambda: served.source.stats()["requests_in_flight"] == 1, what="the busy request")
            with pytest.raises(Exception) as refused:  # http.client raises on the closed connection... or reads it
                answer = post(served.port, lines(R1), tls=context)
                raise AssertionError(answer)
            assert isinstance(refused.value, AssertionError) and refused.value.args[0].status == 503
        assert served.source.stats()["too_many_connections"] == 1

    def test_half_open_tls_handshakes_are_closed_and_lock_no_one_out(self, serve: Any, tmp_path: Path) -> None:
        """50 peers that connect to a TLS port and never complete the handshake: a TLS client is served meanwhile,
        and each of them is closed after handshake_timeout_seconds."""
        pki = make_pki(tmp_path)
        served: Served = serve(
            tls_cert_file=str(pki.server.cert), tls_key_file=str(pki.server.key), handshake_timeout_seconds=0.5
        )
        half_open = [socket.create_connection(("127.0.0.1", served.port), timeout=10) for _ in range(50)]
        try:
            for s in half_open[::2]:
                s.sendall(b"\x16\x03\x01\x02\x00\x01")  # the start of a ClientHello, never finished
            context = ssl.create_default_context(cafile=str(pki.ca))
            assert post(served.port, lines(R1), tls=context).status == 200
            for s in half_open:
                assert s.recv(1) == b""  # closed by the server (the socket's timeout fails the test otherwise)
        finally:
            for s in half_open:
                s.close()
