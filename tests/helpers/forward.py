"""Shared helpers of the forward tests: a capturing sink, a raw protocol client, config files, node paths."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from adapters.forward.protocol import Entry, FrameDecoder, packb
from adapters.forward.source import ForwardSource
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
