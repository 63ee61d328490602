"""The host of asynchronous servers (sidecar/serving.py): start and bound addresses, workers, the inline path
that only tries the runtime's lock, stop with grace, counters. A line protocol over asyncio streams stands in
for a real server: each line is answered with its upper-case form, worked on by the host's workers."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Callable
from typing import Any

import pytest
from helpers import wait_until

from sidecar.api import Listen
from sidecar.serving import ServerHost


class Upper:
    """A protocol: one line in, its upper-case form out, via ``host.work`` (or ``worker`` for every line)."""

    def __init__(self, work: Callable[[bytes], bytes] | None = None, port: int = 0) -> None:
        self.work = work or (lambda line: line.upper())
        self.port = port
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    async def start(self, host: ServerHost) -> list[Listen]:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            host.count("connections_accepted")
            self.writers.add(writer)
            try:
                while line := await reader.readline():
                    with host.track():
                        answer = await host.work(self.work, len(line), line)
                    writer.write(answer)
                    await writer.drain()
                    host.count("requests_ok")
            except asyncio.CancelledError:  # the host's stop ends what outlived the grace
                host.count("connections_cut")
            finally:
                self.writers.discard(writer)
                writer.close()

        self.server = await asyncio.start_server(handle, "127.0.0.1", self.port)
        return [Listen("127.0.0.1", self.server.sockets[0].getsockname()[1])]

    async def stop(self, host: ServerHost, grace: float) -> None:
        assert self.server is not None
        self.server.close()
        await host.drain(grace)
        for writer in list(self.writers):
            writer.close()


def _ask(port: int, line: bytes = b"hello\n", timeout: float = 10) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(line)
        return s.makefile("rb").readline()


def test_start_reports_the_bound_port_and_serves() -> None:
    """`listen` port 0 is resolved: start() returns the bound address; requests are answered and counted; stop()
    closes the loop (the host is no longer running) and a second stop is a no-op."""
    host = ServerHost("t")
    (addr,) = host.start(Upper())
    try:
        assert addr.port > 0 and host.listening == [addr]
        assert _ask(addr.port) == b"HELLO\n"
        # the handler counts after its answer is drained: the client may read it first
        wait_until(lambda: host.stats().get("requests_ok") == 1, what="the request counted")
        assert host.stats()["requests_ok"] == 1 and host.stats()["connections_accepted"] == 1
    finally:
        host.stop(1.0)
    assert not host.running
    host.stop(1.0)


def test_a_port_in_use_fails_start_and_leaves_no_loop() -> None:
    """A protocol whose bind fails: start() raises the OSError and closes its loop thread."""
    first = ServerHost("a")
    (addr,) = first.start(Upper())
    try:
        second = ServerHost("b")
        with pytest.raises(OSError):
            second.start(Upper(port=addr.port))
        assert not second.running
    finally:
        first.stop(1.0)


def test_run_in_worker_runs_on_a_bounded_pool_off_the_loop() -> None:
    """Calls run on worker threads named after the host, never on the loop, at most `workers` at a time."""
    host = ServerHost("pool", workers=2)
    host.start(Upper())
    gate, lock = threading.Event(), threading.Lock()
    running: list[int] = []
    names: list[str] = []
    most = 0

    def job() -> None:
        nonlocal most
        with lock:
            running.append(1)
            most = max(most, len(running))
            names.append(threading.current_thread().name)
        gate.wait(10)
        with lock:
            running.pop()

    async def four() -> None:
        calls = [asyncio.ensure_future(host.run_in_worker(job)) for _ in range(4)]
        await asyncio.sleep(0)  # let them queue
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: wait_until(lambda: len(names) == 2, what="two jobs running")
        )
        gate.set()
        await asyncio.gather(*calls)

    try:
        host.call(four(), timeout=30)
    finally:
        host.stop(1.0)
    assert most == 2 and len(names) == 4
    assert all(n.startswith("querylog-pool") and not n.endswith("-loop") for n in names)


def test_a_cheap_call_runs_on_the_loop_only_when_the_lock_is_free() -> None:
    """Once a call measured cheap, the next runs on the loop thread itself; while another thread holds the lock,
    the loop does not wait for it: the call goes to a worker (which waits there) and the loop keeps answering."""
    lock = threading.RLock()
    where: list[str] = []

    def work(line: bytes) -> bytes:
        with lock:
            where.append(threading.current_thread().name)
        return line.upper()

    host = ServerHost("inline", lock=lock)
    (addr,) = host.start(Upper(work))
    try:
        assert _ask(addr.port) == b"HELLO\n"  # measured (on a worker: no estimate yet)
        assert _ask(addr.port) == b"HELLO\n"  # cheap now: on the loop
        assert not where[0].endswith("-loop")
        assert where[1] == "querylog-inline-loop"
        with lock:  # another source's batch holds the runtime's lock
            answer: list[bytes] = []
            asker = threading.Thread(target=lambda: answer.append(_ask(addr.port)))
            asker.start()
            wait_until(lambda: host.inflight == 1, what="one call in flight")
            assert host.call(asyncio.sleep(0, "loop free"), timeout=5) == "loop free"
        asker.join(10)
        assert answer == [b"HELLO\n"]
        assert not where[2].endswith("-loop")
    finally:
        host.stop(1.0)


def test_stop_lets_inflight_requests_finish_within_grace() -> None:
    """stop(grace) while a request is being worked on: new connections are refused at once, the request is
    answered once its work finishes (within the grace), then the host stops."""
    entered, release = threading.Event(), threading.Event()

    def slow(line: bytes) -> bytes:
        entered.set()
        assert release.wait(10)
        return line.upper()

    host = ServerHost("grace")
    (addr,) = host.start(Upper(slow))
    answer: list[bytes] = []
    asker = threading.Thread(target=lambda: answer.append(_ask(addr.port)))
    asker.start()
    assert entered.wait(10)
    stopper = threading.Thread(target=host.stop, args=(30.0,))
    stopper.start()
    wait_until(lambda: _refused(addr.port), what="the port to refuse connections")
    release.set()
    asker.join(10)
    stopper.join(10)
    assert answer == [b"HELLO\n"]
    assert not stopper.is_alive() and not host.running


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    except OSError:
        return True
    return False


def test_stop_cancels_what_outlives_the_grace() -> None:
    """A handler still waiting when the grace ends is cancelled (its client gets no answer) and stop returns;
    the worker call already running is let finish, never abandoned mid-batch."""
    entered, release = threading.Event(), threading.Event()
    finished: list[bool] = []

    def stuck(line: bytes) -> bytes:
        entered.set()
        release.wait(10)
        finished.append(True)
        return line

    host = ServerHost("cut")
    (addr,) = host.start(Upper(stuck))
    got: list[Any] = []

    def ask() -> None:
        try:
            got.append(_ask(addr.port))
        except OSError as exc:
            got.append(exc)

    asker = threading.Thread(target=ask)
    asker.start()
    assert entered.wait(10)
    stopper = threading.Thread(target=host.stop, args=(0.05,))
    stopper.start()
    asker.join(10)  # the grace ended: the connection was closed without an answer
    assert got == [b""] or isinstance(got[0], OSError)
    assert stopper.is_alive() and not finished  # the stop waits for the worker call already running
    release.set()
    stopper.join(10)
    assert not stopper.is_alive() and finished == [True] and not host.running
