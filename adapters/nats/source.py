"""The ``nats`` source: a JetStream stream read with one durable pull consumer per partition (see :mod:`adapters.nats`).

``start`` returns at once; a loop thread connects (again and again while the servers are down), makes sure of
the stream and the consumers ``<durable>_p<p>``, and runs one task per partition: pull up to ``batch_size``
messages, cut their data into lines, hand them to ``Runtime.receive`` (on a worker thread: the loop keeps
answering the server meanwhile) and acknowledge every message once it returned. A batch the runtime could not
take (a full outbox, a failing sink or state database) is nak'ed with ``nak_delay_seconds``: nothing of it was
acknowledged, JetStream delivers it again. Records that are no record (not UTF-8, too long) are dead-lettered
(and flushed) before the acknowledgement, those the codec refuses by the runtime.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import structlog

from adapters.nats.config import NatsSourceConfig
from adapters.nats.jetstream import LoopThread, Puller, delivery, ensure_consumer, ensure_stream
from sidecar.api import Backpressure, BuildContext, Codec, ConfigValueError, RecordBatch, Runtime, Source
from sidecar.api import client_authentication as _kinds
from sidecar.codecs import TsvCodec
from sidecar.textcodecs import sniff_format

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg

log = structlog.get_logger("querylog.nats")

#: Seconds between two connection attempts while no server answers (doubling up to the last).
RECONNECT = (0.5, 1.0, 2.0, 5.0)


class NatsSource(Source[NatsSourceConfig]):
    """Records from NATS JetStream (durable pull consumers, one per partition), acknowledged once durable."""

    NAME = "nats"
    Config = NatsSourceConfig
    SUMMARY = (
        "NATS JetStream: durable pull consumers on partitioned subjects (<prefix>.<p>), one record line per "
        "message, acknowledged once durable or held"
    )

    def __init__(self, config: NatsSourceConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.options = config.connect_options(ctx)
        #: counts only: messages, records, acknowledged, redelivered, nak'ed, dead-lettered by reason...
        self.counts: Counter[str] = Counter()
        self.partitions = config.assigned()
        self._loop: LoopThread | None = None
        self._main: Future[None] | None = None
        self._executor: ThreadPoolExecutor | None = None
        self._stopping: asyncio.Event | None = None
        self._codecs: dict[str, Codec] = {}
        self._connected = False

    # ---- lifecycle --------------------------------------------------------------------------------
    def start(self, runtime: Runtime) -> None:
        """Start the loop thread (connecting in the background); returns at once."""
        self._loop = LoopThread("nats-source")
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="nats-receive")
        self._main = asyncio.run_coroutine_threadsafe(self._run(runtime), self._loop.loop)
        log.info(
            "nats_source_started",
            stream=self.config.stream,
            partitions=len(self.partitions),
            servers=len(self.options["servers"]),
        )

    def stop(self, grace: float | None = None) -> None:
        """Stop pulling; a batch being taken finishes (and is acknowledged) within ``grace`` seconds."""
        loop, main = self._loop, self._main
        if loop is None or main is None:
            return
        started = time.monotonic()
        stopping = self._stopping
        if stopping is not None:
            loop.loop.call_soon_threadsafe(stopping.set)
        with contextlib.suppress(
            Exception
        ):  # cancelled or timed out: the loop's close cancels what is left (not acknowledged)
            main.result(timeout=max(grace if grace is not None else 10.0, self.config.pull_wait_seconds + 1.0))
        loop.close()
        if self._executor is not None:
            self._executor.shutdown(wait=True)
        self._loop = self._main = self._executor = None
        log.info("nats_source_stopped", stop_seconds=round(time.monotonic() - started, 3), **self.counts)

    def stats(self) -> dict[str, Any]:
        """Counts only (no subject, no value)."""
        return {**self.counts, "connected": int(self._connected)}

    def authentication(self) -> list[str]:
        """How this replica proves itself to the NATS servers (the servers authorise the publishers)."""
        opts = self.options
        secret = "token" in opts or "user" in opts or "user_jwt_cb" in opts
        return _kinds(mtls=self.config.tls_cert_file is not None, token=secret)

    # ---- the loop ---------------------------------------------------------------------------------
    async def _run(self, runtime: Runtime) -> None:
        import nats

        self._stopping = stopping = asyncio.Event()
        attempt = 0
        while not stopping.is_set():
            connecting = asyncio.ensure_future(
                asyncio.wait_for(
                    nats.connect(**self.options, error_cb=self._error, disconnected_cb=self._gone),
                    self.config.connect_wait(),
                )
            )
            stop = asyncio.ensure_future(stopping.wait())
            await asyncio.wait({connecting, stop}, return_when=asyncio.FIRST_COMPLETED)
            stop.cancel()
            if stopping.is_set():  # stopped while connecting: nothing to take
                connecting.cancel()
                await asyncio.gather(connecting, return_exceptions=True)
                with contextlib.suppress(Exception):
                    if connecting.done() and not connecting.cancelled() and connecting.exception() is None:
                        await connecting.result().close()
                return
            try:
                nc = connecting.result()
            except Exception as exc:
                self.counts["connect_failed"] += 1
                log.warning("nats_connect_failed", error=type(exc).__name__, attempt=attempt + 1)
                await _wait(stopping, RECONNECT[min(attempt, len(RECONNECT) - 1)])
                attempt += 1
                continue
            attempt = 0
            try:
                await self._consume_all(nc, runtime, stopping)
            except Exception as exc:  # the stream or a consumer cannot be made: retried
                self.counts["consume_failed"] += 1
                log.error("nats_consume_failed", error=type(exc).__name__)
                await _wait(stopping, self.config.nak_delay_seconds)
            finally:
                self._connected = False
                with contextlib.suppress(Exception):
                    await nc.close()

    async def _consume_all(self, nc: Client, runtime: Runtime, stopping: asyncio.Event) -> None:
        cfg = self.config
        js = nc.jetstream()
        if cfg.create_stream:
            await ensure_stream(js, cfg.stream, [f"{cfg.subject_prefix}.*"])
        pullers = []
        for p in self.partitions:
            name = f"{cfg.durable}_p{p}"
            subject = f"{cfg.subject_prefix}.{p}"
            await ensure_consumer(
                js, cfg.stream, name, subject, ack_wait=cfg.ack_wait_seconds, max_ack_pending=cfg.max_ack_pending
            )
            puller = Puller(nc, cfg.stream, name)
            await puller.start()
            pullers.append((p, puller))
        self._connected = True
        log.info("nats_consumers_ready", stream=cfg.stream, partitions=[p for p, _ in pullers])
        try:
            await asyncio.gather(*(self._consume(p, puller, runtime, stopping) for p, puller in pullers))
        finally:
            for _, puller in pullers:
                await puller.stop()

    async def _consume(self, p: int, puller: Puller, runtime: Runtime, stopping: asyncio.Event) -> None:
        cfg = self.config
        while not stopping.is_set():
            msgs = await puller.fetch(cfg.batch_size, cfg.pull_wait_seconds)
            if msgs:
                await self._take(p, msgs, runtime, stopping)

    async def _take(self, p: int, msgs: list[Msg], runtime: Runtime, stopping: asyncio.Event) -> None:
        """Hand one pull's messages to the runtime; acknowledge them all, or nak them all."""
        loop = asyncio.get_running_loop()
        assert self._executor is not None
        try:
            await self._working(msgs, loop.run_in_executor(self._executor, self._hand_over, p, msgs, runtime))
        except Backpressure as exc:
            self.counts["backpressure"] += 1
            await self._nak(msgs)
            log.info("nats_batch_nak", reason="backpressure", sink=exc.sink, messages=len(msgs))
            while runtime.backpressure() is not None and not stopping.is_set():
                await _wait(stopping, min(0.2, self.config.nak_delay_seconds))
            return
        except Exception as exc:  # a sink or the state cannot take it now: not acknowledged, delivered again
            self.counts["receive_failed"] += 1
            await self._nak(msgs)
            log.error("nats_batch_nak", reason="receive_failed", error=type(exc).__name__, messages=len(msgs))
            await _wait(stopping, self.config.nak_delay_seconds)
            return
        for msg in msgs:
            await msg.ack()
        self.counts["acknowledged"] += len(msgs)

    async def _working(self, msgs: list[Msg], done: asyncio.Future[None]) -> None:
        """Wait for ``done``; every third of ``ack_wait`` meanwhile, tell JetStream the messages are in progress
        (a slow chain is not a lost replica: no redelivery while it works)."""
        while True:
            finished, _ = await asyncio.wait({done}, timeout=self.config.ack_wait_seconds / 3)
            if finished:
                return done.result()
            self.counts["in_progress_sent"] += 1
            for msg in msgs:
                with contextlib.suppress(Exception):
                    await msg.in_progress()

    async def _nak(self, msgs: list[Msg]) -> None:
        self.counts["nak"] += len(msgs)
        for msg in msgs:
            with contextlib.suppress(Exception):  # the connection went: ack_wait delivers them again
                await msg.nak(delay=self.config.nak_delay_seconds)

    # ---- a worker thread ----------------------------------------------------------------------------
    def _hand_over(self, p: int, msgs: Sequence[Msg], runtime: Runtime) -> None:
        """The messages' lines into the runtime (durable when it returns); bad ones dead-lettered first."""
        limit = self.ctx.max_record_bytes
        lines: list[str] = []
        positions: list[int] = []
        bad: list[tuple[int, str, bytes | str]] = []
        redelivered = 0
        for msg in msgs:
            seq, delivered = delivery(msg)
            redelivered += delivered > 1
            data = msg.data
            if not data:
                self.counts["empty_messages"] += 1
                continue
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                bad.append((seq, "invalid_utf8", data))
                continue
            parts = text.split("\n")
            if parts[-1] == "":
                parts.pop()
            for line in parts:
                if len(line) > limit and len(line.encode("utf-8")) > limit:
                    bad.append((seq, "oversized_record", line))
                else:
                    lines.append(line)
                    positions.append(seq)
        self.counts["messages"] += len(msgs)
        self.counts["redelivered"] += redelivered
        origin = f"nats:{self.config.stream}:{p}"
        if lines:
            codec, lines, positions = self._codec(lines, positions)
            if lines:
                runtime.receive(RecordBatch(lines, codec, origin, positions))
                self.counts["records"] += len(lines)
        if bad:
            dead = runtime.dead_letters
            for seq, reason, record in bad:
                dead.add(reason, origin, seq, record)
                self.counts[f"dead_lettered_{reason}"] += 1
            dead.flush()

    def _codec(self, lines: list[str], positions: list[int]) -> tuple[Codec, list[str], list[int]]:
        """The codec of the schema's format (``auto``: by the first line of the pull); TSV lines equal to the
        header of ``schema.columns`` are skipped (counted ``header_lines``)."""
        schema = self.ctx.schema
        fmt: str = schema.format if schema is not None else "auto"
        if fmt == "auto":
            fmt = sniff_format(lines[0])
        codec = self._codecs.get(fmt)
        if codec is None:
            codec = self.ctx.codec_for(fmt)
            if codec is None:
                raise ConfigValueError("format", f"no codec for the format {fmt!r} is installed")
            self._codecs[fmt] = codec
        if isinstance(codec, TsvCodec):
            header = "\t".join(codec.columns)
            keep = [i for i, line in enumerate(lines) if line != header]
            if len(keep) < len(lines):
                self.counts["header_lines"] += len(lines) - len(keep)
                lines, positions = [lines[i] for i in keep], [positions[i] for i in keep]
        return codec, lines, positions

    # ---- connection callbacks (no values: type names only) ------------------------------------------
    async def _error(self, exc: Exception) -> None:
        self.counts["connection_errors"] += 1
        log.warning("nats_connection_error", error=type(exc).__name__)

    async def _gone(self) -> None:
        if self._stopping is not None and self._stopping.is_set():
            return  # our own close
        self.counts["disconnected"] += 1
        log.warning("nats_disconnected")


async def _wait(event: asyncio.Event, seconds: float) -> None:
    """Wait ``seconds`` or until ``event`` is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), seconds)
