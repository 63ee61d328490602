"""The ``forward`` source: a Fluentd forward protocol v1 server (what Fluentd's ``in_forward`` is).

* **One event loop, one worker.** Connections are asyncio streams on one event-loop thread: an
  idle connection is a suspended coroutine (a few kilobytes, no thread), so thousands of idle
  clients do not stop service. Complete messages go to one worker thread, which hands the entries
  of every connection waiting at that moment to ``runtime.receive`` in one batch (one transaction).
* **An ack is a promise.** ``{"ack": chunk}`` is written only after ``receive`` returned: the events
  are delivered, in a sink's durable outbox, durably held or dead-lettered. When ``receive`` raises
  (a full outbox, a full disk) nothing is acknowledged and the connection is closed: the client
  sends again. Before a batch goes to the chain the source asks :func:`sidecar.outbox.backpressure`;
  while a sink's outbox is full it stops reading from that connection (TCP backpressure) instead.
* **Bad peers cost only their connection.** Bytes that are not msgpack, a frame over
  ``max_frame_bytes``, a message of no known mode, a failed or late handshake: that connection is
  closed and counted by reason (:meth:`ForwardSource.stats`); other connections go on. A bad entry
  inside a good message is dead-lettered by reason and the message's other entries are taken.
* **Handshake** (with a shared key): HELO with a fresh nonce (and an auth salt when users are
  configured), the client's PING checked, PONG with the result; a failure is answered with a PONG
  that says so and the connection is closed. TLS wraps the whole exchange when configured.
* **Heartbeat**: UDP datagrams on the same port are answered as :func:`protocol.heartbeat_reply` says.

Logs and counters carry reasons and counts only, never a tag, a record value or a key.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import os
import queue
import socket
import ssl
import threading
from collections import Counter
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any, cast

import structlog

from adapters.forward.codec import ForwardCodec
from adapters.forward.config import ForwardSourceConfig, default_hostname, read_secret
from adapters.forward.protocol import (
    Entry,
    FrameDecoder,
    Message,
    ProtocolError,
    check_ping,
    heartbeat_reply,
    make_ack,
    make_helo,
    make_pong,
    parse_message,
    parse_ping,
)
from sidecar.api import BuildContext, ConfigValueError, Receipt, RecordBatch, Runtime, Source
from sidecar.outbox import backpressure

log = structlog.get_logger("querylog.forward")

ORIGIN = "forward"
READ_BYTES = 256 * 1024
#: A compressed message may expand to this many times ``max_frame_bytes``.
DECOMPRESSED_FACTOR = 16


def split_listen(listen: str) -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` too) as (host, port)."""
    host, _, port = listen.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass
class _Job:
    entries: list[Entry]
    bad: list[str]
    future: concurrent.futures.Future[Receipt] = field(default_factory=concurrent.futures.Future)


class _Worker:
    """The one thread that runs ``runtime.receive``: it merges what every connection has waiting into one batch."""

    def __init__(self, runtime: Runtime, codec: ForwardCodec, max_events: int) -> None:
        self.runtime = runtime
        self.codec = codec
        self.max_events = max_events
        self.queue: queue.SimpleQueue[_Job | None] = queue.SimpleQueue()
        self.batches = 0
        self.thread = threading.Thread(target=self._run, name="querylog-forward-worker", daemon=True)
        self.thread.start()

    def submit(self, entries: list[Entry], bad: list[str]) -> concurrent.futures.Future[Receipt]:
        job = _Job(entries, bad)
        self.queue.put(job)
        return job.future

    def stop(self, timeout: float | None) -> None:
        self.queue.put(None)
        self.thread.join(timeout)

    def _run(self) -> None:
        stop = False
        while not stop:
            job = self.queue.get()
            if job is None:
                return
            jobs = [job]
            n = len(job.entries)
            while n < self.max_events:
                try:
                    more = self.queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                jobs.append(more)
                n += len(more.entries)
            self._receive(jobs)

    def _receive(self, jobs: list[_Job]) -> None:
        try:
            dead = self.runtime.dead_letters
            for job in jobs:
                for reason in job.bad:
                    dead.add(reason, ORIGIN, None, None)
            records = [e for job in jobs for e in job.entries] if len(jobs) > 1 else jobs[0].entries
            if records:
                receipt = self.runtime.receive(RecordBatch(records, self.codec, ORIGIN))
            else:
                dead.flush()
                receipt = Receipt()
            self.batches += 1
        except BaseException as exc:
            for job in jobs:
                job.future.set_exception(exc)
            return
        for job in jobs:
            job.future.set_result(receipt)


