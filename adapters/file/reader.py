"""Reading log files: TSV, JSON lines or another text format (access logs), plain or gzip, stdin as ``-``.

The reader hands out batches of decoded text lines. Bad input never stops it:
invalid UTF-8, oversized records and truncated or corrupt gzip streams become
dead letters (counted by reason; the record goes to the dead-letter file only).
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import select
import stat
import sys
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

import structlog

from sidecar.api import Codec, ConfigValueError, DeadLetterSink, SchemaConfig
from sidecar.codecs import TsvCodec, format_from_path
from sidecar.config import ConfigError
from sidecar.textcodecs import sniff_format as sniff_line
from sidecar.textcodecs import text_codec

CHUNK = 1 << 20


def is_stream(path: str) -> bool:
    """Whether ``path`` can be read only once, as it arrives: ``-`` (stdin), a named pipe, a process
    substitution (``<(zcat a.gz)``) or another non-regular file."""
    if path == "-":
        return True
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def open_input(path: str) -> IO[bytes]:
    """Open a file (gzip by extension, or by magic bytes) or stdin for binary reading."""
    if path == "-":
        raw: IO[bytes] = sys.stdin.buffer
    else:
        raw = open(path, "rb")  # noqa: SIM115 - closed by the reader
    if path.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]  # typeshed: not an IO[bytes]
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
        dead: DeadLetterSink,
        max_record_bytes: int,
        stop: Callable[[], bool] | None = None,
        skip_through: int = 0,
    ) -> None:
        self.path = path
        self.dead = dead
        self.limit = max_record_bytes
        self.stop = stop  # checked while waiting on stdin, so SIGTERM stops an idle stream
        #: True once reading a pipe that ends by itself on the stop: iterate on, and what was read (and the cut
        #: record, dead-lettered) is not lost.
        self.drains_on_stop = False
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
        if is_stream(self.path) and not self.path.endswith(".gz") and self.stop is not None:
            stream = _StoppableStdin(stream, self.stop)
            self.drains_on_stop = True
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
                    self._bad(
                        "corrupt_gzip" if not isinstance(exc, OSError) or "gzip" in str(exc).lower() else "read_error",
                        None,
                    )
                    chunk = b""
                    pending = b""
                if not chunk:
                    break
                self.bytes_read += len(chunk)
                if skipping:
                    cut = chunk.find(b"\n")
                    if cut < 0:
                        continue
                    chunk = chunk[cut + 1 :]
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
                pending = data[cut + 1 :]
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


class FileTsvCodec(TsvCodec):
    """TSV read from a file: its header line goes out as it came in, line end included (a file that is only a
    header without a final newline stays without one); no header line read, no header out."""

    _header_out: str | None = None

    def accept_header(self, line: str) -> None:
        """``line`` as read, with its line end (``\\n``, ``\\r\\n`` or none)."""
        super().accept_header(line.removesuffix("\n"))
        self._header_out = line

    def header_for_output(self) -> str | None:
        return self._header_out


@dataclass
class LogInput:
    """An opened log: its codec (header accepted), the header line (with its newline) and the batches after it."""

    codec: Codec
    header: str | None
    batches: Iterator[LineBatch]
    reader: LineReader
    #: how the format was chosen when the input did not say (for schema errors); "" when it said
    assumed: str = ""


def open_log(
    path: str,
    schema: SchemaConfig,
    dead: DeadLetterSink,
    max_record_bytes: int,
    batch_size: int,
    *,
    stop: Callable[[], bool] | None = None,
    skip_through: int = 0,
) -> LogInput:
    """Open a log file for reading in batches; the format comes from the schema, else the file's extension.

    A header line that does not name the schema's role columns raises :class:`ConfigError` (line 1, key
    ``header``).
    """
    reader = LineReader(path, dead, max_record_bytes, stop=stop, skip_through=skip_through)
    batches = reader.batches(batch_size)
    assumed = ""
    if schema.format == "auto" and format_from_path(path) is None:  # stdin, a pipe, an unknown extension
        fmt, batches = sniff_format(batches)
        schema = dataclasses.replace(schema, format=fmt)  # type: ignore[arg-type]  # a text format's name
        assumed = f" (format {fmt} assumed from the first record: schema.format is auto and the input has no "
        assumed += "extension)"
        structlog.get_logger().info("input_format_detected", format=fmt)  # the format's name, never a record
    codec = text_codec(schema, path)
    if isinstance(codec, TsvCodec):
        codec = FileTsvCodec(codec.schema)
    header = None
    if codec.format == "tsv" and schema.header:
        header, batches = read_header(batches)
        if header is not None:
            try:
                codec.accept_header(header)
            except ConfigValueError as exc:
                raise ConfigError(path, 1, "header", exc.problem + assumed) from None
    return LogInput(codec, header, batches, reader, assumed)


def sniff_format(batches: Iterator[LineBatch]) -> tuple[str, Iterator[LineBatch]]:
    """The format of an input known by its content only, by its first non-blank line
    (:func:`sidecar.textcodecs.sniff_format`: ``jsonl``, ``access_log``, else ``tsv``); the batches are given back
    whole."""
    seen: list[LineBatch] = []
    fmt = "tsv"
    for batch in batches:
        seen.append(batch)
        first = next((line.lstrip() for line in batch.lines if line.strip()), None)
        if first is not None:
            fmt = sniff_line(first)
            break
    return fmt, _chain(seen, batches)


def _chain(first: list[LineBatch], rest: Iterator[LineBatch]) -> Iterator[LineBatch]:
    yield from first
    yield from rest
