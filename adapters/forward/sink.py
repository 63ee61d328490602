"""The ``forward`` sink: events out as PackedForward messages through a durable outbox (Fluentd's ``out_forward``).

* ``write`` encodes each event as its forward entry (an event that came in over forward keeps its
  tag, its time as given and every key; only protected fields change) and groups the packed
  entries by tag.
* ``flush`` — the delivery point — turns the groups into PackedForward messages (gzip-compressed
  with ``compress: gzip``; split at ``max_message_bytes``), each with a fresh ``chunk`` id when
  ``require_ack`` is on, and puts them as one batch into the sink's outbox (``ctx.outbox``, the
  contract's :class:`~sidecar.api.Outbox`) inside the runtime's transaction. When ``flush`` returns
  the batch is durable with the rest of the state: sources may acknowledge.
* The outbox's sender thread delivers batches in order with :class:`ForwardClient`: connect
  (TLS optional), answer the server's HELO with a PING when a shared key is configured and check
  its PONG, write the messages, and wait for an ``{"ack": chunk}`` for every one of them; any
  failure closes the connection and the batch is sent again after a backoff (the same chunk ids: a
  server that saw them may drop the duplicates). At least once; a restart sends what was left.
* A full outbox makes ``flush`` raise :class:`~sidecar.api.Backpressure`: nothing is acknowledged
  upstream (the batch is not kept here; the sources' clients send it again).
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl
import threading
import time
from typing import Any

import structlog

from adapters.forward.codec import ForwardCodec
from adapters.forward.config import ForwardSinkConfig, default_hostname, read_secret, read_shared_key
from adapters.forward.protocol import (
    FrameDecoder,
    ProtocolError,
    ack_of,
    check_pong,
    make_ping,
    message_chunks,
    new_chunk_id,
    packed_forward,
    packer,
    parse_helo,
)
from sidecar.api import BuildContext, Codec, ConfigValueError, Event, Outbox, Sink

log = structlog.get_logger("querylog.forward")

#: Largest server answer frame (HELO, PONG, acks are tiny).
_ANSWER_FRAME_BYTES = 1024 * 1024


class ForwardClient:
    """One connection to a forward server, used by the outbox's sender thread only (``abort`` from any thread)."""

    def __init__(
        self,
        config: ForwardSinkConfig,
        ctx: BuildContext,
        shared_key: bytes | None,
        password: bytes | None,
    ) -> None:
        self.config = config
        host, _, port = config.address.rpartition(":")
        self.host, self.port = host.strip("[]"), int(port)
        self.shared_key = shared_key
        self.password = password or b""
        self.self_hostname = config.self_hostname or default_hostname("out")
        self.ssl: ssl.SSLContext | None = None
        if config.tls:
            try:
                cafile = str(ctx.resolve(config.tls_ca_file)) if config.tls_ca_file else None
                self.ssl = ssl.create_default_context(cafile=cafile)
            except (OSError, ssl.SSLError) as exc:
                raise ConfigValueError("tls_ca_file", f"cannot load the CA file: {type(exc).__name__}") from None
            if not config.tls_verify:
                self.ssl.check_hostname = False
                self.ssl.verify_mode = ssl.CERT_NONE
        self.sock: socket.socket | None = None
        self.decoder = FrameDecoder(_ANSWER_FRAME_BYTES)
        self._pending: list[Any] = []  # answers read but not used yet
        self.connects = 0
        self.handshake_failures = 0
        self._lock = threading.Lock()  # sock: abort() from another thread
        self._closing = threading.Event()

    # ---- the outbox's send callable --------------------------------------------------------------
    def send(self, payload: bytes) -> None:
        """Deliver one batch (a stream of forward messages); returns once every chunk is acked (or written)."""
        if self._closing.is_set():
            raise ConnectionAbortedError("the sink is closing")  # the batch stays in the outbox for the next start
        chunks = set(message_chunks(payload)) if self.config.require_ack else set()
        sock = self._connection()
        try:
            sock.settimeout(self.config.ack_timeout_seconds)
            sock.sendall(payload)
            if chunks:
                self._await_acks(sock, chunks)
        except BaseException:
            self.close()
            raise
        if not self.config.keepalive:
            self.close()

    def _connection(self) -> socket.socket:
        with self._lock:
            sock = self.sock
        if sock is not None and self._peer_closed(sock):
            self.close()
            sock = None
        if sock is None:
            sock = self._connect()
            with self._lock:
                self.sock = sock
        return sock

    def _connect(self) -> socket.socket:
        timeout = self.config.connect_timeout_seconds
        raw = socket.create_connection((self.host, self.port), timeout=timeout)
        try:
            raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            raw.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
            sock: socket.socket = raw
            if self.ssl is not None:
                sock = self.ssl.wrap_socket(raw, server_hostname=self.config.tls_server_name or self.host)
            self.decoder = FrameDecoder(_ANSWER_FRAME_BYTES)
            self._pending = []
            if self.shared_key is not None:
                self._handshake(sock, self.shared_key, time.monotonic() + timeout)
        except BaseException:
            raw.close()
            raise
        self.connects += 1
        return sock

    def _handshake(self, sock: socket.socket, key: bytes, deadline: float) -> None:
        try:
            helo = parse_helo(self._next_answer(sock, deadline))
            salt = new_chunk_id()
            sock.sendall(make_ping(self.self_hostname, salt, helo, key, self.config.username or "", self.password))
            check_pong(
                self._next_answer(sock, deadline),
                hostname=self.self_hostname,
                salt=salt,
                nonce=helo.nonce,
                shared_key=key,
            )
        except ProtocolError as exc:
            self.handshake_failures += 1
            log.warning("forward_sink_handshake_failed", reason=exc.reason, address_port=self.port)
            raise

    def _next_answer(self, sock: socket.socket, deadline: float) -> Any:
        pending = self._pending
        while not pending:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("no answer from the forward server in time")
            sock.settimeout(left)
            data = sock.recv(65536)
            if not data:
                raise ConnectionError("the forward server closed the connection")
            pending = self.decoder.feed(data)
        self._pending = pending[1:]
        return pending[0]

    def _await_acks(self, sock: socket.socket, chunks: set[str]) -> None:
        deadline = time.monotonic() + self.config.ack_timeout_seconds
        while chunks:
            obj = self._next_answer(sock, deadline)
            ack = ack_of(obj)
            if ack is None:
                raise ProtocolError("server_requires_handshake" if _is_helo(obj) else "unexpected_answer")
            chunks.discard(ack)

    def _peer_closed(self, sock: socket.socket) -> bool:
        """True when a kept connection was closed by the server (or is broken) while it was idle."""
        try:
            readable, _, _ = select.select([sock], [], [], 0)
            if not readable:
                return False
            sock.settimeout(0)
            data = sock.recv(65536)
        except (ssl.SSLWantReadError, BlockingIOError):
            return False
        except OSError:
            return True
        if not data:
            return True
        with contextlib.suppress(ProtocolError):  # late acks of a batch that timed out: nothing to do with them
            self._pending = [*self._pending, *self.decoder.feed(data)]
        return False

    def close(self) -> None:
        with self._lock:
            sock, self.sock = self.sock, None
        self._pending = []
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.close()

    def abort(self) -> None:
        """Refuse further sends and break one in progress (from another thread): its socket is shut down."""
        self._closing.set()
        with self._lock:
            sock = self.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


