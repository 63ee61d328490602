"""File sinks: events written in the input's schema to a file (plain or gzip) or stdout."""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import os
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, Any, Literal, TextIO

from sidecar.api import BuildContext, Codec, ConfigValueError, Event, Sink, SinkConfig, option
from sidecar.codecs import SchemaConfig, format_from_path
from sidecar.textcodecs import LineEncoder


class TextWriter:
    """Writes encoded lines, keeping the input's final-newline state.

    A plain file is written by this class itself, without Python's buffered layers, so that a write that
    fails (a full disk) is undone: the file is cut back to where the last complete write ended and what
    could not be written stays pending, written in full by the next :meth:`flush`. A failure never leaves
    a torn line for later lines to glue onto, and nothing handed to the writer is dropped while it lives.
    stdout and ``.gz`` files go through an ``io`` text stream.
    """

    #: pending bytes of a plain file are handed to the OS once they reach this size (and at every flush)
    BUFFER_BYTES = 1 << 16

    def __init__(self, path: str, resume_at: int | None = None, *, append: bool = False) -> None:
        """``resume_at``: keep the first ``resume_at`` bytes of an existing plain file and append after them.
        ``append``: keep the whole file and add after it (a .gz file gets another gzip member).
        Otherwise the file starts empty. :attr:`existing` is the size kept (0 for a new or emptied file)."""
        self.path = path
        self._gzip: tuple[gzip.GzipFile, IO[bytes]] | None = None  # a .gz output: the compressor, the file under it
        self._fd: int | None = None  # a plain file, written directly
        self._pending = bytearray()  # encoded text of a plain file not handed to the OS yet
        self._size = 0  # bytes of a plain file written completely (where a failed write is cut back to)
        self.existing = 0
        self._open_line = False  # last write ended without a newline
        if path == "-":
            self.stream: TextIO | None = sys.stdout
            return
        if resume_at is not None:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
            os.ftruncate(fd, resume_at)
            os.lseek(fd, resume_at, os.SEEK_SET)
            self.existing = resume_at
        elif append:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o644)
            self.existing = os.fstat(fd).st_size
            if self.existing and not path.endswith(".gz"):
                with open(path, "rb") as tail:  # an earlier run that ended mid-line: start on a new line
                    tail.seek(self.existing - 1)
                    self._open_line = tail.read(1) != b"\n"
        else:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
        if path.endswith(".gz"):
            binary: IO[bytes] = os.fdopen(fd, "wb")
            gz = gzip.GzipFile(fileobj=binary, mode="wb", compresslevel=6)
            self._gzip = (gz, binary)
            self.stream = io.TextIOWrapper(gz, encoding="utf-8", newline="", write_through=False)
        else:
            self._fd = fd
            self._size = self.existing
            self.stream = None

    def write_text(self, text: str, ends_line: bool) -> None:
        if not text:
            return
        if self._open_line:
            text = "\n" + text
        if self._fd is not None:
            self._pending += text.encode("utf-8")
            self._open_line = not ends_line
            if len(self._pending) >= self.BUFFER_BYTES:
                self._drain()
            return
        assert self.stream is not None
        with self._named():
            self.stream.write(text)
        self._open_line = not ends_line

    def _drain(self) -> None:
        """Hand the pending bytes to the OS, all or nothing: on failure the file is cut back and they stay."""
        fd = self._fd
        if fd is None or not self._pending:
            return
        size = len(self._pending)
        done = 0
        with memoryview(self._pending) as data:
            try:
                while done < size:
                    n = os.write(fd, data[done:])
                    if n <= 0:
                        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                    done += n
            except OSError as exc:
                if done:
                    with contextlib.suppress(OSError):
                        os.ftruncate(fd, self._size)  # no torn line: the next flush writes all of it again
                        os.lseek(fd, self._size, os.SEEK_SET)
                raise OSError(exc.errno, exc.strerror, self.path) from exc
        self._size += size
        self._pending.clear()

    def flush(self) -> None:
        if self._fd is not None:
            self._drain()
            return
        assert self.stream is not None
        with self._named():
            self.stream.flush()
            if self._gzip is not None:
                gz, binary = self._gzip
                gz.flush(zlib.Z_SYNC_FLUSH)
                binary.flush()

    def fileno(self) -> int:
        """The file descriptor of the output (after :meth:`flush`, everything written is in it)."""
        if self._fd is not None:
            return self._fd
        assert self.stream is not None
        return self.stream.buffer.fileno()

    def close(self) -> None:
        if self._fd is not None:
            try:
                self._drain()
            finally:  # what a full disk kept pending is lost only now, with an error naming the file
                os.close(self._fd)
                self._fd = None
            return
        assert self.stream is not None
        with self._named():
            if self.stream is sys.stdout:
                self.stream.flush()
            else:
                self.stream.close()

    @contextlib.contextmanager
    def _named(self) -> Iterator[None]:
        """A write error (a full disk) names this output file, not whatever the caller was reading."""
        try:
            yield
        except OSError as exc:
            if exc.filename is None:
                raise OSError(exc.errno, exc.strerror, self.path) from exc
            raise


