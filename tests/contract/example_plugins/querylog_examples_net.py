"""A server source and a network sink written only against ``sidecar.api`` (the contract page).

Both speak one small protocol over TCP: a client sends records one per line, a batch ended by an empty line,
and waits for one answer line per batch: ``ok <accepted> <dead-lettered>`` once the batch is durable, ``busy
<sink>`` when nothing was taken (send it again later), ``error <kind>`` when it failed.

* ``LineServerSource`` (``line_server``) — the server: an asyncio loop on a thread of its own, each batch handed
  to ``runtime.receive`` on a worker thread and answered only after that returned.
* ``LinePeerSink`` (``line_peer``) — the client: the events' records, one batch per ``flush``, into the durable
  outbox of its build context; the outbox's sender thread delivers each batch to a peer (a ``line_server``, or
  anything speaking the protocol) and it leaves the outbox once the peer answered ``ok``.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any

from sidecar.api import (
    Backpressure,
    BuildContext,
    Codec,
    ConfigValueError,
    Event,
    Listen,
    Outbox,
    OutboxOptions,
    RecordBatch,
    Runtime,
    Sink,
    SinkConfig,
    Source,
    SourceConfig,
    listen_option,
    option,
)

# ---- the source -------------------------------------------------------------------------------


@dataclass(frozen=True)
class LineServerConfig(SourceConfig):
    """Options of ``line_server``."""

    listen: str = listen_option("127.0.0.1:7070")
    format: str = option("jsonl", "Codec of the records: `jsonl`, `tsv` or one registered under querylog.codecs.")
    max_batch_records: int = option(10_000, "Records in one batch at most; a longer batch is answered `error`.", min=1)
    shutdown_grace_seconds: float = option(10.0, "On stop, how long batches in flight may take.", min=0)


class _Oversized(Exception):
    """A line longer than ``max_record_bytes`` (skipped to its end)."""


class LineServerSource(Source[LineServerConfig]):
    """Newline-delimited records in batches over TCP; a batch is acknowledged after ``runtime.receive`` returned."""

    NAME = "line_server"
    Config = LineServerConfig

    def __init__(self, config: LineServerConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.address = Listen.parse(config.listen)
        codec = ctx.codec_for(config.format)
        if codec is None:
            raise ConfigValueError("format", f"no codec named {config.format!r}")
        self.codec: Codec = codec
        #: Counts only (acknowledged records, busy answers, errors by kind, connections).
        self.counts: Counter[str] = Counter()
        self._bound: list[Listen] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # one per connection (the loop keeps only weak references)
        self._busy: set[asyncio.Task[None]] = set()  # those whose batch is in the runtime now

    def start(self, runtime: Runtime) -> None:
        """Bind and return at once; connections are served on the source's own event-loop thread."""
        loop = asyncio.new_event_loop()
        self._loop = loop
        self._thread = threading.Thread(target=loop.run_forever, name="line-server", daemon=True)
        self._thread.start()
        try:
            asyncio.run_coroutine_threadsafe(self._listen(runtime), loop).result()
        except BaseException:
            self._end_loop()
            raise

    def listening(self) -> list[Listen]:
        return list(self._bound)

    async def _listen(self, runtime: Runtime) -> None:
        def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            task = asyncio.get_running_loop().create_task(self._connection(runtime, reader, writer))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        limit = self.ctx.max_record_bytes + 1  # the record and its newline
        self._server = await asyncio.start_server(handle, self.address.host, self.address.port, limit=limit)
        self._bound = [Listen(*sock.getsockname()[:2]) for sock in self._server.sockets]

    async def _connection(self, runtime: Runtime, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task: asyncio.Task[None] | None = asyncio.current_task()
        assert task is not None
        self.counts["connections"] += 1
        try:
            while True:
                batch = await self._read_batch(runtime, reader)
                if batch is None:
                    return  # the client closed (a batch cut short was never acknowledged: it sends it again)
                self._busy.add(task)
                try:
                    answer = await asyncio.to_thread(self._receive, runtime, *batch)
                finally:
                    self._busy.discard(task)
                writer.write(answer.encode("ascii") + b"\n")
                await writer.drain()
        except ConnectionError:
            self.counts["connections_broken"] += 1
        finally:
            writer.close()

    async def _read_batch(self, runtime: Runtime, reader: asyncio.StreamReader) -> tuple[list[str], int] | None:
        """The records up to an empty line, and how many were dead-lettered on the way (too long, or not UTF-8:
        by reason, without the value; the others go on). None: the connection ended."""
        lines: list[str] = []
        dead = 0
        while True:
            try:
                raw = await _read_line(reader)
            except _Oversized:
                runtime.dead_letters.add("oversized_record", self.NAME, None, None)
                dead += 1
                continue
            if raw is None:
                return None
            line = raw.rstrip(b"\r\n")
            if not line:
                return lines, dead
            try:
                lines.append(line.decode("utf-8"))
            except UnicodeDecodeError:
                runtime.dead_letters.add("invalid_utf8", self.NAME, None, line)
                dead += 1

    def _receive(self, runtime: Runtime, lines: list[str], dead: int) -> str:
        """On a worker thread: the batch into the runtime; the answer to send (only now: it is durable)."""
        if len(lines) > self.config.max_batch_records:
            self.counts["error_batch_too_large"] += 1
            return "error batch_too_large"
        if not lines:  # nothing but dead letters: durable once flushed
            runtime.dead_letters.flush()
            return f"ok 0 {dead}"
        try:
            receipt = runtime.receive(RecordBatch(lines, self.codec, self.NAME))
        except Backpressure as exc:  # nothing ran: the client sends the batch again later
            self.counts["busy"] += 1
            return f"busy {exc.sink}"
        except Exception as exc:  # any other failure is answered, never acknowledged
            self.counts[f"error_{type(exc).__name__}"] += 1
            return f"error {type(exc).__name__}"
        dead += receipt.dead_lettered
        self.counts["acknowledged"] += receipt.accepted + dead
        return f"ok {receipt.accepted} {dead}"

    def stop(self, grace: float | None = None) -> None:
        """Stop accepting, end idle connections, let batches in flight finish within ``grace`` seconds."""
        loop = self._loop
        if loop is None:
            return
        wait = self.config.shutdown_grace_seconds if grace is None else grace

        async def shutdown() -> None:
            if self._server is not None:
                self._server.close()
            busy = set(self._busy)
            for task in self._tasks - busy:  # waiting for a batch: nothing in flight
                task.cancel()
            if busy:
                _, late = await asyncio.wait(busy, timeout=wait)
                for task in late:  # not acknowledged: the client sends the batch again
                    task.cancel()
            if self._tasks:
                await asyncio.wait(set(self._tasks))

        asyncio.run_coroutine_threadsafe(shutdown(), loop).result()
        self._end_loop()

    def _end_loop(self) -> None:
        loop, self._loop = self._loop, None
        if loop is None:
            return
        loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join()
        loop.close()

    def stats(self) -> dict[str, Any]:
        return dict(self.counts)


async def _read_line(reader: asyncio.StreamReader) -> bytes | None:
    """One line with its newline; None at the end of the stream (a last line without newline is cut short)."""
    try:
        return await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError:
        return None
    except asyncio.LimitOverrunError as exc:  # too long: skip to the end of the line
        await reader.readexactly(exc.consumed)
        while True:
            try:
                await reader.readuntil(b"\n")
                raise _Oversized from None
            except asyncio.LimitOverrunError as more:
                await reader.readexactly(more.consumed)
            except asyncio.IncompleteReadError:
                return None


# ---- the sink ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LinePeerConfig(OutboxOptions, SinkConfig):
    """Options of ``line_peer``: the peer, and the outbox's bounds and retry timing (:class:`OutboxOptions`)."""

    address: str = option("127.0.0.1:7070", "host:port of the peer (a line_server source, for one).")
    timeout_seconds: float = option(10.0, "How long connecting and the peer's answer to one batch may take.", gt=0)

    def __post_init__(self) -> None:
        Listen.parse(self.address, "address")
        super().__post_init__()


class LinePeerSink(Sink[LinePeerConfig]):
    """Each flush's records as one batch into the outbox; the outbox's thread sends batches to the peer in order."""

    NAME = "line_peer"
    Config = LinePeerConfig

    def __init__(self, config: LinePeerConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.peer = Listen.parse(config.address, "address")
        self.lines: list[bytes] = []  # written, not yet in the outbox
        self.counts: Counter[str] = Counter()
        self.outbox: Outbox | None = None
        if ctx.validate_only:
            return  # check-config: create nothing
        self.outbox = ctx.outbox(f"line_peer_{config.address}", config)
        self.outbox.start(self.send)  # what an earlier run left undelivered goes out now

    def write(self, events: list[Event]) -> None:
        for ev in events:
            record = ev.codec.encode(ev) if ev.codec is not None else None
            text = record.rstrip("\r") if isinstance(record, str) else ""
            if not text or "\n" in text:  # the protocol cannot frame it: counted, dead-lettered, never sent
                self.counts["unframable_record"] += 1
                if self.ctx.dead_letters is not None:
                    self.ctx.dead_letters.add("unframable_record", f"sink:{self.NAME}", None, None)
                continue
            self.lines.append(text.encode("utf-8", "surrogateescape"))
            self.written += 1

    def flush(self) -> None:
        """The delivery point: the batch is durable in the outbox, committed with the runtime's transaction."""
        if not self.lines or self.outbox is None:
            return
        self.outbox.put(b"".join(line + b"\n" for line in self.lines), len(self.lines))  # Backpressure: kept here
        self.lines = []

    def send(self, payload: bytes) -> None:
        """On the outbox's thread: deliver one batch, or raise (the outbox sends it again after a backoff)."""
        address = (self.peer.host, self.peer.port)
        with socket.create_connection(address, timeout=self.config.timeout_seconds) as sock:
            sock.sendall(payload + b"\n")
            with sock.makefile("rb") as answers:
                answer = answers.readline(256)
        if not answer.startswith(b"ok "):
            self.counts["batches_refused"] += 1
            raise ConnectionError("the peer did not take the batch")  # no value, no peer text

    def stats(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(self.outbox.stats()) if self.outbox is not None else {}
        out.update(self.counts)
        return out

    def close(self) -> None:
        """Put what is left into the outbox, keep sending for ``close_drain_seconds``, stop the sender (what is
        still undelivered stays in the state database for the next start)."""
        if self.outbox is None:
            return
        try:
            self.flush()
        except Backpressure:
            self.counts["not_stored_at_close"] += len(self.lines)
        finally:
            self.outbox.drain(self.config.close_drain_seconds)
            self.outbox.close(self.config.timeout_seconds)