def _is_helo(obj: Any) -> bool:
    return type(obj) is list and len(obj) == 2 and obj[0] == "HELO"


class ForwardSink(Sink[ForwardSinkConfig]):
    """Events as PackedForward messages (acked chunks) through a durable, bounded outbox in the state database."""

    NAME = "forward"
    Config = ForwardSinkConfig
    SUMMARY = "Fluentd forward protocol v1 client (out_forward): PackedForward with acks via a durable outbox"

    def __init__(self, config: ForwardSinkConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        shared_key = None
        if config.shared_key_env is not None or config.shared_key_file is not None:
            shared_key = read_shared_key(ctx, config.shared_key_env, config.shared_key_file)
        password = None
        if config.password_env is not None or config.password_file is not None:
            password = read_secret(
                ctx, "password_env", config.password_env, "password_file", config.password_file, "password"
            )
        self.client = ForwardClient(config, ctx, shared_key, password)
        self.codec = ForwardCodec(ctx.schema, tag=config.tag)
        self._packer = packer()
        self._groups: dict[str, list[bytes]] = {}
        self._pending_events = 0
        #: events the sink could not encode (dead-lettered by reason, never sent)
        self.rejected = 0
        self.outbox: Outbox | None = None
        if ctx.validate_only:
            return
        self.outbox = ctx.outbox(config.outbox_name or f"forward_{config.address}", config)
        self.outbox.start(self.client.send)  # what an earlier run left undelivered goes out now

    def start(self, header: str | None, codec: Codec | None) -> None:
        """Nothing to do: the outbox's sender runs from the moment the sink is built."""

    def write(self, events: list[Event]) -> None:
        groups = self._groups
        pack = self._packer.pack
        own = self.codec
        n = 0
        unchanged = ForwardCodec.unchanged
        for ev in events:
            packed = unchanged(ev)
            if packed is not None:  # exactly as it came in: its own bytes
                tag = ev.record.tag
                parts = groups.get(tag)
                if parts is None:
                    parts = groups[tag] = []
                parts.append(packed)
                n += 1
                continue
            codec = ev.codec if isinstance(ev.codec, ForwardCodec) else own
            try:
                entry = codec.encode(ev)
                packed = pack([entry.time, entry.record])
            except (TypeError, ValueError, OverflowError):  # a value msgpack cannot carry (from another format)
                self.rejected += 1
                if self.ctx.dead_letters is not None:
                    self.ctx.dead_letters.add("unencodable_record", f"sink:{self.NAME}", None, None)
                continue
            parts = groups.get(entry.tag)
            if parts is None:
                parts = groups[entry.tag] = []
            parts.append(packed)
            n += 1
        self._pending_events += n
        self.written += n

    def payload(self) -> tuple[bytes, int]:
        """The written events as one batch of messages (and how many events it holds); the groups are emptied."""
        groups, events = self._groups, self._pending_events
        self._groups, self._pending_events = {}, 0
        limit = self.config.max_message_bytes
        ack = self.config.require_ack
        gzip = self.config.compress == "gzip"
        messages: list[bytes] = []
        for tag, parts in groups.items():
            start, size = 0, 0
            for i, part in enumerate(parts):
                size += len(part)
                if size >= limit or i == len(parts) - 1:
                    blob = b"".join(parts[start : i + 1])
                    chunk = new_chunk_id() if ack else None
                    messages.append(packed_forward(tag, blob, i + 1 - start, chunk, gzip))
                    start, size = i + 1, 0
        return b"".join(messages), events

    def flush(self) -> None:
        """Put what was written into the outbox (durable with the runtime's transaction); Backpressure when full."""
        if not self._groups:
            return
        payload, events = self.payload()
        if self.outbox is None:
            return  # validate_only
        self.outbox.put(payload, events)

    def stats(self) -> dict[str, Any]:
        """The outbox's counters plus the connection's (counts only)."""
        out: dict[str, Any] = dict(self.outbox.stats()) if self.outbox is not None else {}
        out.update(
            written=self.written,
            rejected=self.rejected,
            connects=self.client.connects,
            handshake_failures=self.client.handshake_failures,
        )
        return out

    def close(self) -> None:
        """Put what is left into the outbox, let the sender deliver for ``close_drain_seconds``, then stop it (a
        send still waiting for its acks is broken off: the batch stays in the outbox for the next start)."""
        if self.outbox is None:
            return
        try:
            self.flush()
        finally:
            self.outbox.drain(self.config.close_drain_seconds)
            self.client.abort()
            self.outbox.close()
            self.client.close()
            left = self.outbox.stats()
            if left["pending_batches"]:
                log.info(
                    "forward_sink_closed_with_pending", batches=left["pending_batches"], events=left["pending_events"]
                )
