"""Partition task: one partition's records through the configured chain, with its own state store.

The task is a driver, like ``replay``: it builds a runtime (:class:`~sidecar.pipeline.Pipeline`) on the
partition's state folder whose one sink is the partition's output (:class:`PartitionOutput`), and reads the
partition's input (its shards in chunk order: records in input order) with the ``file`` source, resuming.
Every batch (``Job.commit_lines`` input lines) goes through ``Runtime.receive``, which commits the source's
position and the output's size (fsynced) with the filters' state, in one SQLite transaction of the
partition's state store: a task that is killed and retried (by Dask, on any worker) cuts the output back to
the last commit and continues there, so no event is lost or written twice. At the end the output is fsynced
and renamed into place.

The output is ``KEY<TAB>RECORD`` lines: ``KEY`` is the input position at which the record left the chain (its
own position when it went straight through; the position of the last record of the batch that released it,
when a buffer held it; :data:`~adapters.file.scale.inputs.END` for the final release), and lines are in key
order. To know a record's own position the runtime's decoding is watched (:class:`_Positioned`, a codec that
delegates to the input's and notes which event came from which record); the runtime still decodes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import resource
import socket
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from adapters.file.scale.inputs import END
from adapters.file.scale.job import Job, fsync_dir, private_file, tune_gc_once, write_json
from adapters.file.scale.split import SplitResult, shard_name
from adapters.file.sink import TextWriter
from adapters.file.source import FileSource, FileSourceConfig
from sidecar.api import BadRecord, BuildContext, Codec, Event, Receipt, RecordBatch, Sink, SinkConfig
from sidecar.commandkit import setup_logs
from sidecar.config import ComponentSpec
from sidecar.drive import PrescanError, drop_reasons, prescan
from sidecar.pipeline import Pipeline


@dataclass(frozen=True)
class PartResult:
    """What a partition did (cumulative over retries) and the worker process it finished on."""

    partition: int
    records_in: int
    events_out: int
    events_held: int
    events_dropped: int
    events_restored: int
    dead_lettered: int
    seconds: float
    pid: int
    host: str
    #: high-water resident set size of the worker process, MiB
    peak_rss_mib: float
    #: events dropped by ``filter.reason``, and dead letters by reason (of the last attempt)
    drop_reasons: dict[str, int] = field(default_factory=dict)
    dead_reasons: dict[str, int] = field(default_factory=dict)


def output_name(p: int) -> str:
    return f"part-{p:04d}.out"


def partition_task(job: Job, p: int, splits: list[SplitResult]) -> PartResult:
    """Run partition ``p`` (see the module docstring). ``splits``: the split tasks it depends on."""
    started = time.perf_counter()
    final = job.path(output_name(p))
    summary = job.path(f"part-{p:04d}.json")
    if final.exists() and summary.exists():
        return PartResult(**json.loads(summary.read_text()))
    in_path, positions = _partition_input(job, p, [s.chunk for s in splits])
    cfg = job.config(job.partition_dir(p))
    setup_logs(cfg)
    seed = None if job.seed is None else job.seed * 1_000_003 + p
    tmp = final.with_name(final.name + ".tmp")
    spec = ComponentSpec("partition_output", PartitionOutput, PartitionOutputConfig(str(tmp), job.run_id), "output")
    header = job.header is not None
    runtime = _PartitionRuntime(cfg, positions, 2 if header else 1, seed=seed, with_sinks=False, extra_sinks=[spec])
    tune_gc_once()
    try:
        output = runtime.output
        output.restored = runtime.chain.restored
        limits = cfg.sidecar.limits
        source = FileSource(
            FileSourceConfig(
                path=str(in_path),
                format=job.fmt,  # type: ignore[arg-type]  # tsv or jsonl, from the input's files
                batch_size=job.commit_lines,
                max_record_bytes=limits.max_record_bytes,
                resume=True,
            ),
            runtime.ctx,
        )
        if job.prescan is not False:
            try:
                prescan(runtime, source)
            except PrescanError as exc:
                if job.prescan or exc.reason != "no_prescan_filter":
                    raise
        source.start(runtime)
        runtime.release(final=True)
        output.finish()
        held = runtime.held()
        stats = runtime.stats()
        counts = output.counts
        records_in = len(positions)
        result = PartResult(
            partition=p,
            records_in=records_in,
            events_out=counts["out"],
            events_held=held,
            events_dropped=max(0, records_in + counts["restored"] - counts["out"] - held),
            events_restored=counts["restored"],
            dead_lettered=counts["dead"],
            seconds=time.perf_counter() - started,
            pid=os.getpid(),
            host=socket.gethostname(),
            peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
            drop_reasons=drop_reasons(stats["filters"]),
            dead_reasons=dict(stats["dead_letters"]),
        )
        write_json(summary, asdict(result))
        os.replace(tmp, final)
        fsync_dir(final.parent)
        return result
    finally:
        runtime.close()


class _PartitionRuntime(Pipeline):
    """The partition's runtime: before each batch goes through ``receive`` (unchanged), it tells the output
    the batch's input positions, so the output can key each record by where it left the chain."""

    def __init__(self, config: Any, positions: np.ndarray[Any, Any], first_line: int, **kwargs: Any) -> None:
        super().__init__(config, **kwargs)
        output = self.sinks[0]
        assert isinstance(output, PartitionOutput)
        self.output = output
        self.positions = positions
        self.first_line = first_line  # the input line of the partition's first record (after the header)

    def receive(self, batch: RecordBatch) -> Receipt:
        keys: list[int] = []
        if batch.records:
            lines = np.asarray(batch.positions, dtype=np.int64) - self.first_line
            keys = self.positions[lines].tolist()
            self.output.last = keys[-1]
        try:
            return super().receive(dataclasses.replace(batch, codec=_Positioned(batch.codec, keys, self.output.keys)))
        finally:
            self.output.keys.clear()

    def release(self, final: bool) -> int:
        if final:
            self.output.last = END
        return super().release(final)


