"""``replay --workers N`` / ``--scheduler``: the input partitioned by user, each partition on a Dask worker.

Three steps: split tasks (one per input chunk, :mod:`adapters.file.scale.split`) write one shard per partition;
partition tasks (:mod:`adapters.file.scale.worker`) each run the configured chain with their own state store
(``STATE_DIR/partitions/PPPP-of-NNNN``); the client merges their outputs (:mod:`adapters.file.scale.merge`).
Work files live in ``STATE_DIR/partitions/run-of-NNNN`` until the run completes. The scheduler is Dask's
local process pool (default), its thread pool or synchronous scheduler, or a ``distributed`` scheduler
address (``tcp://HOST:PORT``); the state folder and the input must then be on a filesystem every worker sees.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import structlog

from adapters.file.scale.inputs import Chunk, expand, plan, read_header
from adapters.file.scale.job import Job, exit_with_parent, partition_dir, private_folder, write_json
from adapters.file.scale.merge import merge, write_split
from adapters.file.scale.partition import partition_key
from adapters.file.scale.sizing import small_partitions
from adapters.file.scale.split import SplitResult, dead_letter_name, split_task
from adapters.file.scale.worker import PartResult, output_name, partition_task
from sidecar.config import load_config
from sidecar.drive import reasons
from sidecar.state import remove_state_database, state_lock

log = structlog.get_logger("querylog.replay")

LOCAL = ("processes", "threads", "synchronous")
"""Dask's local schedulers; anything else is a ``distributed`` scheduler address."""


class ScaleError(ValueError):
    """A scaled replay cannot start as asked (options, input, output)."""


@dataclass
class ScaleSummary:
    """Counts over all partitions, and each partition's own result."""

    partitions: int
    scheduler: str
    outputs: list[str] = field(default_factory=list)
    records_in: int = 0
    events_out: int = 0
    events_held: int = 0
    events_dropped: int = 0
    dead_lettered: int = 0
    seconds: float = 0.0
    parts: list[PartResult] = field(default_factory=list)
    #: events dropped by ``filter.reason``, dead letters by reason (over all tasks)
    drop_reasons: dict[str, int] = field(default_factory=dict)
    dead_reasons: dict[str, int] = field(default_factory=dict)
    #: the run had completed before (``--resume`` after the end): nothing was replayed
    already_done: bool = False
    #: wall seconds: the longest split task, the longest partition task, the merge (or --split) in the client
    split_seconds: float = 0.0
    partition_seconds: float = 0.0
    merge_seconds: float = 0.0

    @property
    def events_per_second(self) -> float:
        return self.records_in / self.seconds if self.seconds > 0 else 0.0

    def peak_rss_by_worker(self) -> dict[str, float]:
        """High-water RSS (MiB) of each worker process that finished a partition, by ``host:pid``."""
        peaks: dict[str, float] = {}
        for r in self.parts:
            k = f"{r.host}:{r.pid}"
            peaks[k] = max(peaks.get(k, 0.0), r.peak_rss_mib)
        return peaks

    def line(self) -> str:
        if self.already_done:
            return f"partitions={self.partitions}: this run had completed; output kept"
        rss = ",".join(f"{v:.0f}" for v in self.peak_rss_by_worker().values())
        return (
            f"records in={self.records_in} out={self.events_out} held={self.events_held} "
            f"dropped={self.events_dropped} dead_letter={self.dead_lettered} partitions={self.partitions} "
            f"scheduler={self.scheduler} seconds={self.seconds:.3f} events/s={self.events_per_second:,.0f} "
            f"peak_rss_mib={rss} (longest split task {self.split_seconds:.1f} s, partition task "
            f"{self.partition_seconds:.1f} s, merge {self.merge_seconds:.1f} s)"
            + reasons(self.drop_reasons, self.dead_reasons)
        )


def scaled_replay(
    config_file: str,
    input_spec: str,
    output: str,
    *,
    workers: int,
    scheduler: str | None = None,
    split: bool = False,
    seed: int | None = None,
    resume: bool = False,
    prescan: bool | None = None,
    state_dir: str | None = None,
    fresh_state: bool = False,
    commit_lines: int = 20_000,
) -> ScaleSummary:
    """Replay ``input_spec`` (a file, glob or folder) through the chain in ``workers`` partitions."""
    started = time.perf_counter()
    if workers < 1:
        raise ScaleError("--workers must be at least 1")
    if output in ("", "-"):
        raise ScaleError("--workers/--scheduler need -o OUTPUT (a file)")
    if fresh_state and resume:
        raise ScaleError("--fresh-state and --resume contradict each other")
    cfg = load_config(config_file)
    base = os.path.abspath(state_dir) if state_dir else str(cfg.state_dir)
    # one run per state folder: the parent holds its lock for the run (another serve or replay is refused); the
    # partition tasks lock their own folders and charge the ledger of this one (filters/dp_replace/budget.py)
    with state_lock(base):
        private_folder(Path(base) / "partitions")
        files = expand(input_spec)
        _warn_if_small(files, workers)
        fmt, header = read_header(files, cfg.sidecar.schema)
        output = os.path.abspath(output)
        if fresh_state:
            remove_state_database(Path(base))
            for p in range(workers):
                remove_state_database(Path(partition_dir(base, p, workers)))
        run_dir = Path(base) / "partitions" / f"run-of-{workers:04d}"
        ident = {"inputs": files, "output": output, "partitions": workers, "split": split}
        run_id = _start_run(run_dir, ident, resume)
        summary = ScaleSummary(workers, scheduler or "processes")
        if run_id is None:
            summary.already_done = True
            return summary
        job = Job(
            config_file=os.path.abspath(config_file),
            state_dir=base,
            partitions=workers,
            run_dir=str(run_dir),
            run_id=run_id,
            key=partition_key(),
            fmt=fmt,
            header=header,
            seed=seed,
            prescan=prescan,
            commit_lines=commit_lines,
        )
        chunks = plan(files, workers)
        splits, parts = _compute(job, chunks, scheduler or "processes")
        parts_paths = [run_dir / output_name(p) for p in range(workers)]
        last = next((s for s in splits if s.no_final_newline), None)  # the chunk that read the input's open end
        merging = time.perf_counter()
        if split:
            summary.outputs = write_split(parts_paths, output, header)
        else:
            merge(parts_paths, output, header, last.last_position if last is not None else None)
            summary.outputs = [output]
        summary.merge_seconds = time.perf_counter() - merging
        summary.split_seconds = max((s.seconds for s in splits), default=0.0)
        summary.partition_seconds = max((r.seconds for r in parts), default=0.0)
        _keep_dead_letters(job, job.config().dead_letter_path, chunks)
        _add_up(summary, splits, parts)
        _finish_run(run_dir, ident, run_id)
        summary.seconds = time.perf_counter() - started
        return summary


