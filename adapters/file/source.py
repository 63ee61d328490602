"""The ``file`` source: a log file (TSV or JSON lines, plain or gzip; ``-`` is stdin; a named pipe or
``<(zcat a.gz)`` is read as it comes, like stdin) into the runtime, batch by batch.

``replay``, ``filter``, ``serve`` and the partition task of ``replay --workers`` all read files through it:
each batch goes to ``runtime.receive`` and the next is read when it returned. With ``resume`` the read
position is committed with each batch (``RecordBatch.checkpoint``, in the runtime's transaction with the
chain's state and the delivery) and a restart skips what was committed. A file (not a stream) can be read
twice: :meth:`FileSource.prescan_batches` gives the whole input again for a first pass (``replay --prescan``).
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from adapters.file.progress import LineCount
from adapters.file.reader import LineBatch, LineReader, is_stream, open_log
from sidecar.api import (
    Backpressure,
    BuildContext,
    Codec,
    ConfigValueError,
    RecordBatch,
    Runtime,
    SchemaConfig,
    Source,
    SourceConfig,
    option,
)

#: seconds between looks at a full outbox (``Runtime.backpressure``) before a refused batch is offered again
BACKPRESSURE_POLL = 0.05


@dataclass(frozen=True)
class FileSourceConfig(SourceConfig):
    """Read a log file once, from start to end."""

    path: str = option(doc="Input path (relative to the config file); .gz is read compressed; `-` is stdin.")
    format: Literal["auto", "tsv", "jsonl", "access_log"] = option(
        "auto", "Record format; auto: the schema's, else by extension, else by the first record."
    )
    batch_size: int = option(1000, "Records per batch.", min=1, max=100_000)
    max_record_bytes: int = option(65536, "Longer records are dead-lettered.", min=16)
    resume: bool = option(
        False,
        "Commit the read position with each batch (in the state store, with the chain's state and the delivery) "
        "and, at start, skip what an earlier run committed: exactly once with a sink that resumes too (the file "
        "sink's `mode: resume`). A file only (stdin or a pipe has no position).",
    )


class _Uncounted:
    """Dead letters of a first pass: nothing is kept or counted (the real pass reports each bad record once)."""

    total = 0

    def add(
        self, reason: str, source: str, line: int | None, record: bytes | str | None, *, field: str | None = None
    ) -> None:
        pass

    def flush(self) -> None:
        pass


class FileSource(Source[FileSourceConfig]):
    """Reads a file in batches; each batch is delivered (``runtime.receive``) before the next is read."""

    NAME = "file"
    Config = FileSourceConfig
    SUMMARY = "read a log file or stdin (TSV/JSONL, .gz) once, batch by batch"
    FINITE = True

    def __init__(self, config: FileSourceConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        path = config.path
        if path != "-" and not os.path.isabs(path):
            path = str(ctx.config_dir / path)
        self.path = path
        if config.resume and path == "-":
            raise ConfigValueError("resume", "stdin has no position to resume from")
        self._stop = threading.Event()
        self._finished = threading.Event()  # the input was read to its end (or stopped): no more counting
        self._reader: LineReader | None = None
        self._header = False
        self._count: LineCount | None = None
        #: records handed to the runtime (neither the header nor what the reader dead-lettered), events decoded
        self.records = 0
        self.events = 0
        #: how the input's format was chosen when neither the config nor the path said (for schema errors)
        self.format_assumed = ""
        #: the input's text format, once opened
        self.format = ""

    @property
    def key(self) -> str:
        """The checkpoint key of this input's read position."""
        return f"file:{self.path}"

    @property
    def rewindable(self) -> bool:
        """A file can be read again (a first pass, a resume); stdin and pipes cannot."""
        return not is_stream(self.path)

    def _schema(self) -> SchemaConfig:
        schema = self.ctx.schema or SchemaConfig()
        if self.config.format != "auto":
            schema = dataclasses.replace(schema, format=self.config.format)
        return schema

    def start(self, runtime: Runtime) -> None:
        """Read the whole input into ``runtime``; returns at its end or after :meth:`stop`."""
        try:
            self._read(runtime)
        finally:
            self._finished.set()

    def _read(self, runtime: Runtime) -> None:
        resume = self.config.resume
        if resume and not self.rewindable:
            raise ConfigValueError("resume", "a pipe has no position to resume from")
        done = int(runtime.checkpoint(self.key) or 0) if resume else 0
        log_in = open_log(
            self.path,
            self._schema(),
            runtime.dead_letters,
            self.config.max_record_bytes,
            self.config.batch_size,
            stop=self._stop.is_set,
            skip_through=done,
        )
        reader = self._reader = log_in.reader
        self.format_assumed = log_in.assumed
        self.format = log_in.codec.format
        self._header = log_in.header is not None
        codec, committed, sent, ended = log_in.codec, done, False, True
        for batch in log_in.batches:
            if done:
                batch = _after(batch, done)
                if not batch.lines:
                    continue
            n = len(batch.lines)
            positions: Sequence[int] = batch.numbers or range(batch.first_line, batch.first_line + n)
            checkpoint = (self.key, str(positions[-1])) if resume else None
            if not self._receive(
                runtime, RecordBatch(batch.lines, codec, self.path, positions, batch.last_eol, checkpoint)
            ):
                return
            committed, sent = positions[-1], True
            self.records += n
            if self._stop.is_set() and not reader.drains_on_stop:  # a pipe: its lines already read go out first
                ended = False
                break
        # Nothing sent (an empty input, a header alone, a finished run): start the sinks all the same (the output
        # file exists, a header alone goes out). At the end, commit past lines dead-lettered after the last batch.
        if not sent or (resume and ended and reader.lines_seen > committed):
            last = (self.key, str(max(committed, reader.lines_seen))) if resume and ended else None
            self._receive(runtime, RecordBatch([], codec, self.path, [], "\n", last))
        runtime.dead_letters.flush()

    def _receive(self, runtime: Runtime, batch: RecordBatch) -> bool:
        """Hand ``batch`` to the runtime; while a sink's outbox is full, wait and offer it again. False: stopped
        before it was taken (its records are dead-lettered, ``undelivered_at_stop``: a pipe cannot give them
        again)."""
        while True:
            try:
                self.events += runtime.receive(batch).accepted
                return True
            except Backpressure:
                while runtime.backpressure() is not None:
                    if self._stop.wait(BACKPRESSURE_POLL):
                        for record, line in zip(batch.records, batch.positions or (), strict=False):
                            runtime.dead_letters.add("undelivered_at_stop", self.path, line, record)
                        runtime.dead_letters.flush()
                        return False

    def stop(self, grace: float | None = None) -> None:
        """Stop reading: the batch in hand goes through; a pipe's lines already read go out too."""
        self._stop.set()

    def progress(self) -> tuple[int, int | None]:
        """Records read so far (dead-lettered ones included) and the input's record count: None for a stream,
        and until the count (started by the first call, in the background) is done."""
        if self._count is None and self.rewindable and not self._finished.is_set():
            self._count = LineCount(self.path, lambda: self._stop.is_set() or self._finished.is_set())
        seen = self._reader.lines_seen if self._reader is not None else 0
        total = self._count.total if self._count is not None else None
        header = int(self._header)
        return max(0, seen - header), (max(0, total - header) if total is not None else None)

    def prescan_batches(self) -> Iterator[RecordBatch]:
        """The whole input again, from its start, for a first pass (``replay --prescan``); nothing read there is
        dead-lettered. A stream cannot be read twice: ``ValueError``."""
        if not self.rewindable:
            raise ValueError("a stream cannot be read twice")
        log_in = open_log(self.path, self._schema(), _Uncounted(), self.config.max_record_bytes, self.config.batch_size)
        codec: Codec = log_in.codec
        for batch in log_in.batches:
            yield RecordBatch(batch.lines, codec, self.path)


def _after(batch: LineBatch, done_line: int) -> LineBatch:
    """The part of ``batch`` after input line ``done_line`` (committed by an earlier run)."""
    n = len(batch.lines)
    if batch.line_number(n - 1) <= done_line:
        return batch.sub(n, n, batch.last_eol)
    start = next(i for i in range(n) if batch.line_number(i) > done_line)
    return batch if start == 0 else batch.sub(start, n, batch.last_eol)
