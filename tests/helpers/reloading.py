"""A `querylog serve` subprocess to reload, and a client that keeps posting while it does (the reload tests).

:func:`write_config` writes a config with an ``http`` source on port 0 and a JSON-lines file sink; :class:`Client`
posts bodies of new records (each its own user, query text and ``id``) and keeps the ids of the acknowledged ones;
:class:`Served` runs serve and sends it SIGHUP; :class:`Readiness` polls ``/readyz`` meanwhile. Nothing here
prints a record value.
"""

from __future__ import annotations

import contextlib
import http.client
import signal
import subprocess
import threading
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml

from helpers import QUERYLOG, exited, wait_until
from helpers.httptest import lines, post
from helpers.probes import get
from helpers.serving import ServeLog, events

BODY = 10
CATEGORIES = 3


def write_config(path: Path, filters: list[dict[str, Any]], **top: Any) -> Path:
    cfg = {
        "state_dir": "state",
        "logging": {"level": "info", "format": "json"},  # the listening events name the bound ports
        "metrics_listen": "127.0.0.1:0",
        "flush_interval_seconds": 0.2,
        "sources": [{"http": {"listen": "127.0.0.1:0"}}],
        "filters": filters,
        "sinks": [{"file": {"path": "out.jsonl", "format": "jsonl"}}],
        **top,
    }
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def buffered(k: int) -> list[dict[str, Any]]:
    return [{"category_buffer": {"k": k, "category_field": "cat", "time": "query"}}]


class Client(threading.Thread):
    """Posts bodies of BODY new records (ids from ``first`` on) until stopped or refused; ``acked``: the ids of
    bodies answered 200 with every record taken; ``refused``: why it stopped (an exception's name, a status)."""

    def __init__(self, port: int, first: int = 0) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.sent = first
        self.acked: list[str] = []
        self.refused: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            records = [
                {"id": f"e{n}", "AnonID": f"user-{n}", "Query": f"query number {n}", "cat": f"c{n % CATEGORIES}"}
                for n in range(self.sent, self.sent + BODY)
            ]
            self.sent += BODY
            try:
                answer = post(self.port, lines(*records))
            except (OSError, http.client.HTTPException) as exc:
                self.refused.append(type(exc).__name__)
                return
            if answer.status != 200 or answer.body.get("accepted") != BODY:
                self.refused.append(str(answer.status))
                return
            self.acked.extend(r["id"] for r in records)

    def more(self, count: int, proc: subprocess.Popen[str]) -> None:
        """Wait until ``count`` more records were acknowledged."""
        target = len(self.acked) + count
        wait_until(lambda: len(self.acked) >= target or self.refused, what=f"{count} more records", abort=exited(proc))
        assert not self.refused, self.refused

    def stop(self) -> None:
        self.halt.set()
        self.join(timeout=60)


class Served:
    """serve in a subprocess; its http and metrics ports read from its log."""

    def __init__(self, config: Path, env: dict[str, str] | None = None, *args: str) -> None:
        self.config = config
        self.proc = subprocess.Popen(
            [QUERYLOG, "serve", *args, "-c", str(config)], stderr=subprocess.PIPE, text=True, cwd=config.parent, env=env
        )
        self.log = ServeLog(self.proc)
        (self.port,) = self.log.ports("http")
        self.metrics_port = self.log.metrics_port()

    def hup(self, outcome: str, count: int = 1) -> dict[str, Any]:
        """SIGHUP; wait for the ``count``-th reload log event ``outcome`` (config_reloaded, config_reload_refused)."""
        self.proc.send_signal(signal.SIGHUP)
        return wait_until(
            lambda: (found := events(self.log.snapshot(), outcome)) and len(found) >= count and found[count - 1],
            what=f"serve to log {outcome}",
            abort=exited(self.proc),
        )

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as answer:
            return str(answer.read().decode())

    def stop(self) -> str:
        self.proc.send_signal(signal.SIGTERM)
        text = self.log.text()
        assert self.proc.returncode == 0, text[-3000:]
        return text


@contextlib.contextmanager
def serves() -> Iterator[Callable[..., Served]]:
    """``start(config, env=None, *args)`` runs serve (``args``: more options); each one still running at the end is
    killed (a test that failed midway)."""
    started: list[Served] = []

    def start(config: Path, env: dict[str, str] | None = None, *args: str) -> Served:
        started.append(Served(config, env, *args))
        return started[-1]

    try:
        yield start
    finally:
        for s in started:
            if s.proc.poll() is None:
                s.proc.kill()
                s.proc.wait()


class Readiness(threading.Thread):
    """Polls ``/readyz`` on ``port`` until stopped; ``statuses``: every answer's status (0: no answer)."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.statuses: list[int] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            try:
                self.statuses.append(get(self.port, "/readyz")[0])
            except OSError:
                self.statuses.append(0)

    def stop(self) -> list[int]:
        self.halt.set()
        self.join(timeout=60)
        return self.statuses
