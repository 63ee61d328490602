"""Hostile HTTP clients against a ``querylog serve`` process (issue 24, items 4, 8, 9): each costs a bounded amount
of the server's memory and locks no good client out.

* a chunked body whose chunk size is ``-1`` followed by 256 MiB (read with no limit before: 1 GB took 2.6 GB);
* ``[`` nested 200,000 deep (a JSON array body; an NDJSON line and a msgpack body too): a RecursionError closed
  the connection with no status before;
* 1,100 idle connections against ``max_connections: 1024``; slow senders trickling their headers or their body;
  100 half-open TLS handshakes; every connection busy on a TLS port (the 503 was sent in plaintext).

The server is a subprocess: its peak RSS is the kernel's high-water mark (``VmHWM``) over its RSS once started,
and a good client posts again and again while the hostile one runs (the longest wait is its figure). Bounds are
loose, for a loaded machine. ``QUERYLOG_HOSTILE_HTTP_BIN`` runs the same tests against another build's
``querylog`` (how the before figures were taken); options that build does not know are left out of its config.
Each test prints a ``FIGURES`` line (``pytest -s``).
"""

from __future__ import annotations

import json
import os
import resource
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import pytest
import yaml
from helpers import QUERYLOG, exited, wait_until
from helpers.certs import make_pki
from helpers.httptest import lines, post

BIN = os.environ.get("QUERYLOG_HOSTILE_HTTP_BIN", QUERYLOG)
#: Options an older build (QUERYLOG_HOSTILE_HTTP_BIN) does not know: left out of its config.
NEW_OPTIONS = frozenset({"body_timeout_seconds", "handshake_timeout_seconds"})
R1 = {"AnonID": "142", "Query": "rentdirect.com", "QueryTime": "2006-03-01 07:17:12", "ItemRank": "", "ClickURL": ""}
GROWTH_BOUND = 150 * 1024 * 1024
GOOD_WAIT_BOUND = 5.0
HEAD = b"POST / HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-ndjson\r\n"
IDLE = 1100


