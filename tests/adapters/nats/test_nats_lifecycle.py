"""The nats source's and sink's lifecycle against a real nats-server, as tests/sidecar/test_lifecycle_io.py runs every
registered component: build -> start -> a small batch -> stop/close, twice; the second run leaves no thread or
descriptor behind, and no log event quotes a record value. A server that is down: start and stop just the same."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import structlog
from helpers import find_leaks, wait_until
from helpers.natskit import output, pipeline, publish, record, sink, source

from sidecar.tools.bench.natsserver import NatsServer


def _resources() -> tuple[set[threading.Thread], set[tuple[int, str]]]:
    fds = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            fds.add((int(name), os.readlink(f"/proc/self/fd/{name}")))
        except FileNotFoundError:
            continue
    return {t for t in threading.enumerate() if t.is_alive()}, fds


def _no_leak(run: Callable[[Path], None], tmp_path: Path) -> None:
    run(tmp_path / "warm-up")
    threads, fds = _resources()
    run(tmp_path / "measured")

    def settled() -> bool:
        now_threads, now_fds = _resources()
        return not (now_threads - threads) and not (now_fds - fds)

    wait_until(settled, what="the run's threads and descriptors to close", timeout=20, interval=0.05)


def test_source_and_sink_lifecycle_leave_nothing_behind(nats_server: NatsServer, tmp_path: Path) -> None:
    def run(folder: Path) -> None:
        tag = folder.name.replace("-", "")
        publish(nats_server.url, [record(1), record(2)], partitions=1, stream=f"LC{tag}", prefix=f"lc{tag}.in")
        pipe = pipeline(folder)
        src = source(pipe, nats_server.url, stream=f"LC{tag}", subject_prefix=f"lc{tag}.in")
        out = sink(pipe, nats_server.url, subject=f"lc{tag}.out", stream=f"LC{tag}OUT", create_stream=True)
        try:
            src.start(pipe)
            wait_until(lambda: len(output(folder)) >= 2, what="the batch in the output")
            codec = pipe.ctx.codec_for("jsonl")
            assert codec is not None
            out.start(None, codec)
            with pipe.transaction():
                out.write(codec.decode_many([record(3)[1].decode()], "\n", []))
                out.flush()
            wait_until(lambda: out.stats().get("sent_events", 0) == 1, what="the sink's batch sent")
        finally:
            src.stop(grace=2)
            out.close()
            pipe.close()

    with structlog.testing.capture_logs() as logs:
        _no_leak(run, tmp_path)
    assert find_leaks(logs, ({"natsuser1", "natsuser2"}, ["nats kestrel query 1"], [])) == []


def test_a_server_that_is_down_starts_and_stops_cleanly(tmp_path: Path) -> None:
    with socket.socket() as down:
        down.bind(("127.0.0.1", 0))
        url = f"nats://127.0.0.1:{down.getsockname()[1]}"

        def run(folder: Path) -> None:
            pipe = pipeline(folder)
            src = source(pipe, url, connect_timeout_seconds=0.2)
            out = sink(pipe, url, connect_timeout_seconds=0.2, close_drain_seconds=0)
            try:
                src.start(pipe)  # stopped while it is connecting (each attempt waits connect_timeout_seconds)
            finally:
                src.stop(grace=1)
                out.close()
                pipe.close()

        _no_leak(run, tmp_path)
