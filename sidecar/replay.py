"""File replay: a log file through the chain into a file, stdout or the configured sinks."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType

from adapters.files import FileSink, FileSinkConfig, LineBatch, LineReader, read_header
from sidecar.api import ConfigValueError, Sink
from sidecar.config import LoadedConfig
from sidecar.configload import ConfigError
from sidecar.pipeline import Pipeline
from sidecar.records import codec_for


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

    @property
    def events_per_second(self) -> float:
        return self.records_in / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        return (
            f"records in={self.records_in} events in={self.events_in} out={self.events_out} "
            f"held={self.events_held} dropped={self.events_dropped} dead_letter={self.dead_lettered} "
            f"seconds={self.seconds:.3f} events/s={self.events_per_second:,.0f}"
            + (" (interrupted)" if self.interrupted else "")
        )


class StopFlag:
    """Set by SIGTERM/SIGINT: stop reading, finish the batch in flight, flush, close."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum: int, frame: FrameType | None) -> None:
            self.event.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def __bool__(self) -> bool:
        return self.event.is_set()


def _progress(batches: Iterator[LineBatch], reader: LineReader, path: str, show: bool) -> Iterator[LineBatch]:
    if not show:
        yield from batches
        return
    from tqdm import tqdm

    total = os.path.getsize(path) if path != "-" and not path.endswith(".gz") else None
    with tqdm(total=total, unit="B", unit_scale=True, file=sys.stderr, leave=False) as bar:
        seen = 0
        for batch in batches:
            bar.update(reader.bytes_read - seen)
            seen = reader.bytes_read
            yield batch


def replay(
    config: LoadedConfig,
    input_path: str,
    output: str | None,
    *,
    seed: int | None = None,
    progress: bool = False,
    stop: StopFlag | None = None,
) -> ReplaySummary:
    """Replay ``input_path`` through the configured chain. Output: ``output``, else the sinks, else stdout."""
    started = time.perf_counter()
    stop = stop if stop is not None else StopFlag()  # `or` would drop an unset flag (it is falsy)
    pipeline = Pipeline(config, seed=seed, with_sinks=output is None)
    summary = ReplaySummary()
    sinks: list[Sink] = pipeline.sinks
    own_sinks: list[Sink] = []
    if output is not None or not sinks:
        path = os.path.abspath(output) if output and output != "-" else "-"  # -o is relative to the cwd
        own_sinks = [FileSink(FileSinkConfig(path=path), pipeline.ctx, config.sidecar.schema)]
        sinks = own_sinks
    try:
        codec = codec_for(config.sidecar.schema, input_path)
        reader = LineReader(input_path, pipeline.dead, config.sidecar.limits.max_record_bytes, stop=stop.__bool__)
        batches: Iterator[LineBatch] = reader.batches(config.sidecar.limits.batch_size)
        header = None
        if codec.format == "tsv" and config.sidecar.schema.header:
            header, batches = read_header(batches)
            if header is not None:
                try:
                    codec.accept_header(header.rstrip("\n"))
                except ConfigValueError as exc:
                    raise ConfigError(input_path, 1, "header", exc.problem) from None
        for sink in sinks:
            sink.start(header, codec)
        dead = pipeline.dead
        decode_many = codec.decode_many  # type: ignore[attr-defined]
        for batch in _progress(batches, reader, input_path, progress):
            bad: list[tuple[int, str]] = []
            events = decode_many(batch.lines, "\n", bad)
            for idx, reason in bad:
                dead.add(reason, input_path, batch.line_number(idx), batch.lines[idx])
            if batch.last_eol == "" and events and (not bad or bad[-1][0] != len(batch.lines) - 1):
                events[-1].eol = ""
            summary.events_in += len(events)
            out = pipeline.process(events)
            for sink in sinks:
                sink.write(out)
            if stop:
                break
        summary.interrupted = bool(stop)
        out = pipeline.flush(final=True)
        for sink in sinks:
            sink.write(out)
            sink.flush()
        summary.records_in = reader.lines_seen - (1 if header is not None else 0)
        stats = pipeline.stats()
        summary.events_out = stats["events_out"]
        summary.events_held = stats["events_held"]
        summary.events_dropped = stats["events_dropped"]
        summary.dead_lettered = stats["events_dead_lettered"]
    finally:
        for sink in own_sinks:
            sink.close()
        pipeline.close()
    summary.seconds = time.perf_counter() - started
    return summary