@dataclass
class Server:
    proc: subprocess.Popen[bytes]
    port: int
    base_rss: int
    tls: ssl.SSLContext | None = None
    waits: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def growth(self) -> int:
        """The peak RSS over the RSS once started, in bytes."""
        status = Path(f"/proc/{self.proc.pid}/status").read_text()
        hwm = next(int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:"))
        return max(0, hwm - self.base_rss)

    def good(self) -> None:
        """One good POST on a fresh connection: its wait, or why it failed."""
        started = time.monotonic()
        try:
            status = post(self.port, lines(R1), tls=self.tls).status
            if status != 200:
                self.failures.append(f"status {status}")
        except Exception as exc:
            self.failures.append(type(exc).__name__)
        self.waits.append(time.monotonic() - started)

    def meanwhile(self, hostile: Callable[[], object], at_least: int = 15) -> list[object]:
        """Runs ``hostile`` on a thread; good POSTs one after another until it ended (``at_least`` of them)."""
        result: list[object] = []
        thread = threading.Thread(target=lambda: result.append(hostile()), daemon=True)
        thread.start()
        while thread.is_alive() or len(self.waits) < at_least:
            self.good()
        thread.join()
        return result

    def figures(self, name: str, **more: Any) -> str:
        good = len(self.waits) - len(self.failures)
        text = (
            f"FIGURES {name} [{Path(BIN).parent.parent.parent.name}]: peak RSS growth {self.growth() / 2**20:.0f} MiB, "
            f"good clients {good}/{len(self.waits)} served, longest wait {max(self.waits, default=0):.2f} s"
        )
        text += "".join(f", {k} {v}" for k, v in more.items())
        print(text)
        return text

    def assert_good_served(self) -> None:
        assert not self.failures, f"{len(self.failures)} of {len(self.waits)} good clients failed: {self.failures}"
        assert max(self.waits) < GOOD_WAIT_BOUND, f"a good client waited {max(self.waits):.1f} s"


@pytest.fixture
def open_files() -> Iterator[None]:
    """Room for idle connections' descriptors (this process's ends and, inherited, the server's)."""
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


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """``serve(tls=False, **http_options)``: ``querylog serve`` with one ``http`` source on a free port and a file
    sink, once it logged the port it bound; killed after the test."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(tls: bool = False, **options: Any) -> Server:
        http: dict[str, Any] = {"listen": "127.0.0.1:0", **options}
        client = None
        if tls:
            pki = make_pki(tmp_path)
            http.update(tls_cert_file=str(pki.server.cert), tls_key_file=str(pki.server.key))
            client = ssl.create_default_context(cafile=str(pki.ca))
        if BIN != QUERYLOG:
            http = {k: v for k, v in http.items() if k not in NEW_OPTIONS}
        config = {
            "state_dir": str(tmp_path / "state"),
            "schema": {"format": "jsonl"},
            "logging": {"level": "info", "format": "json"},
            "sources": [{"http": http}],
            "sinks": [{"file": {"path": str(tmp_path / "out.jsonl")}}],
        }
        (tmp_path / "querylog.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        log = tmp_path / "serve.log"
        with log.open("wb") as err:
            proc = subprocess.Popen([BIN, "serve", "--config", str(tmp_path / "querylog.yaml")], stderr=err)
        procs.append(proc)
        port = wait_until(lambda: _started_port(log), what="serve's http_source_started event", abort=exited(proc))
        wait_until(lambda: post(port, b"", tls=client).status == 200, what="serve answering", abort=exited(proc))
        return Server(proc, port, psutil.Process(proc.pid).memory_info().rss, client)

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def _started_port(log: Path) -> int | None:
    for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("event") == "http_source_started":
            return int(event["port"])
    return None


def _answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes (the socket's timeout bounds the wait)."""
    got = b""
    try:
        while chunk := sock.recv(65536):
            got += chunk
    except OSError:  # reset, or the timeout: what came so far
        pass
    return got


class TestOneMessage:
    def test_a_negative_chunk_size_is_400_and_reads_nothing_more(self, serve: Callable[..., Server]) -> None:
        """`-1` as a chunk size, then 256 MiB: answered 400 at once, the rest never read into memory."""
        server = serve(max_body_bytes=1 << 20)
        sent = [0]

        def hostile() -> bytes:
            with socket.create_connection(("127.0.0.1", server.port), timeout=30) as s:
                s.sendall(HEAD + b"Transfer-Encoding: chunked\r\n\r\n-1\r\n")
                block = b"x" * (1 << 20)
                try:
                    for _ in range(256):
                        s.sendall(block)
                        sent[0] += len(block)
                    s.shutdown(socket.SHUT_WR)
                except OSError:  # the server answered and closed
                    pass
                return _answer(s)

        (answer,) = server.meanwhile(hostile)
        server.figures("negative chunk size", sent_mib=sent[0] >> 20, status=str(answer[:12]))
        assert isinstance(answer, bytes) and answer.startswith((b"HTTP/1.0 400 ", b"HTTP/1.1 400 "))
        assert server.growth() < GROWTH_BOUND
        server.assert_good_served()

    @pytest.mark.parametrize(
        ("content_type", "body", "reason"),
        [
            ("application/json", b"[" * 200_000, "json_too_deep"),
            ("application/x-ndjson", b"[" * 60_000 + b"\n", "json_too_deep"),
            ("application/msgpack", b"\x91" * 200_000, "msgpack_too_deep"),
        ],
        ids=["json-array", "ndjson-line", "msgpack"],
    )
    def test_deep_nesting_is_400_with_a_reason(
        self, serve: Callable[..., Server], content_type: str, body: bytes, reason: str
    ) -> None:
        server = serve()
        outcome: list[str] = []

        def hostile() -> None:
            try:
                answer = post(server.port, body, headers={"Content-Type": content_type})
                outcome.append(f"{answer.status} {answer.body.get('reasons')}")
            except Exception as exc:
                outcome.append(f"no status: {type(exc).__name__}")

        server.meanwhile(hostile)
        server.figures(f"deep nesting {content_type}", answer=outcome[0])
        expected = {reason: 1}
        assert outcome == [f"400 {expected}"]
        server.assert_good_served()


class TestConnections:
    def test_idle_connections_over_max_connections_lock_no_one_out(
        self, serve: Callable[..., Server], open_files: None
    ) -> None:
        """1,100 idle connections against max_connections 1,024: good clients are served all along."""
        server = serve(max_connections=1024)
        idle: list[socket.socket] = []

        def hostile() -> None:
            for _ in range(IDLE):
                idle.append(socket.create_connection(("127.0.0.1", server.port), timeout=30))

        try:
            server.meanwhile(hostile, at_least=25)
            for _ in range(10):
                server.good()
        finally:
            for s in idle:
                s.close()
        server.figures("1,100 idle connections")
        server.assert_good_served()

    def test_slow_senders_are_cut_and_lock_no_one_out(self, serve: Callable[..., Server]) -> None:
        """Ten clients sending a body a byte at a time, five more their headers: good clients are served
        meanwhile; the body senders get 408 once body_timeout_seconds passed (each gives up after 20 s)."""
        server = serve(idle_timeout_seconds=3, body_timeout_seconds=2)
        answers: list[bytes] = []

        def slow(head: bytes, trickle: bytes) -> None:
            with socket.create_connection(("127.0.0.1", server.port), timeout=20) as s:
                s.sendall(head)
                deadline = time.monotonic() + 20
                try:
                    for byte in trickle:
                        if time.monotonic() > deadline:
                            break
                        s.sendall(bytes([byte]))
                        time.sleep(0.1)  # the pace of a slow sender, not a wait for a condition
                except OSError:  # the server answered and closed
                    pass
                s.settimeout(5)
                answers.append(_answer(s))

        def hostile() -> None:
            threads = [
                threading.Thread(target=slow, args=(HEAD + b"Content-Length: 1000\r\n\r\n", b" " * 1000))
                for _ in range(10)
            ] + [
                threading.Thread(target=slow, args=(b"POST / HTTP/1.1\r\n", b"X-Slow: " + b"a" * 1000))
                for _ in range(5)
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

        started = time.monotonic()
        server.meanwhile(hostile)
        took = time.monotonic() - started
        statuses = sorted(a[9:12].decode(errors="replace") or "closed" for a in answers)
        server.figures("slow senders", slow_clients_ended_after=f"{took:.1f} s", answers=statuses)
        server.assert_good_served()
        assert statuses.count("408") == 10 and took < 15

    def test_half_open_tls_handshakes_lock_no_one_out(self, serve: Callable[..., Server]) -> None:
        """100 peers that never finish a TLS handshake: good TLS clients are served; the server closes each of
        them after handshake_timeout_seconds."""
        server = serve(tls=True, handshake_timeout_seconds=1)
        half_open = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(100)]
        closed: list[bool] = []
        try:
            for s in half_open[::2]:
                s.sendall(b"\x16\x03\x01\x02\x00\x01")  # the start of a ClientHello, never finished

            def hostile() -> None:
                for s in half_open:
                    try:
                        closed.append(s.recv(1) == b"")
                    except OSError:  # the timeout: still open
                        closed.append(False)

            server.meanwhile(hostile)
        finally:
            for s in half_open:
                s.close()
        server.figures("100 half-open TLS handshakes", closed_by_server=sum(closed))
        server.assert_good_served()
        assert all(closed)

    def test_a_refusal_on_a_tls_port_is_sent_over_tls(self, serve: Callable[..., Server]) -> None:
        """Every connection busy: a TLS client reads the 503 through TLS (no plaintext before the handshake)."""
        server = serve(tls=True, max_connections=1)
        assert server.tls is not None
        with (
            socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw,
            server.tls.wrap_socket(raw, server_hostname="localhost") as busy,
        ):
            busy.sendall(HEAD + b"Content-Length: 100\r\n\r\n{")
            outcome: list[str] = []
            for _ in range(20):  # the busy connection is registered once its handshake completed: until then a 200
                try:
                    outcome.append(str(post(server.port, lines(R1), tls=server.tls).status))
                except Exception as exc:
                    outcome.append(type(exc).__name__)
                if outcome[-1] != "200":
                    break
        server.figures("refusal on a TLS port", answer=outcome[-1])
        assert outcome[-1] == "503"
