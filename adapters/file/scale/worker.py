"""Partition task: one partition's records through the configured chain, with its own state store.

The partition's input is its shards in chunk order (records in input order). Its output is written as
``KEY<TAB>RECORD`` lines to a temporary file: ``KEY`` is the input position at which the record left the
chain (its own position when it went straight through; the position of the last record of the batch that
released it, when a buffer held it; :data:`~adapters.file.scale.inputs.END` for the final flush), and lines are
in key order. Every ``Job.commit_lines`` input lines the output is fsynced and its size committed with the
filters' state and the input position, in one SQLite transaction of the partition's state store: a task
that is killed and retried (by Dask, on any worker) cuts the output back to the last commit and continues
there, so no event is lost or written twice. At the end the output is fsynced and renamed into place.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import sqlite_utils

from adapters.file.prescan import PrescanError, run_prescan
from adapters.file.reader import open_log
from adapters.file.scale.inputs import END
from adapters.file.scale.job import Job, fsync_dir, tune_gc_once, write_json
from adapters.file.scale.split import SplitResult, shard_name
from adapters.file.sink import TextWriter
from sidecar.api import BadRecord, Event
from sidecar.commandkit import setup_logs
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
    pipeline = Pipeline(cfg, seed=seed, with_sinks=False)
    tune_gc_once()
    tmp = final.with_name(final.name + ".tmp")
    writer: TextWriter | None = None
    try:
        ck = _Checkpoint(pipeline, job.run_id)
        done_line, out_bytes, counts = ck.load()
        if not counts:
            counts = {"in": 0, "out": 0, "dead": 0, "restored": pipeline.chain.restored}
        writer = TextWriter(str(tmp), resume_at=out_bytes if done_line else None)
        limits = cfg.sidecar.limits
        log_in = open_log(
            str(in_path),
            cfg.sidecar.schema,
            pipeline.dead,
            limits.max_record_bytes,
            limits.batch_size,
            skip_through=done_line,
        )
        codec, header, reader = log_in.codec, log_in.header, log_in.reader
        first_record_line = 2 if header is not None else 1
        if job.prescan is not False:
            try:
                run_prescan(cfg, pipeline, str(in_path))
            except PrescanError as exc:
                if job.prescan or exc.reason != "no_prescan_filter":
                    raise
        conn = pipeline.state.conn
        conn.execute("BEGIN IMMEDIATE")
        since = 0
        dead_before = pipeline.dead.total
        for batch in log_in.batches:
            numbers = [batch.line_number(i) for i in range(len(batch.lines))]
            keep = [i for i, n in enumerate(numbers) if n > done_line]
            if not keep:
                continue
            lines = [batch.lines[i] for i in keep]
            numbers = [numbers[i] for i in keep]
            bad: list[tuple[int, str]] = []
            events = codec.decode_many(lines, "\n", bad)
            for i, reason in bad:
                pipeline.dead.add(reason, str(in_path), numbers[i], lines[i])
            skip = {i for i, _ in bad}
            pos = positions[
                np.asarray([n for i, n in enumerate(numbers) if i not in skip], dtype=np.int64) - first_record_line
            ]
            alive = list(events)  # keeps every input event alive, so no released event can reuse an id below
            where = {id(ev): int(k) for ev, k in zip(alive, pos, strict=True)}
            last_key = int(positions[numbers[-1] - first_record_line])
            out = pipeline.process(events)
            _write(writer, codec, [(where.get(id(ev), last_key), ev) for ev in out], pipeline)
            del alive
            counts["in"] += len(events)
            counts["out"] += len(out)
            since += len(lines)
            if since >= job.commit_lines:
                counts["dead"] += pipeline.dead.total - dead_before
                dead_before = pipeline.dead.total
                ck.commit(numbers[-1], writer, counts)
                conn.execute("BEGIN IMMEDIATE")
                since = 0
        out = pipeline.flush(final=True)
        _write(writer, codec, [(END, ev) for ev in out], pipeline)
        counts["out"] += len(out)
        counts["dead"] += pipeline.dead.total - dead_before
        ck.commit(max(done_line, reader.lines_seen), writer, counts)
        writer.close()
        writer = None
        held = pipeline.held()
        result = PartResult(
            partition=p,
            records_in=counts["in"],
            events_out=counts["out"],
            events_held=held,
            events_dropped=max(0, counts["in"] + counts["restored"] - counts["out"] - held),
            events_restored=counts["restored"],
            dead_lettered=counts["dead"],
            seconds=time.perf_counter() - started,
            pid=os.getpid(),
            host=socket.gethostname(),
            peak_rss_mib=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0,
        )
        write_json(summary, asdict(result))
        os.replace(tmp, final)
        fsync_dir(final.parent)
        return result
    finally:
        if writer is not None:
            writer.close()
        if pipeline.state.conn.in_transaction:
            pipeline.state.conn.execute("ROLLBACK")
        pipeline.close()


def _write(writer: TextWriter, codec: Any, keyed: list[tuple[int, Event]], pipeline: Pipeline) -> None:
    """``KEY<TAB>RECORD`` lines in key order (stable); a record the format cannot frame is dead-lettered."""
    if not keyed:
        return
    keyed.sort(key=lambda t: t[0])
    parts: list[str] = []
    for k, ev in keyed:
        try:
            parts.append(f"{k}\t{codec.encode(ev)}\n")
        except BadRecord as exc:
            pipeline.dead.add(exc.reason, "sink:scale", None, None)
    writer.write_text("".join(parts), True)


def _partition_input(job: Job, p: int, chunks: list[int]) -> tuple[Path, np.ndarray[Any, np.dtype[np.int64]]]:
    """The partition's input file (the header, then its shards in chunk order) and the records' positions."""
    in_path = job.path(f"part-{p:04d}.in.{job.fmt}")
    pos_path = job.path(f"part-{p:04d}.in.pos")
    if not (in_path.exists() and pos_path.exists()):
        tmp_in = in_path.with_name(in_path.name + ".tmp")
        tmp_pos = pos_path.with_name(pos_path.name + ".tmp")
        with open(tmp_in, "wb") as out, open(tmp_pos, "wb") as pos_out:
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


def _create_checkpoints(db: sqlite_utils.Database) -> None:
    db.table("scale_checkpoints").create({"run": str, "line": int, "bytes": int, "counts": str}, pk="run")


class _Checkpoint:
    """A partition's input position, output size and counters, committed with the filters' state."""

    def __init__(self, pipeline: Pipeline, run_id: str) -> None:
        self.conn = pipeline.state.conn
        self.run = run_id
        pipeline.state.migrate("scale", [_create_checkpoints])

    def load(self) -> tuple[int, int, dict[str, int]]:
        row = self.conn.execute(
            "SELECT line, bytes, counts FROM scale_checkpoints WHERE run = ?", (self.run,)
        ).fetchone()
        return (int(row[0]), int(row[1]), json.loads(row[2])) if row else (0, 0, {})

    def commit(self, line: int, writer: TextWriter, counts: dict[str, int]) -> None:
        """fsync the output; its size, the input line and the counters commit with the batch's state."""
        writer.flush()
        fd = writer.fileno()
        os.fsync(fd)
        size = os.fstat(fd).st_size
        self.conn.execute(
            "INSERT INTO scale_checkpoints(run, line, bytes, counts) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(run) DO UPDATE SET line = excluded.line, bytes = excluded.bytes, counts = excluded.counts",
            (self.run, line, size, json.dumps(counts)),
        )
        self.conn.execute("COMMIT")