class _Closed(Exception):
    """End a connection for ``reason`` (counted; logged unless it is an ordinary end)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


#: Ends of a connection that are not a problem (not logged above debug).
_ORDINARY = frozenset({"eof", "shutdown", "idle_timeout"})


class _Heartbeat(asyncio.DatagramProtocol):
    def __init__(self, source: ForwardSource) -> None:
        self.source = source
        self.transport: asyncio.DatagramTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.DatagramTransport, transport)

    def datagram_received(self, data: bytes, addr: tuple[str | Any, int]) -> None:
        reply = heartbeat_reply(data)
        if reply is not None and self.transport is not None:
            self.transport.sendto(reply, addr)
            self.source.count("heartbeats_answered")
        else:
            self.source.count("heartbeats_invalid")


class ForwardSource(Source[ForwardSourceConfig]):
    """Fluentd forward protocol v1 server: every message's entries through the chain, acked once durable."""

    NAME = "forward"
    Config = ForwardSourceConfig
    SUMMARY = "Fluentd forward protocol v1 server (in_forward): all modes, acks once durable, shared key, TLS"

    def __init__(self, config: ForwardSourceConfig, ctx: BuildContext, listen: str | None = None) -> None:
        super().__init__(config, ctx)
        self.listen = listen or config.listen
        self.shared_key: bytes | None = None
        if config.shared_key_env is not None or config.shared_key_file is not None:
            self.shared_key = read_secret(
                ctx, "shared_key_env", config.shared_key_env, "shared_key_file", config.shared_key_file, "shared key"
            )
        self.users: dict[str, bytes] = {}
        for i, user in enumerate(config.users):
            try:
                self.users[user.username] = read_secret(
                    ctx, "password_env", user.password_env, "password_file", user.password_file, "user password"
                )
            except ConfigValueError as exc:
                raise ConfigValueError(f"users[{i}].{exc.key}", exc.problem) from None
        self.self_hostname = config.self_hostname or default_hostname("in")
        self.ssl: ssl.SSLContext | None = None
        if config.tls_cert_file is not None and config.tls_key_file is not None:
            self.ssl = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            try:
                self.ssl.load_cert_chain(ctx.resolve(config.tls_cert_file), ctx.resolve(config.tls_key_file))
            except (OSError, ssl.SSLError) as exc:
                raise ConfigValueError(
                    "tls_cert_file", f"cannot load the TLS certificate/key: {type(exc).__name__}"
                ) from None
        self.codec = ForwardCodec(ctx.schema)
        self._counts: Counter[str] = Counter()
        self._counts_lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._udp: asyncio.DatagramTransport | None = None
        self._worker: _Worker | None = None
        self._runtime: Runtime | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._inflight = 0
        self._port = 0
        self._closing = False

    # ---- counters --------------------------------------------------------------------------------
    def count(self, key: str, n: int = 1) -> None:
        with self._counts_lock:
            self._counts[key] += n

    def stats(self) -> dict[str, int]:
        """Counts by name (connections, closes by reason, messages by mode, entries, acks...): no values."""
        with self._counts_lock:
            out = dict(self._counts)
        out["connections_open"] = len(self._writers)
        return out

    @property
    def port(self) -> int:
        """The bound TCP port (useful with ``listen: host:0``)."""
        return self._port

    # ---- lifecycle -------------------------------------------------------------------------------
    def start(self, runtime: Runtime) -> None:
        """Bind (TCP, and UDP for heartbeats) and serve on a thread of its own; returns once listening."""
        self._runtime = runtime
        self._worker = _Worker(runtime, self.codec, self.config.max_batch_events)
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="querylog-forward-loop", daemon=True)
        self._thread.start()
        try:
            self._call(self._bind())
        except BaseException:
            self._shutdown_loop()
            self._worker.stop(1.0)
            raise
        log.info(
            "forward_source_started",
            port=self._port,
            tls=self.ssl is not None,
            handshake=self.shared_key is not None,
            users=len(self.users),
            heartbeat=self.config.heartbeat,
        )

    def _call(self, coro: Coroutine[Any, Any, Any], timeout: float | None = None) -> Any:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout)

    async def _bind(self) -> None:
        host, port = split_listen(self.listen)
        self._server = await asyncio.start_server(
            self._handle,
            host,
            port,
            ssl=self.ssl,
            ssl_handshake_timeout=self.config.handshake_timeout_seconds if self.ssl else None,
            backlog=1024,
            reuse_address=True,
        )
        self._port = self._server.sockets[0].getsockname()[1]
        if self.config.heartbeat:
            loop = asyncio.get_running_loop()
            transport, _ = await loop.create_datagram_endpoint(lambda: _Heartbeat(self), local_addr=(host, self._port))
            self._udp = transport

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting; batches in the chain finish (acked) within ``grace`` seconds; then connections close."""
        if self._loop is None:
            return
        grace = 5.0 if grace is None else grace
        try:
            self._call(self._stop(grace), timeout=grace + 10)
        except (concurrent.futures.TimeoutError, RuntimeError):
            log.warning("forward_source_stop_timeout")
        if self._worker is not None:
            self._worker.stop(grace + 5)
        self._shutdown_loop()
        log.info("forward_source_stopped", **self.stats())

    async def _stop(self, grace: float) -> None:
        self._closing = True
        if self._server is not None:
            self._server.close()
        if self._udp is not None:
            self._udp.close()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + grace
        while self._inflight and loop.time() < deadline:
            await asyncio.sleep(0.02)
        for writer in list(self._writers):
            writer.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        if tasks:
            await asyncio.wait(tasks, timeout=2.0)
        for t in tasks:
            t.cancel()

    def _shutdown_loop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(10)
        if not loop.is_running():
            loop.close()
        self._loop = None
        self._thread = None

    # ---- one connection ------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing or len(self._writers) >= self.config.max_connections:
            self.count("closed_too_many_connections" if not self._closing else "closed_shutdown")
            writer.close()
            return
        self._writers.add(writer)
        self.count("connections_accepted")
        reason = "eof"
        try:
            sock = writer.get_extra_info("socket")
            if sock is not None and self.config.keepalive:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            await self._session(reader, writer)
        except _Closed as closed:
            reason = closed.reason
        except ProtocolError as exc:
            reason = exc.reason
        except (ConnectionError, asyncio.IncompleteReadError, ssl.SSLError, OSError):
            reason = "connection_error"
        except asyncio.CancelledError:
            reason = "shutdown"
        except Exception as exc:  # a bug: never let its message (which may quote a value) reach a log
            reason = "internal_error"
            log.error("forward_connection_failed", error=type(exc).__name__)
        finally:
            self._writers.discard(writer)
            self.count(f"closed_{reason}")
            if reason not in _ORDINARY:
                log.info("forward_connection_closed", reason=reason)
            with contextlib.suppress(Exception):
                writer.close()

    async def _read(self, reader: asyncio.StreamReader) -> bytes:
        timeout = self.config.idle_timeout_seconds or None
        try:
            async with asyncio.timeout(timeout):
                data = await reader.read(READ_BYTES)
        except TimeoutError:
            raise _Closed("idle_timeout") from None
        if not data:
            raise _Closed("eof")
        return data

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        decoder = FrameDecoder(self.config.max_frame_bytes)
        pending: list[Any] = []
        if self.shared_key is not None:
            pending = await self._handshake(reader, writer, decoder, self.shared_key)
        while True:
            if pending:
                await self._process(pending, writer)
            data = await self._read(reader)
            try:
                pending = decoder.feed(data)
            except ProtocolError as exc:  # the messages before the damage are still taken (and acked)
                if exc.objects:
                    await self._process(exc.objects, writer)
                raise

    async def _handshake(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, decoder: FrameDecoder, key: bytes
    ) -> list[Any]:
        nonce = os.urandom(16)
        auth_salt = os.urandom(16) if self.users else None
        writer.write(make_helo(nonce, auth_salt, self.config.keepalive))
        await writer.drain()
        objs: list[Any] = []
        try:
            async with asyncio.timeout(self.config.handshake_timeout_seconds):
                while not objs:
                    data = await reader.read(READ_BYTES)
                    if not data:
                        raise _Closed("eof_in_handshake")
                    objs = decoder.feed(data)
        except TimeoutError:
            raise _Closed("handshake_timeout") from None
        ping = parse_ping(objs[0])
        failure = check_ping(
            ping, nonce=nonce, shared_key=key, self_hostname=self.self_hostname, auth_salt=auth_salt, users=self.users
        )
        writer.write(make_pong(failure is None, failure or "", self.self_hostname, ping.salt, nonce, key))
        await writer.drain()
        if failure is not None:
            self.count(f"auth_failed_{failure}")
            raise _Closed("auth_failed")
        self.count("handshakes")
        return objs[1:]

    async def _process(self, objs: list[Any], writer: asyncio.StreamWriter) -> None:
        max_decompressed = self.config.max_frame_bytes * DECOMPRESSED_FACTOR
        messages: list[Message] = []
        error: ProtocolError | None = None
        for obj in objs:
            try:
                messages.append(parse_message(obj, max_decompressed))
            except ProtocolError as exc:  # the messages before it are taken; then the connection closes
                error = exc
                break
        entries: list[Entry] = []
        bad: list[str] = []
        for m in messages:
            self.count(f"messages_{m.mode}")
            if m.size is not None and m.size != len(m.entries) + len(m.bad):
                self.count("size_mismatch")
            entries.extend(m.entries)
            bad.extend(m.bad)
        if entries or bad:
            await self._wait_for_room()
            assert self._worker is not None
            self._inflight += 1
            try:
                await asyncio.wrap_future(self._worker.submit(entries, bad))
            except Exception as exc:  # the runtime could not take them: no ack, the client sends again
                log.warning("forward_receive_failed", error=type(exc).__name__, entries=len(entries))
                raise _Closed("receive_failed") from None
            finally:
                self._inflight -= 1
            self.count("entries", len(entries))
            if bad:
                self.count("entries_dead_lettered", len(bad))
        acks = [make_ack(m.chunk) for m in messages if m.chunk is not None]
        if acks:
            writer.write(b"".join(acks))
            await writer.drain()
            self.count("acks", len(acks))
        if error is not None:
            raise error

    async def _wait_for_room(self) -> None:
        """Stop reading while a sink's outbox is full (the client's unacknowledged batches wait with it)."""
        assert self._runtime is not None
        full = backpressure(self._runtime.sinks)
        if full is None:
            return
        self.count("backpressure_waits")
        delay = 0.05
        while full is not None:
            if self._closing:
                raise _Closed("shutdown")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
            full = backpressure(self._runtime.sinks)
