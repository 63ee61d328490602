"""A server source and a network sink written from the contract page alone (``line_server`` and ``line_peer`` of
``example_plugins/querylog_examples_net.py``), registered through entry points and run end to end: through
``querylog serve`` (the peer down for a while and a restart in between: nothing lost, nothing out of order) and
through the runtime (an answer only after ``receive`` returned; ``busy`` while the outbox is full; bad records
dead-lettered without the good ones of their batch)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import select
import signal
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import QUERYLOG, cli_env, wait_until

from sidecar.api import SOURCES, Receipt, RecordBatch, Source
from sidecar.config import load_config
from sidecar.pipeline import Pipeline
from sidecar.registry import plugins

LINES = [
    json.dumps({"AnonID": str(i), "Query": f"query {i}", "QueryTime": "2006-03-01 07:17:12"}, separators=(",", ":"))
    for i in range(8)
]
FAST = {"retry_initial_seconds": 0.05, "retry_max_seconds": 0.2, "close_drain_seconds": 0}


class Peer:
    """A tiny TCP peer speaking the line protocol. Its socket is bound at once (the port is known) but it is down
    — connections are refused — until :meth:`up`; then it answers ``ok`` to every batch and keeps the lines."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port: int = self.sock.getsockname()[1]
        self.batches: list[list[str]] = []
        self.changed = threading.Condition()

    def up(self) -> None:
        self.sock.listen()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as stream:
            batch: list[str] = []
            for line in stream:
                if line != b"\n":
                    batch.append(line.decode().rstrip("\n"))
                    continue
                with self.changed:
                    self.batches.append(batch)
                    self.changed.notify_all()
                conn.sendall(f"ok {len(batch)} 0\n".encode())
                batch = []

    def lines(self) -> list[str]:
        with self.changed:
            return [line for batch in self.batches for line in batch]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()


class Client:
    """A client of ``line_server``: a batch is lines and an empty line; one answer line per batch."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        self.answers = self.sock.makefile("rb")

    def send(self, lines: list[str] | list[bytes]) -> None:
        self.sock.sendall(b"".join((x if isinstance(x, bytes) else x.encode()) + b"\n" for x in lines) + b"\n")

    def answer(self) -> str:
        return self.answers.readline().decode().strip()

    def batch(self, lines: list[str] | list[bytes]) -> str:
        self.send(lines)
        return self.answer()

    def close(self) -> None:
        self.answers.close()
        self.sock.close()


@pytest.fixture
def peer() -> Iterator[Peer]:
    p = Peer()
    yield p
    p.close()


def write_config(folder: Path, peer: Peer, **sink: Any) -> Path:
    """JSON lines from a ``line_server`` source (port 0) to a ``line_peer`` sink, no filter (passthrough)."""
    options = {"address": f"127.0.0.1:{peer.port}", **FAST, **sink}
    body = {
        "state_dir": "state",
        "schema": {"format": "jsonl"},
        "sources": [{"line_server": {"listen": "127.0.0.1:0"}}],
        "sinks": [{"line_peer": options}],
    }
    path = folder / "net.yaml"
    path.write_text(json.dumps(body), encoding="utf-8")  # JSON is YAML
    return path


class Served:
    """``querylog serve`` in a subprocess; its port read from its ``listening`` log event."""

    def __init__(self, config: Path, pythonpath: list[Path]) -> None:
        path = os.pathsep.join([*map(str, pythonpath), os.environ.get("PYTHONPATH", "")])
        self.proc = subprocess.Popen(
            [QUERYLOG, "serve", "--config", str(config)],
            env=cli_env(PYTHONPATH=path),
            stderr=subprocess.PIPE,
            text=True,
        )
        self.log: list[str] = []
        self._listening: queue.Queue[dict[str, Any]] = queue.Queue()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        event = self._listening.get(timeout=120)
        assert event, "serve ended before listening:\n" + "".join(self.log)[-3000:]
        self.port = int(event["port"])

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.log.append(line)
            with contextlib.suppress(ValueError):
                event = json.loads(line)
                if isinstance(event, dict) and event.get("event") == "listening":
                    self._listening.put(event)
        self._listening.put({})

    def stop(self) -> None:
        """SIGTERM; serve drains and exits 0."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        code = self.proc.wait(120)
        self._reader.join()
        assert code == 0, "".join(self.log)[-3000:]


