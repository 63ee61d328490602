"""``querylog filter --confirm``: rsyslog's ``omprog`` confirmation protocol on stdin/stdout.

rsyslog (``action(type="omprog" binary="querylog filter --confirm -c CONF" confirmMessages="on")``) starts the
program and waits for one ``OK`` line: the chain and the sinks are built. Then it writes one message per line on
stdin and waits for one line back per message before it sends the next one; anything but ``OK`` keeps the message
in rsyslog's queue, to be sent again (``action.resumeInterval``), and a program that died is started again and
sent the unconfirmed message. So rsyslog's queue is the retry buffer and this driver answers ``OK`` only for a
final outcome of the message's record: ``Runtime.receive`` returned (delivered to the configured sinks and
flushed, held by a buffering filter and committed, dropped by a rule) or it was dead-lettered and the dead letter
written out (a bad record would fail again: sending it again cannot help). Otherwise the answer is
``ERROR <reason>`` (``backpressure``, ``unavailable``, ``dead_letter_unwritten``: a reason, never a value), and the
message comes again.

Reading ahead: whatever stdin holds when a read returns is taken as one batch (one ``receive``, one ``OK`` per
line): rsyslog with ``confirmMessages`` sends one message at a time, so its batches hold one record; a pipe of many
lines (a test, a shell) gets larger ones. A line is at most ``limits.max_record_bytes`` (a longer one is
dead-lettered as ``oversized_record`` and confirmed, never held whole in memory).

Records are read in the schema's format: ``tsv`` (the columns of ``schema.columns``; a line that is exactly that
header is confirmed and skipped), ``jsonl``, or ``auto``: JSON lines when the first message starts with ``{``,
else TSV. Stdout carries only the confirmations: the output goes to the configured sinks (a ``file`` sink on
``-`` is refused), logs to stderr (rsyslog's ``output=`` file). Ends at EOF (rsyslog closes the pipe) or
SIGTERM, after a final release.
"""

from __future__ import annotations

import os
import select
import sqlite3
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import structlog

from sidecar.api import Backpressure, Codec, RecordBatch, SinkError
from sidecar.config import LoadedConfig
from sidecar.pipeline import Pipeline
from sidecar.signals import StopFlag
from sidecar.state import StateError

log = structlog.get_logger("querylog.confirm")

OK = b"OK\n"
ORIGIN = "stdin"
#: Seconds between looks at the stop flag while stdin is idle.
WATCH_SECONDS = 0.1
READ_BYTES = 1 << 16


class ConfirmError(ValueError):
    """A config this mode cannot run with (no sinks, a sink on stdout)."""


@dataclass
class ConfirmSummary:
    """Counts of a run (no values)."""

    messages: int = 0
    confirmed: int = 0
    refused: Counter[str] = field(default_factory=Counter)
    events_out: int = 0
    events_held: int = 0
    dead_lettered: int = 0
    header_lines: int = 0
    seconds: float = 0.0

    def line(self) -> str:
        refused = " ".join(f"{k}={v}" for k, v in sorted(self.refused.items()))
        rate = self.messages / self.seconds if self.seconds > 0 else 0.0
        return (
            f"messages={self.messages} confirmed={self.confirmed} refused={sum(self.refused.values())}"
            f"{' (' + refused + ')' if refused else ''} out={self.events_out} held={self.events_held} "
            f"dead_letter={self.dead_lettered} header_lines={self.header_lines} seconds={self.seconds:.3f} "
            f"messages/s={rate:,.0f}"
        )


