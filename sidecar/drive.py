"""Drivers: build the runtime with its sinks, start a source, wait (``replay``, ``filter``; ``serve`` is one too).

A driver never decodes, runs the chain or delivers: the source hands every batch to ``Runtime.receive``, which
decodes, dead-letters, runs the chain, delivers to the sinks and commits (with the source's position, when it
resumes). The driver picks the components — through the registry, like a config does — and owns what is
around the run: a first pass over a rewindable input (:func:`prescan`), the release timer while a stream is
idle, SIGTERM, the progress bar, the final release and the summary.

``replay`` here is the one-process replay (``querylog replay``, ``querylog filter``); the partition task of
``replay --workers`` (``adapters/file/scale``) drives the same way, one runtime per partition.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import structlog

from sidecar.api import SINKS, SOURCES, ConfigValueError, SchemaConfig
from sidecar.codecs import format_from_path
from sidecar.commitgroups import CommitGroups
from sidecar.config import ComponentSpec, ConfigError, LoadedConfig
from sidecar.gctune import tune_gc
from sidecar.pipeline import Pipeline, build_component
from sidecar.prescan import BackgroundPrescan
from sidecar.prescan import PrescanError as PrescanError  # re-exported: the partition task and replay's CLI
from sidecar.prescan import prescan as prescan
from sidecar.registry import plugins
from sidecar.replayprogress import ReplayProgress, StatsSnapshot
from sidecar.signals import StopFlag

log = structlog.get_logger("querylog.replay")

#: seconds between looks at the stop flag (SIGTERM) and the progress bar while a source runs
WATCH_SECONDS = 0.1


class ResumeError(ValueError):
    """``--resume`` asked for with an input or output it cannot resume."""


NO_POSITION = "--resume needs an input file (stdin or a pipe has no position to resume from)"


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
    #: events dropped, by ``filter.reason`` (the filters' drop and suppression counts)
    drop_reasons: dict[str, int] = field(default_factory=dict)
    #: dead letters by reason
    dead_reasons: dict[str, int] = field(default_factory=dict)
    #: the input's text format, and how it was chosen when neither the config nor the path said
    input_format: str = ""

    @property
    def events_per_second(self) -> float:
        return self.records_in / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        return (
            f"records in={self.records_in} events in={self.events_in} out={self.events_out} "
            f"held={self.events_held} dropped={self.events_dropped} dead_letter={self.dead_lettered} "
            f"seconds={self.seconds:.3f} events/s={self.events_per_second:,.0f}"
            + (f" dead_letter_file={self.dead_letter_file}" if self.dead_lettered and self.dead_letter_file else "")
            + reasons(self.drop_reasons, self.dead_reasons)
            + (" (interrupted)" if self.interrupted else "")
            + (
                f" restored={self.events_restored} (held by an earlier run, from {self.state_dir})"
                if self.events_restored
                else ""
            )
        )


def reasons(dropped: Mapping[str, int], dead: Mapping[str, int]) -> str:
    """The end of a summary line: `` dropped_by: f.reason=3 dead_letter_by: reason=1`` (largest first; the parts
    with no count left out)."""

    def shown(counts: Mapping[str, int]) -> str:
        return " ".join(f"{k}={v}" for k, v in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])) if v)

    parts = [
        (f" {label}: {shown(c)}" if shown(c) else "")
        for label, c in (("dropped_by", dropped), ("dead_letter_by", dead))
    ]
    return "".join(parts)


#: words in a filter's ``counts`` key that make it a count of events the filter did not pass on
DROP_WORDS = ("dropped", "suppressed")


def drop_reasons(filters: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """``filter.reason -> events`` from the chain's per-filter stats (:meth:`Pipeline.stats` ``filters``): the
    drop and suppression counts of every filter that dropped events."""
    out: dict[str, int] = {}
    for f in filters:
        for key, n in f.get("counts", {}).items():
            if n and any(w in key for w in DROP_WORDS) and "dead" not in key:
                out[f"{f['name']}.{key}"] = out.get(f"{f['name']}.{key}", 0) + int(n)
    return out


def registered(group: str, name: str, where: str, **options: Any) -> ComponentSpec:
    """The component registered as ``name`` in ``group`` (``SOURCES``, ``SINKS``) with ``options`` (its YAML
    keys), ready for :func:`~sidecar.pipeline.build_component`; ``where`` names it in errors."""
    cls = plugins(group)[name]
    return ComponentSpec(name, cls, cls.Config(**options), where)


def input_format(schema: SchemaConfig, path: str) -> str:
    """The text format of input ``path``: the schema's, else by extension, else TSV (as the file source reads)."""
    return schema.format if schema.format != "auto" else format_from_path(path) or "tsv"