@pytest.mark.slow  # two `querylog serve` processes: about 3 seconds each
def test_serve_through_a_peer_outage_and_a_restart(installed: list[Path], peer: Peer, tmp_path: Path) -> None:
    """``querylog serve`` with the third-party source and sink: batches are acknowledged while the peer is down
    (durable in the outbox), a restart keeps them, and once the peer listens every line arrives, byte for byte and
    in order."""
    config = write_config(tmp_path, peer)
    first = Served(config, installed)
    try:
        client = Client(first.port)
        assert client.batch(LINES[:3]) == "ok 3 0"
        assert client.batch(LINES[3:5]) == "ok 2 0"
        client.close()
    finally:
        first.stop()
    assert peer.lines() == []
    second = Served(config, installed)
    try:
        client = Client(second.port)
        assert client.batch(LINES[5:]) == "ok 3 0"
        client.close()
        peer.up()
        wait_until(lambda: len(peer.lines()) >= len(LINES), what="every line at the peer")
        assert peer.lines() == LINES
    finally:
        second.stop()


class Gate:
    """The runtime, whose ``receive`` waits while the gate is held: shows when the source answers."""

    def __init__(self, runtime: Pipeline) -> None:
        self.runtime = runtime
        self.entered = threading.Event()
        self.open = threading.Event()
        self.open.set()

    def receive(self, batch: RecordBatch) -> Receipt:
        self.entered.set()
        assert self.open.wait(30)
        return self.runtime.receive(batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.runtime, name)


@pytest.fixture
def served_in_process(installed: list[Path], tmp_path: Path) -> Iterator[Callable[..., tuple[Source[Any], Gate]]]:
    """``serve(peer, **sink_options)``: the runtime of :func:`write_config`'s config and a started ``line_server``
    source driving it through a :class:`Gate`."""
    made: list[tuple[Source[Any], Pipeline]] = []

    def serve(peer: Peer, **sink: Any) -> tuple[Source[Any], Gate]:
        pipeline = Pipeline(load_config(write_config(tmp_path, peer, **sink)))
        source_cls = plugins(SOURCES)["line_server"]
        source = source_cls(source_cls.Config(listen="127.0.0.1:0"), pipeline.ctx)
        gate = Gate(pipeline)
        source.start(gate)
        made.append((source, pipeline))
        return source, gate

    yield serve
    for source, pipeline in made:
        source.stop()
        pipeline.close()


def test_answers_only_after_receive_returned_and_busy_while_the_outbox_is_full(
    served_in_process: Callable[..., tuple[Source[Any], Gate]], peer: Peer
) -> None:
    """No answer while the batch is in the runtime; ``ok`` once ``receive`` returned. With the peer down and an
    outbox of one batch, the next batch is answered ``busy`` (Backpressure: nothing ran); once the peer is up and
    the outbox drained, the same batch is taken, and the peer gets every line once."""
    source, gate = served_in_process(peer, outbox_max_batches=1)
    (address,) = source.listening()
    assert address.port != 0
    client = Client(address.port)
    gate.open.clear()
    client.send(LINES[:2])
    assert gate.entered.wait(30)
    assert select.select([client.sock], [], [], 0)[0] == []  # in the runtime: nothing acknowledged yet
    gate.open.set()
    assert client.answer() == "ok 2 0"

    answer = client.batch(LINES[2:4])
    assert answer.startswith("busy line_peer_127_0_0_1_")
    peer.up()
    (sink,) = gate.runtime.sinks
    assert sink.outbox.drain(30)  # the example sink's outbox
    assert client.batch(LINES[2:4]) == "ok 2 0"
    wait_until(lambda: len(peer.lines()) >= 4, what="4 lines at the peer")
    assert peer.lines() == LINES[:4]
    assert source.stats()["busy"] == 1  # the example source's counters
    client.close()


def test_bad_records_are_dead_lettered_without_the_good_ones(
    served_in_process: Callable[..., tuple[Source[Any], Gate]], peer: Peer
) -> None:
    """A line longer than limits.max_record_bytes and one that is not UTF-8 are dead-lettered by reason; the good
    lines of the same batch are delivered."""
    peer.up()
    source, gate = served_in_process(peer)
    client = Client(source.listening()[0].port)
    batch = [LINES[0].encode(), b"x" * 70_000, b"\xff\xfe not utf-8", LINES[1].encode()]
    assert client.batch(batch) == "ok 2 2"
    wait_until(lambda: len(peer.lines()) >= 2, what="2 lines at the peer")
    assert peer.lines() == LINES[:2]
    assert gate.runtime.dead.counts == {"oversized_record": 1, "invalid_utf8": 1}
    client.close()
