"""File source and sinks: TSV or JSON lines, plain or gzip (by extension), stdin/stdout as ``-``.

The reader hands out batches of decoded text lines. Bad input never stops it:
invalid UTF-8, oversized records and truncated or corrupt gzip streams become
dead letters (counted by reason; the record goes to the dead-letter file only).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import select
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any, Literal

from sidecar.api import BuildContext, Event, Sink, SinkConfig, option
from sidecar.deadletter import DeadLetters
from sidecar.records import Codec, JsonlCodec, SchemaConfig, TsvCodec, format_from_path

CHUNK = 1 << 20


def open_input(path: str) -> IO[bytes]:
    """Open a file (gzip by extension, or by magic bytes) or stdin for binary reading."""
    if path == "-":
        raw: IO[bytes] = sys.stdin.buffer
    else:
        raw = open(path, "rb")  # noqa: SIM115 - closed by the reader
    if path.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


@dataclass
class LineBatch:
    """Complete lines (no newline), the line number of the first, and whether the last had one."""

    lines: list[str]
    first_line: int
    last_eol: str
    #: Line numbers of ``lines`` when the reader dead-lettered lines in between (else consecutive).
    numbers: list[int] | None = None

    def line_number(self, index: int) -> int:
        """The input line number of ``lines[index]``."""
        return self.numbers[index] if self.numbers is not None else self.first_line + index

    def sub(self, start: int, stop: int, last_eol: str) -> LineBatch:
        nums = self.numbers[start:stop] if self.numbers is not None else None
        return LineBatch(self.lines[start:stop], self.line_number(start), last_eol, nums)


class LineReader:
    """Reads lines in batches, dead-lettering what cannot be a record."""

    def __init__(
        self,
        path: str,
        dead: DeadLetters,
        max_record_bytes: int,
        stop: Callable[[], bool] | None = None,
        skip_through: int = 0,
    ) -> None:
        self.path = path
        self.dead = dead
        self.limit = max_record_bytes
        self.stop = stop  # checked while waiting on stdin, so SIGTERM stops an idle stream
        self.bytes_read = 0
        self._lineno = 0  # line number of the last line handed out or dead-lettered
        self.skip_through = skip_through  # lines up to here were handled by an earlier run: not reported again

    @property
    def lines_seen(self) -> int:
        """Lines read so far, good or dead-lettered."""
        return self._lineno

    def _bad(self, reason: str, record: bytes | None) -> None:
        if self._lineno > self.skip_through or self._lineno == 0:
            self.dead.add(reason, self.path, self._lineno, record)

    def _decode(self, blob: bytes) -> tuple[list[str], list[int] | None]:
        """Decode complete lines (joined by \\n, no trailing newline); bad lines dead-lettered.
        Returns the lines and, when some were dead-lettered, the line number of each kept line."""
        limit = self.limit
        numbers: list[int] = []
        try:
            lines = blob.decode("utf-8").split("\n")
            quick = limit // 4
            if all(len(s) <= quick for s in lines):
                self._lineno += len(lines)
                return lines, None
            checked: list[str] = []
            for s in lines:
                self._lineno += 1
                if len(s) > quick and len(s.encode("utf-8")) > limit:
                    self._bad("oversized_record", None)
                else:
                    checked.append(s)
                    numbers.append(self._lineno)
            return checked, (numbers if len(checked) != len(lines) else None)
        except UnicodeDecodeError:
            out = []
            for b in blob.split(b"\n"):
                self._lineno += 1
                if len(b) > limit:
                    self._bad("oversized_record", None)
                    continue
                try:
                    out.append(b.decode("utf-8"))
                    numbers.append(self._lineno)
                except UnicodeDecodeError:
                    self._bad("invalid_utf8", b)
            return out, numbers

    def batches(self, batch_size: int) -> Iterator[LineBatch]:
        """Yield batches of about ``batch_size`` lines until the input ends."""
        stream: Any = open_input(self.path)
        if self.path == "-" and self.stop is not None:
            stream = _StoppableStdin(stream, self.stop)
        pending = b""
        skipping = False  # inside an oversized line, dropping until its newline
        try:
            while True:
                try:
                    chunk = stream.read(CHUNK)
                except EOFError:
                    self._bad("truncated_gzip", None)
                    chunk = b""
                    pending = b""
                except (gzip.BadGzipFile, zlib.error, OSError) as exc:
                    self._bad("corrupt_gzip" if not isinstance(exc, OSError) or "gzip" in str(exc).lower()
                              else "read_error", None)
                    chunk = b""
                    pending = b""
                if not chunk:
                    break
                self.bytes_read += len(chunk)
                if skipping:
                    cut = chunk.find(b"\n")
                    if cut < 0:
                        continue
                    chunk = chunk[cut + 1:]
                    skipping = False
                data = pending + chunk if pending else chunk
                cut = data.rfind(b"\n")
                if cut < 0:
                    pending = data
                    if len(pending) > self.limit:
                        self._lineno += 1
                        self._bad("oversized_record", None)
                        pending, skipping = b"", True
                    continue
                pending = data[cut + 1:]
                first = self._lineno + 1
                lines, numbers = self._decode(data[:cut])
                if len(pending) > self.limit:
                    self._lineno += 1
                    self._bad("oversized_record", None)
                    pending, skipping = b"", True
                whole = LineBatch(lines, first, "\n", numbers)
                for i in range(0, len(lines), batch_size):
                    yield whole.sub(i, i + batch_size, "\n")
            if pending and self.stop is not None and self.stop():
                self._lineno += 1  # a record cut short by the stop: kept in the dead-letter file only
                self._bad("partial_record_at_stop", pending)
            elif pending:
                first = self._lineno + 1
                lines, numbers = self._decode(pending)
                if lines:
                    yield LineBatch(lines, first, "", numbers)
        finally:
            if stream is not sys.stdin.buffer:
                stream.close()


class _StoppableStdin:
    """Reads a pipe in whatever pieces are ready (up to ``n`` bytes); ends when ``stop()`` turns true
    while waiting, instead of blocking until more input or EOF arrives."""

    def __init__(self, raw: IO[bytes], stop: Callable[[], bool]) -> None:
        self.raw = raw
        self.fd = raw.fileno()
        self.stop = stop

    def read(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            if self.stop():
                break
            ready, _, _ = select.select([self.fd], [], [], 0 if buf else 0.2)
            if not ready:
                if buf:
                    break
                continue
            piece = os.read(self.fd, n - len(buf))
            if not piece:
                break
            buf += piece
        return bytes(buf)

    def close(self) -> None:
        """stdin stays open."""


def read_header(reader_batches: Iterator[LineBatch]) -> tuple[str | None, Iterator[LineBatch]]:
    """Split the first line off a batch iterator (for formats with a header)."""
    for batch in reader_batches:
        if not batch.lines:
            continue
        header, rest = batch.lines[0], batch.lines[1:]
        eol = "\n" if (rest or batch.last_eol) else ""
        first = batch.sub(1, len(batch.lines), batch.last_eol) if rest else None
        return header + eol, _prepend(first, reader_batches)
    return None, iter(())


def _prepend(first: LineBatch | None, rest: Iterator[LineBatch]) -> Iterator[LineBatch]:
    if first is not None:
        yield first
    yield from rest


class TextWriter:
    """Writes encoded lines, keeping the input's final-newline state."""

    def __init__(self, path: str, resume_at: int | None = None) -> None:
        """``resume_at``: keep the first ``resume_at`` bytes of an existing plain file and append after them."""
        self.path = path
        if path == "-":
            self.stream: IO[str] = sys.stdout
        else:
            if resume_at is None:
                fd = os.open(path, os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
            else:
                fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o644)
                os.ftruncate(fd, resume_at)
                os.lseek(fd, resume_at, os.SEEK_SET)
            binary: IO[bytes] = os.fdopen(fd, "wb")
            if path.endswith(".gz"):
                binary = gzip.GzipFile(fileobj=binary, mode="wb", compresslevel=6)  # type: ignore[assignment]
            self.stream = io.TextIOWrapper(binary, encoding="utf-8", newline="", write_through=False)
        self._open_line = False  # last write ended without a newline

    def write_text(self, text: str, ends_line: bool) -> None:
        if not text:
            return
        if self._open_line:
            text = "\n" + text
        self.stream.write(text)
        self._open_line = not ends_line

    def flush(self) -> None:
        self.stream.flush()
        if self.stream is not sys.stdout:
            inner = self.stream.buffer
            if isinstance(inner, gzip.GzipFile):
                inner.flush(zlib.Z_SYNC_FLUSH)
                inner.fileobj.flush()  # type: ignore[union-attr]

    def close(self) -> None:
        if self.stream is sys.stdout:
            self.stream.flush()
        else:
            self.stream.close()