# ---- running a source ---------------------------------------------------------------------------------


def run(
    source: Any,
    runtime: Pipeline,
    stop: StopFlag | None = None,
    bar: ReplayProgress | None = None,
    into: Any = None,
    stats: StatsSnapshot | None = None,
) -> None:
    """``source.start(runtime)`` on this thread, to the end of its input; when ``stop`` is set (SIGTERM) the
    source is told to stop (it lets the batch in hand finish). ``bar`` follows ``source.progress()`` and ``stats``
    (default: a :class:`.StatsSnapshot` of ``runtime``: the watcher never waits for the runtime's lock, which a
    commit group holds until after this returns). ``into``: what the source drives instead of ``runtime`` itself
    (``--resume``'s :class:`.CommitGroups`)."""
    if stop is None and bar is None:
        source.start(into or runtime)
        return
    done = threading.Event()
    snapshot = stats if stats is not None else StatsSnapshot(runtime)

    def watch() -> None:
        stopped = False
        while not done.wait(WATCH_SECONDS):
            if stop and not stopped:
                source.stop()
                stopped = True
            if bar is not None and not done.is_set():
                done_records, total = source.progress()
                bar.update(done_records, total, snapshot)

    watcher = threading.Thread(target=watch, name="querylog-watch", daemon=True)
    watcher.start()
    try:
        source.start(into or runtime)
    finally:
        done.set()
        watcher.join()


# ---- replay -------------------------------------------------------------------------------------------

_gc_tuned = False