class Lines:
    """Bytes as they come -> complete lines (without ``\\n``); a line over ``limit`` bytes comes out as None once
    its end arrived (its bytes are never kept)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buf = bytearray()
        self._skipping = False  # inside an oversized line: drop bytes until its end

    def feed(self, data: bytes) -> list[bytes | None]:
        out: list[bytes | None] = []
        start = 0
        while True:
            end = data.find(b"\n", start)
            if end < 0:
                break
            if self._skipping or len(self._buf) + end - start > self.limit:
                out.append(None)
            else:
                out.append(bytes(self._buf) + data[start:end])
            self._buf.clear()
            self._skipping = False
            start = end + 1
        if not self._skipping:
            self._buf += data[start:]
            if len(self._buf) > self.limit:
                self._buf.clear()
                self._skipping = True
        return out

    def rest(self) -> list[bytes | None]:
        """The last line when the input ended without a line break (rsyslog always sends one)."""
        if self._skipping:
            self._skipping = False
            return [None]
        if self._buf:
            line = bytes(self._buf)
            self._buf.clear()
            return [line]
        return []


def check_sinks(config: LoadedConfig) -> None:
    """Stdout carries the confirmations: the output must go to configured sinks, none of them stdout."""
    if not config.sinks:
        raise ConfirmError("--confirm writes OK lines on stdout: configure sinks for the output")
    for spec in config.sinks:
        if spec.name == "file" and getattr(spec.config, "path", None) == "-":
            raise ConfirmError(f"{spec.path}: --confirm writes OK lines on stdout: a file sink cannot write to -")


def choose_codec(pipeline: Pipeline, first: str) -> Codec:
    """The codec of the schema's format; ``auto``: JSON lines when ``first`` (the first message) starts with
    ``{``, else TSV."""
    fmt = pipeline.config.sidecar.schema.format
    if fmt == "auto":
        fmt = "jsonl" if first.lstrip().startswith("{") else "tsv"
    codec = pipeline.ctx.codec_for(fmt)
    assert codec is not None, fmt  # the text formats are always there
    return codec


class Confirmer:
    """One run of the protocol: stdin lines into ``receive``, a line back per message on stdout."""

    def __init__(self, pipeline: Pipeline, stdin: int, stdout: int) -> None:
        self.pipeline = pipeline
        self.stdin = stdin
        self.stdout = stdout
        self._codec: Codec | None = None
        #: the TSV header line of ``schema.columns`` (a message that is exactly it is skipped), else None
        self.header: str | None = None
        self.summary = ConfirmSummary()

    @property
    def codec(self) -> Codec | None:
        return self._codec

    @codec.setter
    def codec(self, codec: Codec | None) -> None:
        self._codec = codec
        columns = getattr(codec, "columns", None)
        self.header = "\t".join(columns) if codec is not None and codec.format == "tsv" and columns else None

    def answer(self, lines: int, reason: str | None) -> None:
        """``OK`` for each of ``lines`` messages, or ``ERROR reason`` for each."""
        if reason is None:
            self.summary.confirmed += lines
            os.write(self.stdout, OK * lines)
        else:
            self.summary.refused[reason] += lines
            os.write(self.stdout, f"ERROR {reason}\n".encode("ascii") * lines)

    def chunks(self, stop: StopFlag) -> Iterator[bytes]:
        """What stdin holds each time it is readable, until EOF or ``stop``."""
        while not stop:
            ready, _, _ = select.select([self.stdin], [], [], WATCH_SECONDS)
            if not ready:
                continue
            data = os.read(self.stdin, READ_BYTES)
            if not data:
                return
            yield data

    def take(self, lines: list[bytes | None]) -> None:
        """A batch of messages into the runtime, then their answers."""
        first = self.summary.messages + 1
        self.summary.messages += len(lines)
        dead = self.pipeline.dead
        unwritten = dead.unwritten
        records: list[str] = []
        positions: list[int] = []
        bad: list[tuple[int, str, bytes | None]] = []
        for pos, raw in enumerate(lines, first):
            if raw is None:
                bad.append((pos, "oversized_record", None))
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                bad.append((pos, "invalid_utf8", raw))
                continue
            if self.codec is None:
                self.codec = choose_codec(self.pipeline, text)
            if self.header is not None and text.rstrip("\r") == self.header:
                self.summary.header_lines += 1
                continue
            records.append(text)
            positions.append(pos)
        reason = self.receive(records, positions) if records else None
        if reason is None and bad:
            for pos, why, record in bad:
                dead.add(why, ORIGIN, pos, record)
            dead.flush()
        if reason is None and dead.unwritten > unwritten:  # the dead-letter file could not take them: not final
            reason = "dead_letter_unwritten"
        self.answer(len(lines), reason)

    def receive(self, records: list[str], positions: list[int]) -> str | None:
        """``Runtime.receive`` of the records: None once durable, else the reason it is not."""
        assert self.codec is not None
        try:
            receipt = self.pipeline.receive(RecordBatch(records, self.codec, ORIGIN, positions))
        except Backpressure:
            return "backpressure"
        except (StateError, SinkError, sqlite3.Error, OSError) as exc:  # a full disk, a refusing sink
            log.error("confirm_receive_failed", error=type(exc).__name__, lines=len(records))
            return "unavailable"
        self.summary.events_out += len(receipt.delivered)
        self.summary.events_held += receipt.held
        return None

    def run(self, stop: StopFlag) -> None:
        lines = Lines(self.pipeline.config.sidecar.limits.max_record_bytes)
        os.write(self.stdout, OK)  # ready: rsyslog sends the first message only after this
        for data in self.chunks(stop):
            batch = lines.feed(data)
            if batch:
                self.take(batch)
        if not stop:
            rest = lines.rest()
            if rest:
                self.take(rest)


def confirm(
    config: LoadedConfig, stop: StopFlag, flush_interval: float, stdin: int = 0, stdout: int = 1
) -> ConfirmSummary:
    """Run the protocol until EOF or ``stop``; the final release; the counts (:class:`ConfirmError` for a config
    without sinks or with one on stdout, before anything is written)."""
    started = time.perf_counter()
    check_sinks(config)
    pipeline = Pipeline(config)
    try:
        confirmer = Confirmer(pipeline, stdin, stdout)
        if config.sidecar.schema.format != "auto":  # a schema whose roles are no columns fails before the OK
            confirmer.codec = choose_codec(pipeline, "")
        pipeline.start_release_timer(flush_interval)
        try:
            confirmer.run(stop)
        except BrokenPipeError:  # rsyslog went away: what was confirmed is durable, the rest it sends again
            log.warning("confirm_stdout_closed")
        summary = confirmer.summary
        summary.events_out += pipeline.release(final=True)
        summary.dead_lettered = pipeline.dead.total
    finally:
        pipeline.close()
    summary.seconds = time.perf_counter() - started
    return summary


__all__ = ["ConfirmError", "ConfirmSummary", "Lines", "confirm"]
