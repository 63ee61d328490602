"""Shared helpers of the forward tests: a capturing sink, a raw protocol client, config files, node paths, and
`querylog serve` as a subprocess with its memory figures (:class:`ServeProcess`)."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import ssl
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from adapters.forward.protocol import Entry, FrameDecoder, packb
from adapters.forward.source import ForwardSource
from helpers.waiting import exited, wait_until
from sidecar.api import Event, Sink, SinkConfig
from sidecar.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[2]
FLUENT_LOGGER_NPM = "@fluent-org/logger@1.0.10"
NPM_CACHE = ROOT / "tests" / ".npm-cache" / FLUENT_LOGGER_NPM.replace("/", "_").replace("@", "")


def fluent_logger_node(why: str) -> Path:
    """The folder with node_modules/@fluent-org/logger, installed once into tests/.npm-cache (git-ignored);
    skips the test (saying ``why`` node is needed) where node or npm is absent."""
    import shutil
    import subprocess

    import pytest

    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip(f"node and npm are needed {why}")
    marker = NPM_CACHE / "node_modules" / "@fluent-org" / "logger" / "package.json"
    if not marker.exists():
        NPM_CACHE.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, npm_config_update_notifier="false", npm_config_fund="false", npm_config_audit="false")
        proc = subprocess.run(
            [npm, "install", "--prefix", str(NPM_CACHE), "--no-save", "--no-package-lock", FLUENT_LOGGER_NPM],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            check=False,
        )
        if proc.returncode != 0 or not marker.exists():
            pytest.fail(f"npm install {FLUENT_LOGGER_NPM} failed:\n{proc.stderr[-2000:]}")
    return NPM_CACHE


NODE_SCRIPTS = ROOT / "tests" / "adapters" / "forward" / "node"


class Capture(Sink[SinkConfig]):
    """A test sink: keeps the entries it was given; ``flush`` waits for ``gate`` and raises ``fail`` when set."""

    NAME = "capture"

    def __init__(self) -> None:
        super().__init__(SinkConfig(), None)  # type: ignore[arg-type]  # a fake: no BuildContext
        self.events: list[Event] = []
        self.fail: BaseException | None = None
        self.gate = threading.Event()
        self.gate.set()
        self.flushes = 0

    def write(self, events: list[Event]) -> None:
        self.events.extend(events)

    def flush(self) -> None:
        self.gate.wait(10)
        if self.fail is not None:
            raise self.fail
        self.flushes += 1

    def entries(self) -> list[Entry]:
        out = []
        for ev in self.events:
            assert ev.codec is not None
            out.append(ev.codec.encode(ev))
        return out


@dataclass
class Served:
    source: ForwardSource
    pipeline: Pipeline
    capture: Capture
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def port(self) -> int:
        return self.source.port


def write_sidecar_config(tmp_path: Path, body: dict[str, Any], name: str = "sidecar.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump({"state_dir": "state", "filters": [], **body}, sort_keys=False), encoding="utf-8")
    return path


class RawClient:
    """A forward client written from the specification with a plain socket (tests only)."""

    def __init__(self, port: int, tls: ssl.SSLContext | None = None, timeout: float = 5.0) -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock = tls.wrap_socket(sock, server_hostname="localhost") if tls else sock
        self.decoder = FrameDecoder(1 << 20)
        self.pending: list[Any] = []

    def send(self, data: bytes | Any) -> None:
        self.sock.sendall(data if isinstance(data, bytes) else packb(data))

    def read(self, timeout: float = 5.0) -> Any:
        """The next msgpack object from the server; TimeoutError when none came; EOFError when it closed."""
        self.sock.settimeout(timeout)
        while not self.pending:
            data = self.sock.recv(65536)
            if not data:
                raise EOFError("closed")
            self.pending = self.decoder.feed(data)
        return self.pending.pop(0)

    def closed_by_server(self, timeout: float = 5.0) -> bool:
        """True when the server closes the connection within ``timeout`` (whatever it sent before)."""
        self.sock.settimeout(timeout)
        try:
            while self.sock.recv(65536):
                pass
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
        return True

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


def node_env(folder: Path, **extra: str) -> dict[str, str]:
    return dict(os.environ, NODE_PATH=str(folder / "node_modules"), **extra)


#: The `querylog` under test by the subprocess helpers: this venv's, or another build's (QUERYLOG_UNDER_TEST, e.g.
#: an older worktree's venv, to measure the figures before a change).
QUERYLOG_UNDER_TEST = os.environ.get("QUERYLOG_UNDER_TEST") or str(ROOT / ".venv" / "bin" / "querylog")


@dataclass
class ServeProcess:
    """`querylog serve` with a forward source, as a subprocess: its port, log and state folder."""

    proc: subprocess.Popen[bytes]
    port: int
    log: Path
    state: Path

    def rss(self) -> int:
        """Resident memory now, bytes."""
        return self._status("VmRSS")

    def peak_rss(self) -> int:
        """The highest resident memory since the process started (VmHWM), bytes."""
        return self._status("VmHWM")

    def _status(self, key: str) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text(encoding="ascii").splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
        raise KeyError(key)

    def dead_letter_bytes(self) -> int:
        """Bytes written to the dead-letter file: its size, its rotated predecessor's, and what rotated away before
        (each rotation after the first replaced a full ``FILE.1``, as its ``dead_letter_file_rotated`` event says)."""
        files = [self.state / "dead-letter.jsonl", self.state / "dead-letter.jsonl.1"]
        written = sum(f.stat().st_size for f in files if f.exists())
        rotated = self.events("dead_letter_file_rotated")
        if rotated:
            written += (int(rotated[-1]["rotations"]) - 1) * int(rotated[-1]["max_bytes"])
        return written

    def events(self, name: str) -> list[dict[str, Any]]:
        """The JSON log events called ``name`` so far."""
        out = []
        for line in self.log.read_text(encoding="utf-8", errors="replace").splitlines():
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict) and event.get("event") == name:
                    out.append(event)
        return out


@contextlib.contextmanager
def serve_forward_process(tmp_path: Path, source: dict[str, Any] | None = None) -> Iterator[ServeProcess]:
    """`querylog serve` (:data:`QUERYLOG_UNDER_TEST`): a forward source on 127.0.0.1:0 (``source``: more options),
    no filter, a TSV file sink; once it listens. Killed (SIGKILL) at the end: a hostile test may leave it stuck."""
    body = {
        "state_dir": "state",
        "logging": {"level": "info", "format": "json"},  # the source's start event names the bound port
        "sources": [{"forward": {"listen": "127.0.0.1:0", **(source or {})}}],
        "sinks": [{"file": {"path": "out.tsv"}}],
    }
    config = write_sidecar_config(tmp_path, body)
    log = tmp_path / "serve.log"
    with log.open("wb") as err:
        proc = subprocess.Popen([QUERYLOG_UNDER_TEST, "serve", "--config", str(config)], stderr=err)
    try:
        served = ServeProcess(proc, 0, log, tmp_path / "state")
        started = wait_until(
            lambda: served.events("forward_source_started"), what="the forward source's start", abort=exited(proc)
        )
        served.port = int(started[0]["port"])
        yield served
    finally:
        proc.kill()
        proc.wait()
