"""Helpers of the HTTP and ClickHouse tests: a tiny client, NDJSON bodies, a served pipeline, a scripted peer."""

from __future__ import annotations

import gzip
import http.client
import http.server
import json
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from adapters.http.source import HttpSource
from sidecar.pipeline import Pipeline


@dataclass
class Answer:
    status: int
    body: dict[str, Any]
    headers: dict[str, str]


def post(port: int, body: bytes, *, path: str = "/", headers: dict[str, str] | None = None, tls: Any = None) -> Answer:
    """One POST on a fresh connection (``tls``: an ``ssl.SSLContext`` for https)."""
    conn: http.client.HTTPConnection
    if tls is not None:
        conn = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=tls)
    else:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/x-ndjson", **(headers or {})})
        resp = conn.getresponse()
        data = resp.read()
        return Answer(resp.status, json.loads(data) if data else {}, {k.lower(): v for k, v in resp.getheaders()})
    finally:
        conn.close()


def lines(*records: dict[str, Any]) -> bytes:
    """NDJSON of ``records`` (compact, as Vector sends them)."""
    return b"".join(json.dumps(r, separators=(",", ":")).encode() + b"\n" for r in records)


@dataclass
class Served:
    """A running pipeline with an ``http`` source; ``out`` is the file sink's output."""

    pipeline: Pipeline
    source: HttpSource
    out: Path
    state: Path

    @property
    def port(self) -> int:
        return self.source.port

    def dead_letters(self) -> list[dict[str, Any]]:
        path = self.state / "dead-letter.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes  # as sent (compressed when the sink compresses)

    @property
    def text(self) -> str:
        data = gzip.decompress(self.body) if self.headers.get("content-encoding") == "gzip" else self.body
        return data.decode("utf-8")


@dataclass
class Peer:
    """An HTTP server answering each POST with the next status of ``script`` (then 200); it keeps every request
    and whether it was answered 2xx (a test waits for them with :func:`helpers.wait_until`)."""

    script: list[int] = field(default_factory=list)
    requests: list[Received] = field(default_factory=list)
    answered: list[tuple[Received, int]] = field(default_factory=list)
    server: http.server.ThreadingHTTPServer | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/ingest"

    def delivered(self) -> list[str]:
        """The lines of the requests answered 2xx, in order."""
        with self.lock:
            return [line for r, status in self.answered if 200 <= status < 300 for line in r.text.splitlines()]

    def start(self, port: int = 0, sock: socket.socket | None = None) -> None:
        """Listen on ``port`` (0: any free one), or on ``sock``, a socket bound earlier and not yet listening
        (until then connections to it are refused: a peer that is down, without a port picked and freed)."""
        state = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                got = Received(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with state.lock:
                    status = state.script.pop(0) if state.script else 200
                    state.requests.append(got)
                    state.answered.append((got, status))
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

        if sock is None:
            self.server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
        else:
            self.server = http.server.ThreadingHTTPServer(sock.getsockname(), Handler, bind_and_activate=False)
            self.server.socket.close()
            self.server.socket = sock
            self.server.server_address = sock.getsockname()
            self.server.server_activate()
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