@dataclass(frozen=True)
class FileSinkConfig(SinkConfig):
    """Write events to a file (or `-` for stdout) in the input's schema."""

    path: str = option("-", "Output path; .gz compresses; `-` is stdout.")
    format: Literal["auto", "tsv", "jsonl"] = option(
        "auto", "Output format; auto: the input's format (or by extension for events from gRPC)."
    )
    fsync: bool = option(False, "fsync on every flush (delivery then survives a power cut).")


class FileSink(Sink):
    """Appends encoded events to a file; the header (if any) comes first."""

    NAME = "file"
    Config = FileSinkConfig
    SUMMARY = "write events to a file or stdout (TSV/JSONL, .gz), same schema as the input"

    def __init__(
        self,
        config: FileSinkConfig,
        ctx: BuildContext,
        schema: SchemaConfig | None = None,
        resume_at: int | None = None,
    ) -> None:
        """``resume_at``: continue a plain output file after its first ``resume_at`` bytes (no header again)."""
        super().__init__(config, ctx)
        self.resume_at = resume_at
        self.cfg = config
        self.schema = schema or ctx.schema or SchemaConfig()
        path = config.path
        if path != "-" and not os.path.isabs(path):
            path = str(ctx.config_dir / path)
        self.path = path
        self.writer: TextWriter | None = None
        self.codec: Codec | None = None

    def start(self, header: str | None, codec: Any) -> None:
        fmt = self.cfg.format
        if fmt == "auto":
            fmt = getattr(codec, "format", None) or format_from_path(self.path) or "tsv"
        if codec is not None and getattr(codec, "format", None) == fmt:
            self.codec = codec
        else:
            self.codec = TsvCodec(self.schema) if fmt == "tsv" else JsonlCodec(self.schema)
            if isinstance(self.codec, TsvCodec):
                h = self.codec.header_for_output()
                header = h + "\n" if h is not None else None
            else:
                header = None
        self.writer = TextWriter(self.path, self.resume_at)
        if header and not self.resume_at:
            self.writer.write_text(header, header.endswith("\n"))

    def write(self, events: list[Event]) -> None:
        if not events:
            return
        if self.writer is None:
            self.start(None, None)
        assert self.writer is not None and self.codec is not None
        encode = self.codec.encode
        text = "\n".join([encode(e) for e in events])
        ends = bool(events[-1].eol)
        self.writer.write_text(text + "\n" if ends else text, ends)
        self.written += len(events)

    def flush(self) -> None:
        if self.writer is not None:
            self.writer.flush()
            if self.cfg.fsync and self.path != "-":
                self.writer.stream.flush()
                with contextlib.suppress(OSError, io.UnsupportedOperation):
                    os.fsync(self.writer.stream.buffer.fileno())

    def durable_size(self) -> int:
        """Flush and fsync a plain output file; its size in bytes (the resume point)."""
        if self.writer is None:
            self.start(None, None)
        assert self.writer is not None
        self.writer.flush()
        fd = self.writer.stream.buffer.fileno()
        os.fsync(fd)
        return os.fstat(fd).st_size

    def close(self) -> None:
        if self.writer is not None:
            self.flush()
            self.writer.close()
            self.writer = None


@dataclass(frozen=True)
class StdoutSinkConfig(SinkConfig):
    """Write events to standard output in the input's schema."""

    format: Literal["auto", "tsv", "jsonl"] = option("auto", "Output format; auto: the input's format.")


class StdoutSink(FileSink):
    """Encoded events on stdout."""

    NAME = "stdout"
    Config = StdoutSinkConfig  # type: ignore[assignment]
    SUMMARY = "write events to standard output, same schema as the input"

    def __init__(self, config: StdoutSinkConfig, ctx: BuildContext, schema: SchemaConfig | None = None) -> None:
        super().__init__(FileSinkConfig(path="-", format=config.format), ctx, schema)
