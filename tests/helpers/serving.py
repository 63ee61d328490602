"""The ports a `querylog serve` subprocess bound, read from the process instead of picked before it starts.

A test runs serve with ``listen: 127.0.0.1:0`` (no pick-then-bind race with another process) and learns the port
from serve's JSON log: a ``listening`` event per source address (``source``, ``port``) and the ``serving`` event
(``metrics_port``). :class:`ServeLog` reads a pipe on a thread of its own so a test can wait for these events;
a config that logs at ``warning`` hides them, so :func:`bound_ports` asks the operating system instead.
"""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterable
from typing import IO, Any

import psutil

from helpers.waiting import exited, wait_until


def events(lines: Iterable[str], event: str) -> list[dict[str, Any]]:
    """The JSON log lines whose ``event`` is ``event``, in order (other lines are skipped)."""
    found = []
    for line in lines:
        if not line.startswith("{"):
            continue
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and entry.get("event") == event:
            found.append(entry)
    return found


def listening_ports(lines: Iterable[str], source: str | None = None) -> list[int]:
    """The ports of serve's ``listening`` events in ``lines`` (of the sources whose config path contains
    ``source``, e.g. ``"grpc"`` for ``sources[0].grpc``; None: every source), in the order the sources started."""
    return [int(e["port"]) for e in events(lines, "listening") if source is None or source in str(e.get("source", ""))]


class ServeLog:
    """Reads a serve subprocess's stderr (``stderr=subprocess.PIPE, text=True``) on a daemon thread, so the test
    can wait for log events while the process runs and read the whole log after it exits (use this instead of
    ``communicate``, which would compete for the pipe)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        assert proc.stderr is not None, "start the process with stderr=subprocess.PIPE, text=True"
        self.proc = proc
        self.lines: list[str] = []
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[str]) -> None:
        for line in stream:
            with self._lock:
                self.lines.append(line)

    def snapshot(self) -> list[str]:
        with self._lock:
            return list(self.lines)

    def ports(self, source: str | None = None, count: int = 1) -> list[int]:
        """Wait until serve logged ``count`` ``listening`` events (of ``source``, see :func:`listening_ports`);
        fails at once if the process exits first."""
        return wait_until(
            lambda: (found := listening_ports(self.snapshot(), source)) and len(found) >= count and found,
            what=f"serve to log {count} listening port(s) of {source or 'any source'}",
            abort=exited(self.proc),
        )

    def metrics_port(self) -> int:
        """Wait for serve's ``serving`` event and return its ``metrics_port``."""
        (serving, *_) = wait_until(
            lambda: events(self.snapshot(), "serving"), what="serve to log serving", abort=exited(self.proc)
        )
        return int(serving["metrics_port"])

    def text(self, timeout: float = 60) -> str:
        """The whole log once the process has exited and the pipe is read to its end."""
        self.proc.wait(timeout=timeout)
        self._thread.join(timeout=timeout)
        return "".join(self.snapshot())


def bound_ports(pid: int) -> list[int]:
    """The TCP ports process ``pid`` listens on, sorted (for a serve whose log level hides ``listening``)."""
    try:
        connections = psutil.Process(pid).net_connections(kind="tcp")
    except psutil.NoSuchProcess:
        return []
    return sorted({c.laddr.port for c in connections if c.status == psutil.CONN_LISTEN})