def _tune_gc_once() -> None:
    """:func:`~sidecar.gctune.tune_gc` once per process, after the first chain is built (the knowledge base
    and name data then leave the collector's scans): it halved decoding's CPU and took a fifth off
    ``category_buffer``'s on a generated archive."""
    global _gc_tuned
    if not _gc_tuned:
        _gc_tuned = True
        tune_gc()


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
    """Replay ``input_path`` (``file`` source) through the chain into ``output`` (a ``file`` sink: a path, ``-``
    for stdout), else the configured sinks, else stdout.

    ``resume``: exactly once into a plain output file: the source's position, the sink's size (fsynced) and the
    filters' state commit together every :data:`~sidecar.commitgroups.GROUP_BATCHES` batches (one transaction:
    :class:`~sidecar.commitgroups.CommitGroups`); after a crash (even kill -9) the same command cuts the output
    back to the last commit and continues from there.

    ``prescan``: a first pass over the input (:func:`prescan`) for the filters that learn from an archive's
    future. ``None`` (auto): made when the chain has such a filter; when the input or the chain cannot serve it,
    ``prescan_skipped`` is logged with the reason and the input is replayed as a stream.

    From stdin or a pipe each batch is written out as soon as it is read, and every ``flush_interval`` seconds
    buffering filters are asked to release (the runtime's timer), also while the input is idle.
    """
    started = time.perf_counter()
    if resume and (output is None or output == "-" or output.endswith(".gz")):
        raise ResumeError("--resume needs -o OUTPUT, a plain (not .gz) file")
    fmt = input_format(config.sidecar.schema, input_path)
    if config.sidecar.schema.format == "auto" and format_from_path(input_path) is None:
        fmt = "auto"  # known by its content only: the file source sniffs it, the output follows the records
    own: list[ComponentSpec] = []
    if output is not None or not config.sinks:
        path = os.path.abspath(output) if output and output != "-" else "-"  # -o is relative to the cwd
        mode = "resume" if resume else "truncate"
        own.append(registered(SINKS, "file", "replay --output", path=path, format=fmt, mode=mode))
    pipeline = Pipeline(config, seed=seed, with_sinks=output is None, extra_sinks=own)
    bar: ReplayProgress | None = None
    first: BackgroundPrescan | None = None
    try:
        _tune_gc_once()
        limits = config.sidecar.limits
        options = {"format": fmt, "batch_size": limits.batch_size, "max_record_bytes": limits.max_record_bytes}
        if resume and input_path == "-":
            raise ResumeError(NO_POSITION)
        path = input_path if input_path == "-" else os.path.abspath(input_path)
        spec = registered(SOURCES, "file", "replay INPUT", path=path, resume=resume, **options)
        source = build_component(spec, pipeline.ctx, config)
        if not source.rewindable:
            if resume:
                raise ResumeError(NO_POSITION)
            if flush_interval is not None:
                pipeline.start_release_timer(flush_interval)
        if prescan is not False:  # may overlap the real pass (--resume: its commits wait for the result)
            first = _first_pass(pipeline, source, required=bool(prescan), background=True)
        if source.rewindable and not resume:
            _defer_commits(pipeline)
        # --resume: position, output size and state every 50 batches, none while batches wait for the first pass
        bar = ReplayProgress() if progress else None
        stats = StatsSnapshot(pipeline, ReplayProgress.REFRESH_SECONDS) if bar is not None else None
        waiting = first.waiting if first is not None else None
        groups = CommitGroups(pipeline, waiting, after_batch=stats.take if stats else None) if resume else None
        try:
            run(source, pipeline, stop, bar, groups, stats)
            pipeline.release(final=True)
            if groups is not None:  # batches that waited for the first pass to the end commit with the last group
                groups.commit()
        except BaseException as exc:
            if groups is not None:
                groups.roll_back(exc)
            if isinstance(exc, ConfigValueError):  # the schema cannot read this input (a role column it lacks)
                key = f"schema.{exc.key.removeprefix('schema.')}"
                problem = exc.problem + source.format_assumed
                raise ConfigError(str(config.file), config.doc.line(key), key, problem, exc.allowed) from None
            raise
        records_in, _ = source.progress()
        summary = _summary(pipeline, records_in, bool(stop))
        summary.input_format = source.format + (" (assumed from the first record)" if source.format_assumed else "")
    finally:
        if first is not None:
            first.close()
        if bar is not None:
            bar.close()
        pipeline.close()
    summary.seconds = time.perf_counter() - started
    return summary


#: Batches per state write of a filter that defers (``category_buffer``, ``profile``) in a file replay without
#: ``--resume``: a held row is written only when still held at a window's end (1,000 batches: on a 625k-line
#: archive only the end's; 50 wrote 47,000 rows, most of them deleted again, 3-5% of the replay). The window's
#: arrivals are a list entry each (8 bytes) until it ends.
DEFERRED_BATCHES = 1000


def _defer_commits(pipeline: Pipeline) -> None:
    """A file replay without ``--resume`` promises nothing before its end (a rerun reads the whole input again):
    filters that can (``defer_commits``) write their state every :data:`DEFERRED_BATCHES` batches and at the
    final release instead of with every batch."""
    for f in pipeline.chain.filters:
        defer = getattr(f, "defer_commits", None)
        if defer is not None:
            defer(DEFERRED_BATCHES)


def _first_pass(pipeline: Pipeline, source: Any, required: bool, background: bool) -> BackgroundPrescan | None:
    try:
        return prescan(pipeline, source, background)
    except PrescanError as exc:
        if required:
            raise
        if exc.reason != "no_prescan_filter":
            log.warning("prescan_skipped", reason=exc.reason)
        return None


def _summary(pipeline: Pipeline, records_in: int, interrupted: bool) -> ReplaySummary:
    stats = pipeline.stats()
    config = pipeline.config
    return ReplaySummary(
        records_in=records_in,
        events_in=stats["events_in"],
        events_out=stats["events_out"],
        events_held=stats["events_held"],
        events_dropped=stats["events_dropped"],
        dead_lettered=stats["events_dead_lettered"],
        interrupted=interrupted,
        events_restored=stats["events_restored"],
        state_dir=str(config.state_dir),
        dead_letter_file=str(config.dead_letter_path) if config.dead_letter_path else None,
        drop_reasons=drop_reasons(stats["filters"]),
        dead_reasons=dict(stats["dead_letters"]),
    )