class _Positioned(Codec):
    """The input's codec, noting for each event it decodes the input position of its record (``keys``:
    ``id(event) -> position``, read by the output while the batch is in the runtime)."""

    def __init__(self, inner: Codec, positions: Sequence[int], keys: dict[int, int]) -> None:
        self.inner = inner
        self.format = inner.format  # type: ignore[misc]  # the input's format, per instance
        self._positions = positions
        self._keys = keys

    def header_for_output(self) -> str | None:
        return self.inner.header_for_output()

    def decode_many(self, records: Sequence[Any], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        before = len(bad)
        events = self.inner.decode_many(records, eol, bad)
        skip = {i for i, _ in bad[before:]}
        kept = [k for i, k in enumerate(self._positions) if i not in skip] if skip else self._positions
        self._keys.update(zip(map(id, events), kept, strict=True))
        return events

    def encode(self, event: Event) -> Any:
        return self.inner.encode(event)


@dataclass(frozen=True)
class PartitionOutputConfig(SinkConfig):
    """Where a partition's output goes, and the run it belongs to (a new run starts it afresh)."""

    path: str = ""
    run: str = ""


def _create_outputs(db: Any) -> None:
    db.execute(
        "CREATE TABLE IF NOT EXISTS partition_outputs (run TEXT PRIMARY KEY, bytes INTEGER NOT NULL, counts TEXT)"
    )


class PartitionOutput(Sink[PartitionOutputConfig]):
    """``KEY<TAB>RECORD`` lines in key order. Each flush fsyncs the file and records its size and the run's
    counts (events out, dead letters, events restored at the run's start) in the state store, in a SAVEPOINT of
    the runtime's transaction: they commit with the batch. A retried task's start cuts the file back to the
    recorded size and carries on the counts."""

    NAME = "partition_output"
    Config = PartitionOutputConfig

    def __init__(self, config: PartitionOutputConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        #: ``id(event) -> input position`` of the batch in the runtime (filled while it decodes)
        self.keys: dict[int, int] = {}
        #: the key of events released by the batch in the runtime: the position of its last record
        self.last = 0
        #: events held at the run's start (restored from earlier runs), set by the task before the first batch
        self.restored = 0
        self.counts: dict[str, int] = {}
        self.writer: TextWriter | None = None
        self._codec: Codec | None = None
        self._dead = (0, 0)  # dead letters of earlier attempts, and the runtime's count at this start
        assert ctx.state is not None
        ctx.state.migrate("partition_output", [_create_outputs])  # here: never inside the runtime's transaction

    def start(self, header: str | None, codec: Codec | None) -> None:
        state = self.ctx.state
        assert state is not None and self.ctx.dead_letters is not None
        row = state.conn.execute(
            "SELECT bytes, counts FROM partition_outputs WHERE run = ?", (self.config.run,)
        ).fetchone()
        size, self.counts = (int(row[0]), json.loads(row[1])) if row else (0, {"out": 0, "dead": 0})
        self.counts.setdefault("restored", self.restored)
        self._dead = (self.counts["dead"], self.ctx.dead_letters.total)
        self._codec = codec
        self.writer = TextWriter(self.config.path, resume_at=size)

    def write(self, events: list[Event]) -> None:
        if not events:
            return
        if self.writer is None:
            self.start(None, None)
        assert self.writer is not None and self._codec is not None
        keys, last, encode = self.keys, self.last, self._codec.encode
        keyed = sorted(((keys.get(id(ev), last), ev) for ev in events), key=lambda t: t[0])  # stable
        parts: list[str] = []
        for k, ev in keyed:
            try:
                parts.append(f"{k}\t{encode(ev)}\n")
            except BadRecord as exc:
                if self.ctx.dead_letters is not None:
                    self.ctx.dead_letters.add(exc.reason, "sink:scale", None, None)
                continue
            self.counts["out"] += 1
        self.writer.write_text("".join(parts), True)

    def flush(self) -> None:
        if self.writer is None:
            return
        self.writer.flush()
        fd = self.writer.fileno()
        os.fsync(fd)
        state, dead = self.ctx.state, self.ctx.dead_letters
        assert state is not None and dead is not None
        self.counts["dead"] = self._dead[0] + dead.total - self._dead[1]
        with state.lock:
            state.conn.execute("SAVEPOINT partition_output")
            state.conn.execute(
                "INSERT INTO partition_outputs(run, bytes, counts) VALUES (?, ?, ?) ON CONFLICT(run) DO UPDATE "
                "SET bytes = excluded.bytes, counts = excluded.counts",
                (self.config.run, os.fstat(fd).st_size, json.dumps(self.counts)),
            )
            state.conn.execute("RELEASE partition_output")

    def finish(self) -> None:
        """The output complete on disk (created, if the partition had no record) and its counts recorded."""
        if self.writer is None:
            self.start(None, None)
        self.flush()
        self.close()

    def close(self) -> None:
        writer, self.writer = self.writer, None
        if writer is not None:
            writer.close()


def _partition_input(job: Job, p: int, chunks: list[int]) -> tuple[Path, np.ndarray[Any, np.dtype[np.int64]]]:
    """The partition's input file (the header, then its shards in chunk order) and the records' positions. The
    run's id is in its name: the file source's committed position is this run's, never an earlier run's."""
    in_path = job.path(f"part-{p:04d}-{job.run_id}.in.{job.fmt}")
    pos_path = job.path(f"part-{p:04d}.in.pos")
    if not (in_path.exists() and pos_path.exists()):
        tmp_in = in_path.with_name(in_path.name + ".tmp")
        tmp_pos = pos_path.with_name(pos_path.name + ".tmp")
        with private_file(tmp_in) as out, private_file(tmp_pos) as pos_out:
            if job.header is not None:
                out.write(job.header.encode("utf-8") + b"\n")
            for c in sorted(chunks):
                shard = job.path(shard_name(c, p))
                for src, dst in ((shard.with_suffix(".lines"), out), (shard.with_suffix(".pos"), pos_out)):
                    with open(src, "rb") as piece:
                        while block := piece.read(1 << 20):
                            dst.write(block)
            for done in (out, pos_out):
                done.flush()
                os.fsync(done.fileno())
        os.replace(tmp_pos, pos_path)
        os.replace(tmp_in, in_path)
    return in_path, np.fromfile(pos_path, dtype="<i8")
