"""The input of a scaled replay: one file, a glob or a directory of (daily) files, each cut into chunks.

A plain file is cut into byte ranges that start on a line (each split task finds its own start), so one big
file is split in parallel; a ``.gz`` file is one chunk (gzip cannot be entered in the middle). Files are taken
in name order (daily files sort by date); a chunk's number is its place in that order, and a record's
*position* is ``chunk << 32 | line within the chunk``, so positions order records as the input does.
"""

from __future__ import annotations

import glob
import math
import os
from dataclasses import dataclass

from sidecar.api import ConfigValueError, SchemaConfig
from sidecar.codecs import codec_for

#: a plain file is cut into chunks of at least this size...
MIN_CHUNK_BYTES = 1 << 20
#: ...and at most this size (more chunks than workers when the file is big)
MAX_CHUNK_BYTES = 64 << 20
#: bits of a position that number the line within its chunk
LINE_BITS = 32
#: the sort key of events released by the final flush: after every record
END = (1 << 63) - 1


class InputError(ValueError):
    """INPUT names no file, or files that cannot be replayed together."""


@dataclass(frozen=True)
class Chunk:
    """Bytes ``[start, stop)`` of a file, nominally (the split task moves both to line starts)."""

    index: int
    path: str
    start: int
    stop: int
    #: the first chunk of its file (holds the header line, when the format has one)
    first: bool
    #: a chunk of the last file (the one that reads its end learns whether the input ends with a newline)
    last_file: bool


def expand(spec: str) -> list[str]:
    """The files INPUT names: a file, a directory's files (not hidden, not recursive) or a glob; name order."""
    if os.path.isdir(spec):
        names = sorted(n for n in os.listdir(spec) if not n.startswith("."))
        files = [os.path.join(spec, n) for n in names if os.path.isfile(os.path.join(spec, n))]
    elif os.path.isfile(spec):
        files = [spec]
    else:
        files = sorted(p for p in glob.glob(spec) if os.path.isfile(p))
    if not files:
        raise InputError(f"{spec}: no such file, directory or matching files")
    return [os.path.abspath(p) for p in files]


def plan(files: list[str], workers: int) -> list[Chunk]:
    """Chunks of ``files`` for ``workers`` partitions."""
    chunks: list[Chunk] = []
    for fi, path in enumerate(files):
        size = os.path.getsize(path)
        n = 1
        if not path.endswith(".gz") and size > MIN_CHUNK_BYTES:
            n = max(1, min(math.ceil(size / MIN_CHUNK_BYTES), max(workers, math.ceil(size / MAX_CHUNK_BYTES))))
        for i in range(n):
            last_file = fi == len(files) - 1
            chunks.append(Chunk(len(chunks), path, size * i // n, size * (i + 1) // n, i == 0, last_file))
    return chunks


def read_header(files: list[str], schema: SchemaConfig) -> tuple[str, str | None]:
    """The format of the files and the header line they share (None: no header); every file must agree."""
    try:
        formats = {codec_for(schema, p).format for p in files}
    except ConfigValueError as exc:  # a plugin's text format (access_log): the partitioned replay reads TSV/JSONL
        raise InputError(f"schema.{exc.key}: {exc.problem}") from None
    if len(formats) > 1:
        raise InputError("the input files mix formats (TSV and JSON lines): replay them apart")
    fmt = formats.pop()
    if fmt != "tsv" or not schema.header:
        return fmt, None
    from adapters.file.reader import open_input

    headers: set[str] = set()
    for p in files:
        with open_input(p) as f:
            line = f.readline().decode("utf-8", "replace").rstrip("\r\n")
        try:
            codec_for(schema, p).accept_header(line)
        except ConfigValueError as exc:
            raise InputError(f"{p}: line 1: header: {exc.problem}") from None
        headers.add(line)
    if len(headers) > 1:
        raise InputError("the input files have different header lines: replay them apart")
    return fmt, headers.pop()
