"""OTLP/HTTP's ``max_connections``: a connection over the limit closes the one idle the longest, so idle
keep-alive exporters never lock a new one out; when every connection is busy (a request in progress) the newcomer
gets 503 with ``Retry-After`` and is closed, and is served again once a connection ends."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from helpers import wait_until
from helpers.otlp import otlp_sidecar, request_bytes, write_config

HEAD = "POST /v1/logs HTTP/1.1\r\nHost: sidecar\r\nContent-Type: application/x-protobuf\r\nContent-Length: {n}\r\n\r\n"


@contextmanager
def connection(port: int) -> Iterator[socket.socket]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        yield sock


def answer(sock: socket.socket) -> bytes:
    """One whole answer (its head and a body of its Content-Length), or what came before the server closed."""
    data = b""
    while True:
        head, sep, body = data.partition(b"\r\n\r\n")
        if sep:
            lines = [line.split(b":", 1) for line in head.split(b"\r\n")[1:]]
            length = next((int(v) for k, v in lines if k.strip().lower() == b"content-length"), 0)
            if len(body) >= length:
                return data
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def export(sock: socket.socket, data: bytes) -> bytes:
    sock.sendall(HEAD.format(n=len(data)).encode("ascii") + data)
    return answer(sock)


def test_busy_connections_refuse_one_more_with_503_and_idle_ones_make_room(tmp_path: Path) -> None:
    data = request_bytes()
    with otlp_sidecar(write_config(tmp_path), max_connections=2, retry_after_seconds=3) as sc:
        server = sc.source.server
        assert server is not None
        port = sc.source.http_port
        with ExitStack() as stack:
            busy = [stack.enter_context(connection(port)) for _ in range(2)]
            for sock in busy:  # a request in progress on each: its headers sent, its body not yet
                sock.sendall(HEAD.format(n=len(data)).encode("ascii"))
            wait_until(lambda: server.open_connections == 2, what="both connections open")
            with connection(port) as third:
                refused = answer(third)
                assert refused.startswith(b"HTTP/1.1 503") and b"Retry-After: 3" in refused
                assert third.recv(1) == b""  # and closed
            assert sc.source.stats()["connections_refused_too_many"] == 1
            for sock in busy:  # the requests complete: the connections are idle now, kept alive
                sock.sendall(data)
                assert answer(sock).startswith(b"HTTP/1.1 200")
            with connection(port) as fourth:  # full of idle connections: the oldest closes, this one is served
                assert export(fourth, data).startswith(b"HTTP/1.1 200")
            assert sc.source.stats()["connections_idle_closed"] == 1
            assert busy[0].recv(1) == b""  # the one idle the longest was closed
            assert export(busy[1], data).startswith(b"HTTP/1.1 200")  # the other one still serves
    assert len((tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()) == 4 * 6