def _create_sizes(db: Any) -> None:
    db.execute("CREATE TABLE IF NOT EXISTS file_sink_sizes (path TEXT PRIMARY KEY, bytes INTEGER NOT NULL)")


@dataclass(frozen=True)
class FileSinkConfig(SinkConfig):
    """Write events to a file (or `-` for stdout) in the input's schema."""

    path: str = option("-", "Output path; .gz compresses; `-` is stdout.")
    format: Literal["auto", "tsv", "jsonl", "access_log"] = option(
        "auto",
        "Output format; auto: the path's extension, else the schema's format, else each record in its own "
        "source's text format (records from gRPC, forward or Vector as TSV). access_log writes access-log "
        "records only (another format's record is dead-lettered: it has no request line).",
    )
    fsync: bool = option(False, "fsync on every flush (delivery then survives a power cut).")
    mode: Literal["append", "truncate", "resume"] = option(
        "append",
        "append: keep what earlier runs delivered and add after it (the header only goes into an empty file); "
        "truncate: start the file empty each time the sink starts; resume: exactly once with a source that "
        "resumes (a file source with `resume: true`), and for what a buffering filter releases in `serve`: every "
        "flush fsyncs the file and records its size in the state store, committed with the batch, and a restart "
        "cuts the file back to the last recorded size (with none recorded yet, the file starts empty; a plain "
        "file only: not .gz or stdout).",
    )


