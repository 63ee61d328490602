"""File replay: a log file through the chain into a file, stdout or the configured sinks."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlite_utils
import structlog

from adapters.file.prescan import PrescanError, run_prescan
from adapters.file.progress import ReplayProgress
from adapters.file.reader import LineBatch, is_stream, open_log
from adapters.file.sink import FileSink, FileSinkConfig
from sidecar.api import ConfigValueError, Sink
from sidecar.config import ConfigError, LoadedConfig
from sidecar.gctune import tune_gc
from sidecar.pipeline import Pipeline
from sidecar.release import TimedRelease
from sidecar.signals import StopFlag

log = structlog.get_logger("querylog.replay")


@dataclass
class ReplaySummary:
    records_in: int = 0
    events_in: int = 0
    events_out: int = 0
    events_held: int = 0
    events_dropped: int = 0
    dead_lettered: int = 0
    seconds: float = 0.0
    interrupted: bool = False
    #: events held by an earlier run, restored from the state store (``state_dir``) at the start
    events_restored: int = 0
    state_dir: str = ""
    #: where this run's dead letters went (None: counted only)
    dead_letter_file: str | None = None

    @property
    def events_per_second(self) -> float:
        return self.records_in / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        return (
            f"records in={self.records_in} events in={self.events_in} out={self.events_out} "
            f"held={self.events_held} dropped={self.events_dropped} dead_letter={self.dead_lettered} "
            f"seconds={self.seconds:.3f} events/s={self.events_per_second:,.0f}"
            + (f" dead_letter_file={self.dead_letter_file}" if self.dead_lettered and self.dead_letter_file else "")
            + (" (interrupted)" if self.interrupted else "")
            + (
                f" restored={self.events_restored} (held by an earlier run, from {self.state_dir})"
                if self.events_restored
                else ""
            )
        )


class ResumeError(ValueError):
    """``--resume`` asked for with an output it cannot resume."""


def _after(batch: LineBatch, done_line: int) -> LineBatch:
    """The part of ``batch`` after input line ``done_line`` (handled by an earlier run)."""
    n = len(batch.lines)
    if batch.line_number(n - 1) <= done_line:
        return batch.sub(n, n, batch.last_eol)
    start = next(i for i in range(n) if batch.line_number(i) > done_line)
    return batch if start == 0 else batch.sub(start, n, batch.last_eol)


def _create_checkpoints(db: sqlite_utils.Database) -> None:
    db.table("replay_checkpoints").create({"key": str, "line": int, "bytes": int}, pk="key")


class Checkpoint:
    """Input position and output size of a ``--resume`` replay, committed with the filters' state."""

    def __init__(self, pipeline: Pipeline, input_path: str, output_path: str) -> None:
        self.conn = pipeline.state.conn
        self.key = f"{os.path.abspath(input_path)}\0{output_path}"
        pipeline.state.migrate("replay", [_create_checkpoints])

    def load(self) -> tuple[int, int]:
        row = self.conn.execute("SELECT line, bytes FROM replay_checkpoints WHERE key = ?", (self.key,)).fetchone()
        return (int(row[0]), int(row[1])) if row else (0, 0)

    def begin(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def commit(self, line: int, sink: FileSink) -> None:
        """fsync the output, record how far input and output got, commit the batch's state with it."""
        size = sink.durable_size()
        self.conn.execute(
            "INSERT INTO replay_checkpoints(key, line, bytes) VALUES (?, ?, ?) "
            "ON CONFLICT(key) DO UPDATE SET line = excluded.line, bytes = excluded.bytes",
            (self.key, line, size),
        )
        self.conn.execute("COMMIT")


_gc_tuned = False


def _tune_gc_once() -> None:
    """:func:`~sidecar.gctune.tune_gc` once per process, after the first chain is built (the knowledge base
    and name data then leave the collector's scans): it halved decoding's CPU and took a fifth off
    ``category_buffer``'s on a generated archive."""
    global _gc_tuned
    if not _gc_tuned:
        _gc_tuned = True
        tune_gc()


def _prescan(config: LoadedConfig, pipeline: Pipeline, input_path: str, required: bool) -> None:
    try:
        run_prescan(config, pipeline, input_path)
    except PrescanError as exc:
        if required:
            raise
        if exc.reason != "no_prescan_filter":
            log.warning("prescan_skipped", reason=exc.reason)


def replay(
    config: LoadedConfig,
    input_path: str,
    output: str | None,
    *,
    seed: int | None = None,
    progress: bool = False,
    stop: StopFlag | None = None,
    resume: bool = False,
    prescan: bool | None = False,
    flush_interval: float | None = 1.0,
) -> ReplaySummary:
    """Replay ``input_path`` through the configured chain. Output: ``output``, else the sinks, else stdout.

    ``resume``: exactly-once mode for a plain output file. Each batch's output is
    fsynced and committed together with the filters' state and the input position;
    after a crash (even kill -9) the same command truncates the output to the last
    commit and continues from there: every event is released once or still held.

    ``prescan``: read the whole input once first, for the filters that learn from
    the future of an archive (:mod:`adapters.file.prescan`). ``None`` (auto): do so
    when the chain has such a filter; when the input or the chain cannot serve
    it, log ``prescan_skipped`` with the reason and replay as a stream.

    From stdin (a pipe: a shipper's exec stage, a shell pipe) each batch is written out as soon as it is
    read, and every ``flush_interval`` seconds buffering filters are asked to release (what they let go is
    written out at once), also while the input is idle; None: no timed release.
    """
    started = time.perf_counter()
    stop = stop if stop is not None else StopFlag()  # `or` would drop an unset flag (it is falsy)
    if resume and (output is None or output == "-" or output.endswith(".gz")):
        raise ResumeError("--resume needs -o OUTPUT, a plain (not .gz) file")
    if resume and is_stream(input_path):
        raise ResumeError("--resume needs an input file (stdin or a pipe has no position to resume from)")
    pipeline = Pipeline(config, seed=seed, with_sinks=output is None)
    _tune_gc_once()
    summary = ReplaySummary()
    sinks: Sequence[Sink[Any]] = pipeline.sinks
    own_sinks: list[FileSink] = []
    checkpoint: Checkpoint | None = None
    done_line = 0
    if output is not None or not sinks:
        path = os.path.abspath(output) if output and output != "-" else "-"  # -o is relative to the cwd
        resume_at = None
        if resume:
            checkpoint = Checkpoint(pipeline, input_path, path)
            done_line, resume_at = checkpoint.load()
        own_sinks = [
            FileSink(FileSinkConfig(path=path, mode="truncate"), pipeline.ctx, config.sidecar.schema, resume_at)
        ]
        sinks = own_sinks
    bar: ReplayProgress | None = None
    timer: TimedRelease | None = None
    try:
        try:
            log_in = open_log(
                input_path,
                config.sidecar.schema,
                pipeline.dead,
                config.sidecar.limits.max_record_bytes,
                config.sidecar.limits.batch_size,
                stop=stop.__bool__,
                skip_through=done_line,
            )
        except ConfigValueError as exc:  # the schema cannot read this input (a role column it does not have)
            key = f"schema.{exc.key.removeprefix('schema.')}"
            raise ConfigError(str(config.file), config.doc.line(key), key, exc.problem, exc.allowed) from None
        codec, header, batches, reader = log_in.codec, log_in.header, log_in.batches, log_in.reader
        if prescan is not False:
            _prescan(config, pipeline, input_path, required=bool(prescan))
        if sinks is pipeline.sinks:
            pipeline.start_sinks(header, codec)
        else:
            for sink in sinks:
                sink.start(header, codec)
        dead = pipeline.dead
        streaming = is_stream(input_path)
        decode_many = codec.decode_many
        if progress:
            bar = ReplayProgress(input_path, header is not None)
        if streaming and flush_interval is not None:
            timer = TimedRelease(pipeline, flush_interval) if sinks is pipeline.sinks else None  # H1: rewrite
        for batch in batches:
            if bar is not None:
                bar.update(reader.lines_seen, pipeline.stats)
            if done_line:
                batch = _after(batch, done_line)
                if not batch.lines:
                    continue
            if checkpoint is not None:
                checkpoint.begin()
            bad: list[tuple[int, str]] = []
            events = decode_many(batch.lines, "\n", bad)
            for idx, reason in bad:
                dead.add(reason, input_path, batch.line_number(idx), batch.lines[idx])
            if batch.last_eol == "" and events and (not bad or bad[-1][0] != len(batch.lines) - 1):
                events[-1].eol = ""
            summary.events_in += len(events)
            if streaming:  # a pipe (a shipper's exec stage): what is read now goes out now, state with it
                with pipeline.transaction():
                    out = pipeline.process(events)
                    for sink in sinks:
                        sink.write(out)
                        sink.flush()
            elif checkpoint is None:
                # one state transaction per batch: the filters' savepoints (category_buffer, profile) nest in
                # it and the batch commits once, before its output is written (as before: one commit each)
                with pipeline.transaction(check_outbox=False):
                    out = pipeline.process(events)
                for sink in sinks:
                    sink.write(out)
            else:  # --resume: the checkpoint's transaction is open; it commits with the output
                out = pipeline.process(events)
                for sink in sinks:
                    sink.write(out)
            dead.flush()  # this batch's dead letters reach the file with its output
            if checkpoint is not None:
                checkpoint.commit(batch.line_number(len(batch.lines) - 1), own_sinks[0])
            if stop and not reader.drains_on_stop:  # a pipe: its lines already read go out, then it ends
                break
        if timer is not None:
            timer.stop()
        summary.interrupted = bool(stop)
        if checkpoint is not None:
            checkpoint.begin()
        out = pipeline.flush(final=True)
        for sink in sinks:
            sink.write(out)
            sink.flush()
        if checkpoint is not None:
            checkpoint.commit(max(done_line, reader.lines_seen), own_sinks[0])
        summary.records_in = reader.lines_seen - (1 if header is not None else 0)
        stats = pipeline.stats()
        summary.events_out = stats["events_out"]
        summary.events_held = stats["events_held"]
        summary.events_dropped = stats["events_dropped"]
        summary.events_restored = stats["events_restored"]
        summary.state_dir = str(config.state_dir)
        summary.dead_letter_file = str(config.dead_letter_path) if config.dead_letter_path else None
        summary.dead_lettered = stats["events_dead_lettered"]
    finally:
        if timer is not None:
            timer.stop()
        if bar is not None:
            bar.close()
        for sink in own_sinks:
            sink.close()
        pipeline.close()
    summary.seconds = time.perf_counter() - started
    return summary
