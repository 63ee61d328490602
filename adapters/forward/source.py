"""The ``forward`` source: a Fluentd forward protocol v1 server (what Fluentd's ``in_forward`` is).

* **On the shared host** (:mod:`sidecar.serving`): connections are asyncio streams on the host's event
  loop: an idle connection is a suspended coroutine (a few kilobytes, no thread), so thousands of idle
  clients do not stop service. The entries of every connection waiting at a moment go to
  ``runtime.receive`` in one batch (one transaction) through the host's worker, one batch at a time.
* **An ack is a promise.** ``{"ack": chunk}`` is written only after ``receive`` returned: the events
  are delivered, in a sink's durable outbox, durably held or dead-lettered. When ``receive`` raises
  (a full outbox, a full disk) nothing is acknowledged and the connection is closed: the client
  sends again. Before a batch goes to the chain the source asks ``runtime.backpressure()``; while a
  sink's outbox is full it stops reading from that connection (TCP backpressure) instead.
* **Bad peers cost only their connection.** Bytes that are not msgpack, a frame over
  ``max_frame_bytes``, a compressed message expanding past ``max_decompressed_bytes``, a message of no
  known mode, a failed or late handshake: that connection is closed and counted by reason
  (:meth:`ForwardSource.stats`); other connections go on. A bad entry inside a good message is
  dead-lettered by reason and the message's other entries are taken; past ``max_bad_entries`` the rest of
  the message is not read and one dead letter (``too_many_bad_entries``) gives the counts.
* **One message or connection has a bounded cost.** Frames are read :data:`READ_BYTES` at a time; messages
  over :data:`INLINE_BYTES` (or compressed) are parsed on the host's parse worker while the loop serves the
  others. Partial frames of all connections hold ``max_partial_frames_bytes`` at most: past it, the connection
  whose partial frame has been idle longest is closed (``closed_partial_frame_budget``).
* **Handshake** (with a shared key): HELO with a fresh nonce (and an auth salt with users), the PING
  checked, PONG with the result (a failure closes the connection). TLS wraps it all when configured (with a
  client CA: mutual TLS). UDP heartbeats on the same port are answered as :func:`protocol.heartbeat_reply` says.

Logs and counters carry reasons and counts only, never a tag, a record value or a key.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import ssl
from typing import Any, cast

import structlog

from adapters.forward.batcher import Bad, Batcher
from adapters.forward.codec import ForwardCodec
from adapters.forward.config import ForwardSourceConfig, default_hostname, read_secret, read_shared_key
from adapters.forward.protocol import (
    TOO_MANY_BAD_ENTRIES,
    Entry,
    FrameBudget,
    FrameDecoder,
    Framing,
    Message,
    ProtocolError,
    check_ping,
    heartbeat_reply,
    make_ack,
    make_helo,
    make_pong,
    parse_message,
    parse_ping,
    parse_weight,
)
from sidecar.api import BuildContext, Codec, ConfigValueError, Listen, Runtime, Source, client_authentication
from sidecar.serving import ServerHost, ssl_server_context

log = structlog.get_logger("querylog.forward")

READ_BYTES = 256 * 1024
#: Messages of a read weighing more than this (:func:`protocol.parse_weight`) are parsed on the parse worker; a
#: lighter parse (a few ms at most) runs on the loop. At 64 KiB every 1,000-entry message of ``querylog bench
#: forward`` went through the worker; with the outbox's shrink interval (:mod:`sidecar.vacuum`) this change took the
#: bench from 0.96x to 1.02x of the pre-runtime code (5 interleaved rounds).
INLINE_BYTES = 1024 * 1024
BACKLOG = 1024


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


class _Hosted:
    """The source's server as the host runs it (:class:`sidecar.serving.ServerProtocol`)."""

    def __init__(self, source: ForwardSource) -> None:
        self.source = source

    async def start(self, host: ServerHost) -> list[Listen]:
        return await self.source._bind(host)

    async def stop(self, host: ServerHost, grace: float) -> None:
        await self.source._stop(host, grace)


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
            self.shared_key = read_shared_key(ctx, config.shared_key_env, config.shared_key_file)
        self.users: dict[str, bytes] = {}
        for i, user in enumerate(config.users):
            try:
                self.users[user.username] = read_secret(
                    ctx, "password_env", user.password_env, "password_file", user.password_file, "user password"
                )
            except ConfigValueError as exc:
                raise ConfigValueError(f"users[{i}].{exc.key}", exc.problem) from None
        self.self_hostname = config.self_hostname or default_hostname("in")
        self.ssl = ssl_server_context(config, ctx)
        own = ctx.codec_for(ctx.schema.format) if ctx.schema is not None else None  # format: ubi reads the maps
        self.codec: Codec = own if own is not None and getattr(own, "json_records", False) else ForwardCodec(ctx.schema)
        self._host: ServerHost | None = None
        self._batcher: Batcher | None = None
        self._runtime: Runtime | None = None
        self._server: asyncio.Server | None = None
        self._udp: asyncio.DatagramTransport | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._frames = FrameBudget(config.max_partial_frames_bytes)
        self._closing = False

    # ---- counters --------------------------------------------------------------------------------
    def count(self, key: str, n: int = 1) -> None:
        if self._host is not None:
            self._host.count(key, n)

    def stats(self) -> dict[str, int]:
        """Counts by name (connections, closes by reason, messages by mode, entries, acks...): no values."""
        out = self._host.stats() if self._host is not None else {}
        out["connections_open"] = len(self._writers)
        out["partial_frame_bytes"] = self._frames.total
        return out

    def authentication(self) -> list[str]:
        """How a client proves itself: ``mtls`` (client certificates), ``shared_key`` (the forward handshake)."""
        return client_authentication(
            mtls=self.config.tls_client_ca_file is not None, shared_key=self.shared_key is not None
        )

    def listening(self) -> list[Listen]:
        return list(self._host.listening) if self._host is not None else []

    @property
    def port(self) -> int:
        """The bound TCP port (useful with ``listen: host:0``)."""
        return self._host.listening[0].port if self._host is not None and self._host.listening else 0

    # ---- lifecycle -------------------------------------------------------------------------------
    def start(self, runtime: Runtime) -> None:
        """Bind (TCP, and UDP for heartbeats) and serve on the shared host; returns once listening."""
        self._runtime = runtime
        self._closing = False
        # two workers: the batcher occupies one for the source's lifetime (one batch at a time), the other parses
        # large messages off the loop, one at a time
        self._host = ServerHost("forward", workers=2, lock=runtime.lock)
        self._batcher = Batcher(self._host, runtime, self.codec, self.config.max_batch_events)
        self._host.start(_Hosted(self))
        log.info(
            "forward_source_started",
            port=self.port,
            tls=self.ssl is not None,
            mutual_tls=self.config.tls_client_ca_file is not None,
            handshake=self.shared_key is not None,
            users=len(self.users),
            heartbeat=self.config.heartbeat,
        )

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting; batches in the chain finish (acked) within ``grace`` seconds; then connections close."""
        if self._host is None or not self._host.running:
            return
        self._host.stop(5.0 if grace is None else grace)
        log.info("forward_source_stopped", **self.stats())

    async def _bind(self, host: ServerHost) -> list[Listen]:
        listen = Listen.parse(self.listen)
        self._server = await asyncio.start_server(
            self._handle,
            listen.host,
            listen.port,
            ssl=self.ssl,
            ssl_handshake_timeout=self.config.handshake_timeout_seconds if self.ssl else None,
            backlog=BACKLOG,
            reuse_address=True,
        )
        port = int(self._server.sockets[0].getsockname()[1])
        if self.config.heartbeat:
            loop = asyncio.get_running_loop()
            transport, _ = await loop.create_datagram_endpoint(lambda: _Heartbeat(self), local_addr=(listen.host, port))
            self._udp = transport
        assert self._batcher is not None
        self._batcher.start()
        return [Listen(str(sock.getsockname()[0]), int(sock.getsockname()[1])) for sock in self._server.sockets]

    async def _stop(self, host: ServerHost, grace: float) -> None:
        self._closing = True
        try:
            if self._server is not None:
                self._server.close()
            if self._udp is not None:
                self._udp.close()
            await host.drain(grace)  # the batches in the chain are acked
        finally:
            if self._batcher is not None:
                self._batcher.close()  # frees the host's worker; what was not taken by now is never acked
        for writer in list(self._writers):
            writer.close()

    # ---- one connection ------------------------------------------------------------------------
    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self._closing or len(self._writers) >= self.config.max_connections:
            self.count("closed_too_many_connections" if not self._closing else "closed_shutdown")
            writer.close()
            return
        self._writers.add(writer)
        self.count("connections_accepted")
        conn = Framing(FrameDecoder(self.config.max_frame_bytes), writer.transport.abort)
        reason = "eof"
        try:
            sock = writer.get_extra_info("socket")
            if sock is not None and self.config.keepalive:
                with contextlib.suppress(OSError):
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            await self._session(reader, conn, writer)
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
            if conn.evicted:  # whatever its task saw of the abort
                reason = "partial_frame_budget"
            self._frames.forget(conn)
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

    def _feed(self, conn: Framing, data: bytes) -> list[Any]:
        """What ``data`` completes; ``conn``'s partial frame counted in the budget (which may close connections)."""
        objs = self._frames.feed(conn, data, asyncio.get_running_loop().time())
        if conn.evicted:  # its own frame was the one over the budget
            raise _Closed("partial_frame_budget")
        return objs

    async def _session(self, reader: asyncio.StreamReader, conn: Framing, writer: asyncio.StreamWriter) -> None:
        pending: list[Any] = []
        if self.shared_key is not None:
            pending = await self._handshake(reader, conn, writer, self.shared_key)
        while True:
            if pending:
                await self._process(pending, writer)
            data = await self._read(reader)
            try:
                pending = self._feed(conn, data)
            except ProtocolError as exc:  # the messages before the damage are still taken (and acked)
                if exc.objects:
                    await self._process(exc.objects, writer)
                raise

    async def _handshake(
        self, reader: asyncio.StreamReader, conn: Framing, writer: asyncio.StreamWriter, key: bytes
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
                    objs = self._feed(conn, data)
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

    def _parse(self, objs: list[Any]) -> tuple[list[Message], ProtocolError | None]:
        """The messages of ``objs`` up to the first that is none (returned as the error)."""
        messages: list[Message] = []
        for obj in objs:
            try:
                messages.append(parse_message(obj, self.config.max_decompressed_bytes, self.config.max_bad_entries))
            except ProtocolError as exc:  # the messages before it are taken; then the connection closes
                return messages, exc
        return messages, None

    async def _process(self, objs: list[Any], writer: asyncio.StreamWriter) -> None:
        assert self._host is not None
        if sum(parse_weight(obj) for obj in objs) <= INLINE_BYTES:
            messages, error = self._parse(objs)
        else:  # decompressing or a long parse: on the parse worker, the loop serves the others meanwhile
            self.count("messages_parsed_aside")
            messages, error = await self._host.run_in_worker(self._parse, objs)
        entries: list[Entry] = []
        bad: list[Bad] = []
        for m in messages:
            self.count(f"messages_{m.mode}")
            if m.size is not None and m.size != len(m.entries) + len(m.bad):
                self.count("size_mismatch")
            entries.extend(m.entries)
            bad.extend((reason, None) for reason in m.bad)
            if m.cut is not None:
                bad.append((TOO_MANY_BAD_ENTRIES, m.cut))
                self.count("messages_cut")
        if entries or bad:
            await self._wait_for_room()
            assert self._batcher is not None and self._host is not None
            with self._host.track():
                try:
                    await self._batcher.submit(entries, bad)
                except Exception as exc:  # the runtime could not take them: no ack, the client sends again
                    log.warning("forward_receive_failed", error=type(exc).__name__, entries=len(entries))
                    raise _Closed("receive_failed") from None
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
        full = self._runtime.backpressure()
        if full is None:
            return
        self.count("backpressure_waits")
        delay = 0.05
        while full is not None:
            if self._closing:
                raise _Closed("shutdown")
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)
            full = self._runtime.backpressure()