def _warn_if_small(files: list[str], workers: int) -> None:
    """Log ``small_partitions`` when the input is too small for ``workers`` partitions (:mod:`.sizing`)."""
    small = small_partitions(files, workers)
    if small is not None:
        log.warning(
            "small_partitions",
            partitions=small.partitions,
            input_mib=round(small.input_bytes / 2**20, 1),
            suggested_workers=small.suggested,
            why=(
                "each partition costs a process and a chain (a small input gains little or runs slower), and "
                "each partition's buffers need k users of their own: about as many events stay held per "
                "partition as in one process"
            ),
        )


def _add_up(summary: ScaleSummary, splits: list[SplitResult], parts: list[PartResult]) -> None:
    """The partitions' counts (and the split tasks' dead letters) into ``summary``."""
    for r in sorted(parts, key=lambda r: r.partition):
        summary.parts.append(r)
        summary.records_in += r.records_in
        summary.events_out += r.events_out
        summary.events_held += r.events_held
        summary.events_dropped += r.events_dropped
        summary.dead_lettered += r.dead_lettered
        _add(summary.drop_reasons, r.drop_reasons)
        _add(summary.dead_reasons, r.dead_reasons)
    summary.dead_lettered += sum(s.dead_lettered for s in splits)
    for s in splits:
        _add(summary.dead_reasons, s.dead_reasons)


def _add(total: dict[str, int], counts: dict[str, int]) -> None:
    for k, v in counts.items():
        total[k] = total.get(k, 0) + v


def _compute(job: Job, chunks: list[Chunk], scheduler: str) -> tuple[list[SplitResult], list[PartResult]]:
    """Build the task graph and run it on the chosen scheduler."""
    from dask.base import compute
    from dask.delayed import delayed

    private_folder(Path(job.run_dir, "split"))
    split_tasks = [delayed(split_task, pure=False)(job, c, dask_key_name=f"split-{c.index}") for c in chunks]
    part_tasks = [
        delayed(partition_task, pure=False)(job, p, split_tasks, dask_key_name=f"partition-{p}")
        for p in range(job.partitions)
    ]
    graph: Any = (split_tasks, part_tasks)
    if scheduler in LOCAL:
        # chunksize=1: one task per submission (the process pool batches 6 by default: partitions would queue)
        # initializer: a worker process exits when this process is gone (kill -9 leaves no worker behind)
        splits, parts = compute(  # type: ignore[no-untyped-call]
            *graph, scheduler=scheduler, num_workers=job.partitions, chunksize=1, initializer=exit_with_parent
        )
    else:
        from distributed import Client

        with Client(scheduler) as client:  # type: ignore[no-untyped-call]  # distributed has no annotations here
            splits, parts = compute(*graph, scheduler=client)  # type: ignore[no-untyped-call]
    return list(splits), list(parts)


def _start_run(run_dir: Path, ident: dict[str, Any], resume: bool) -> str | None:
    """The run id to use: the unfinished (or, None, finished) run's with ``resume``, else a new one."""
    marker = run_dir / "run.json"
    if resume and marker.exists():
        prior = json.loads(marker.read_text())
        if prior.get("ident") == ident:
            return None if prior.get("complete") else str(prior["run_id"])
    if run_dir.exists():
        shutil.rmtree(run_dir)
    private_folder(run_dir)
    run_id = uuid.uuid4().hex
    write_json(marker, {"ident": ident, "run_id": run_id, "complete": False})
    return run_id


def _finish_run(run_dir: Path, ident: dict[str, Any], run_id: str) -> None:
    """Mark the run complete (a later ``--resume`` finds nothing to do) and remove its work files."""
    for child in run_dir.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
        elif child.name != "run.json":
            child.unlink()
    write_json(run_dir / "run.json", {"ident": ident, "run_id": run_id, "complete": True})


def _keep_dead_letters(job: Job, target: Path | None, chunks: list[Chunk]) -> None:
    """Append the split tasks' dead letters to the base state folder's dead-letter file."""
    if target is None:
        return
    sources = [job.path(dead_letter_name(c.index)) for c in chunks]
    sources = [s for s in sources if s.exists() and s.stat().st_size]
    if not sources:
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
    try:
        for s in sources:
            os.write(fd, s.read_bytes())
    finally:
        os.close(fd)