class FileSink(Sink[FileSinkConfig]):
    """Appends encoded events to a file (``mode: append``, the default); the header goes only into an empty file.

    A record's format belongs to its source: an event whose own codec is a text codec of the sink's format is
    written by it (byte for byte when unchanged); any other is converted by the sink's codec of that format."""

    NAME = "file"
    Config = FileSinkConfig
    SUMMARY = "write events to a file or stdout (TSV/JSONL, .gz), same schema as the input"

    def __init__(self, config: FileSinkConfig, ctx: BuildContext, schema: SchemaConfig | None = None) -> None:
        super().__init__(config, ctx)
        self.schema = schema or ctx.schema or SchemaConfig()
        path = config.path
        if path != "-" and not os.path.isabs(path):
            path = str(ctx.config_dir / path)
        self.path = path
        if config.mode == "resume" and (path == "-" or path.endswith(".gz")):
            raise ConfigValueError("mode", "resume needs a plain file (not .gz or stdout)")
        if config.mode == "resume" and not ctx.validate_only:
            if ctx.state is None:
                raise ConfigValueError("mode", "resume needs the runtime's state store")
            ctx.state.migrate("file_sink", [_create_sizes])  # here: never inside the runtime's transaction
            self._cut_back(ctx.state)
        #: the sink's text format; None: each record in its own source's text format
        self.format: str | None = config.format if config.format != "auto" else format_from_path(path)
        if self.format is None and self.schema.format != "auto":
            self.format = self.schema.format
        self.writer: TextWriter | None = None
        #: ``mode: resume``: no fsync at each flush, only at :meth:`sync` (a caller that commits several flushes'
        #: sizes at once calls it first: ``replay --resume``'s groups of batches, :mod:`sidecar.commitgroups`)
        self.sync_later = False
        #: the header, and each event's line in its own codec's format or converted (dead letters counted)
        self.lines = LineEncoder(self.schema, self.format, ctx.dead_letters, f"sink:{self.NAME}")
        #: the header written into an empty file (again into the new file after a reopen)
        self._header: str | None = None

    def _cut_back(self, state: Any) -> None:
        """``mode: resume``, when built: cut the file back to its last recorded size at once. What lies beyond was
        written by a batch that never committed (its events are still held, or were never acknowledged); left
        there until the first delivery of this run (:meth:`start`), a run that delivers nothing would leave
        those lines delivered as well as held."""
        size = self._recorded_size(state)
        if size is None:
            return  # nothing recorded yet: start() begins the file empty
        with contextlib.suppress(FileNotFoundError):
            if os.stat(self.path).st_size > size:
                os.truncate(self.path, size)

    def _recorded_size(self, state: Any) -> int | None:
        """``mode: resume``: the file's size committed with the last batch, None before the first."""
        row = state.conn.execute("SELECT bytes FROM file_sink_sizes WHERE path = ?", (self.path,)).fetchone()
        return int(row[0]) if row else None

    def start(self, header: str | None, codec: Codec | None) -> None:
        header = self.lines.start(header, codec)
        resume_at: int | None = None
        if self.config.mode == "resume":
            state = self.ctx.state
            assert state is not None  # checked when built
            resume_at = self._recorded_size(state) or 0
        self.writer = TextWriter(self.path, resume_at, append=self.config.mode == "append")
        self._header = header
        if header and not self.writer.existing:
            self.writer.write_text(header, header.endswith("\n"))

    def reopen(self) -> None:
        """Open the file again by its path (``serve`` on SIGHUP, between batches): after logrotate moved it, new
        events go to a new file (with the header); what was written before is flushed into the old one. The
        reopened file is appended to whatever the mode (a reopen never empties a file). stdout: nothing to do."""
        old = self.writer
        if old is None or self.path == "-":
            return
        old.flush()
        if self.config.fsync or self.config.mode == "resume":
            with contextlib.suppress(OSError, io.UnsupportedOperation):
                os.fsync(old.fileno())
        writer = TextWriter(self.path, append=True)  # opened first: when it cannot be, the old one goes on
        self.writer = writer
        old.close()
        header = self._header
        if header and not writer.existing:
            writer.write_text(header, header.endswith("\n"))

    def write(self, events: list[Event]) -> None:
        if not events:
            return
        if self.writer is None:
            self.start(None, None)
        assert self.writer is not None
        events, lines = self.lines.encode(events)
        if not events:
            return
        ends = bool(events[-1].eol)
        text = "\n".join(lines)
        self.writer.write_text(text + "\n" if ends else text, ends)
        self.written += len(events)

    def sync(self) -> None:
        """fsync what was flushed (stdout: nothing to do). ``mode: resume``: a failed fsync raises (the output's
        size must not commit with bytes the disk may not have); only a file that cannot be synced (EINVAL: a pipe,
        a device) is let pass. Other modes commit no size with it: a failure is ignored there."""
        if self.writer is None or self.path == "-":
            return
        try:
            os.fsync(self.writer.fileno())
        except (OSError, io.UnsupportedOperation) as exc:
            unsyncable = isinstance(exc, io.UnsupportedOperation) or exc.errno == errno.EINVAL
            if self.config.mode == "resume" and not unsyncable:
                raise OSError(exc.errno, f"fsync failed: {exc.strerror}", self.path) from exc

    def flush(self) -> None:
        """Hand what was written to the OS (``fsync``: to the disk). ``mode: resume``: fsync, and record the size
        in the state store (a SAVEPOINT in the runtime's transaction: it commits with the batch)."""
        if self.writer is None:
            return
        self.writer.flush()
        resume = self.config.mode == "resume"
        if self.config.fsync or (resume and not self.sync_later):
            self.sync()
        if resume:
            size = os.fstat(self.writer.fileno()).st_size
            state = self.ctx.state
            assert state is not None
            with state.lock:
                conn = state.conn
                conn.execute("SAVEPOINT file_sink")
                conn.execute(
                    "INSERT INTO file_sink_sizes(path, bytes) VALUES (?, ?) "
                    "ON CONFLICT(path) DO UPDATE SET bytes = excluded.bytes",
                    (self.path, size),
                )
                conn.execute("RELEASE file_sink")

    def close(self) -> None:
        writer, self.writer = self.writer, None
        if writer is not None:
            try:
                writer.flush()
                if self.config.fsync and self.path != "-":
                    with contextlib.suppress(OSError, io.UnsupportedOperation):
                        os.fsync(writer.fileno())
            finally:  # the file is closed even when a full disk refused the last bytes (the error names it)
                writer.close()


@dataclass(frozen=True)
class StdoutSinkConfig(SinkConfig):
    """Write events to standard output in the input's schema."""

    format: Literal["auto", "tsv", "jsonl", "access_log"] = option(
        "auto", "Output format; auto: the schema's format, else each record in its own source's text format."
    )


class StdoutSink(FileSink):  # a FileSink on "-": its own config, so `path` is not an option
    """Encoded events on stdout."""

    NAME = "stdout"
    Config = StdoutSinkConfig  # type: ignore[assignment]  # no `path`: __init__ maps it to a FileSinkConfig
    SUMMARY = "write events to standard output, same schema as the input"

    def __init__(self, config: StdoutSinkConfig, ctx: BuildContext, schema: SchemaConfig | None = None) -> None:
        super().__init__(FileSinkConfig(path="-", format=config.format), ctx, schema)
