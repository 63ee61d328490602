"""Split task: one chunk of the input into one shard per partition, by the keyed hash of each record's user.

A shard is the chunk's records of that partition (the original lines, each ending with a newline) and their
positions (little-endian int64, ``chunk << 32 | line``). What cannot be a record (invalid UTF-8, oversized,
undecodable: the same reasons as ``replay``) is dead-lettered here, once, with the chunk's file and line.
The task is idempotent: its result file is written last, and a retried task that finds it returns it.
"""

from __future__ import annotations

import gzip
import json
import os
import time
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO

import numpy as np

from adapters.file.scale.inputs import LINE_BITS, Chunk
from adapters.file.scale.job import Job, private_file, private_folder, tune_gc_once, write_json
from adapters.file.scale.partition import owner
from sidecar.codecs import codec_for
from sidecar.deadletter import DeadLetters

BLOCK = 1 << 20
#: users whose partition is remembered within a split task (the memo is emptied when full)
OWNER_CACHE = 1 << 18


@dataclass(frozen=True)
class SplitResult:
    chunk: int
    records: int
    dead_lettered: int
    #: the position of the chunk's last record (-1: none)
    last_position: int
    #: the chunk read the end of the input, whose last line is a record without a newline
    no_final_newline: bool
    #: wall seconds of the task
    seconds: float = 0.0
    #: dead letters by reason
    dead_reasons: dict[str, int] = field(default_factory=dict)


def shard_name(chunk: int, p: int) -> str:
    return f"split/c{chunk:06d}-p{p:04d}"


def dead_letter_name(chunk: int) -> str:
    return f"split/c{chunk:06d}.dead-letter.jsonl"


def split_task(job: Job, chunk: Chunk) -> SplitResult:
    """Write the shards of ``chunk`` (see the module docstring); returns counts for the summary."""
    done = job.path(f"split/c{chunk.index:06d}.json")
    if done.exists():
        return SplitResult(**json.loads(done.read_text()))
    started = time.perf_counter()
    cfg = job.config()
    schema, limits = cfg.sidecar.schema, cfg.sidecar.limits
    codec = codec_for(schema, chunk.path)
    if job.header is not None:
        codec.accept_header(job.header)
    dead_path = job.path(dead_letter_name(chunk.index)) if cfg.dead_letter_path is not None else None
    if dead_path is not None and dead_path.exists():
        dead_path.unlink()  # a retried task writes its dead letters again, once
    dead = DeadLetters(dead_path, cfg.dead_letter_max_bytes)
    tune_gc_once()
    source = chunk.path if chunk.first else f"{chunk.path}@{chunk.start}"
    n = job.partitions
    key = job.key
    shards = [_Shard(job.path(shard_name(chunk.index, p))) for p in range(n)]
    records, last_position = 0, -1
    base = chunk.index << LINE_BITS
    reader = _ChunkReader(chunk, dead, source, limits.max_record_bytes)
    owners: dict[str, int] = {}  # a user's events come in runs (sessions): hash each user once per run
    try:
        for numbers, lines, raws in reader.blocks():
            if chunk.first and job.header is not None and numbers and numbers[0] == 1:  # the header: no record
                numbers, lines, raws = numbers[1:], lines[1:], raws[1:]
            if not lines:
                continue
            bad: list[tuple[int, str]] = []
            events = codec.decode_many(lines, "\n", bad)
            skip = {i for i, _ in bad}
            for i, reason in bad:
                dead.add(reason, source, numbers[i], lines[i])
            good = [i for i in range(len(lines)) if i not in skip] if skip else range(len(lines))
            for i, ev in zip(good, events, strict=True):
                user = ev.user
                p = owners.get(user) if isinstance(user, str) else None
                if p is None:
                    p = owner(user, n, key)
                    if isinstance(user, str):
                        if len(owners) >= OWNER_CACHE:
                            owners.clear()
                        owners[user] = p
                shards[p].add(raws[i], base | numbers[i])
            records += len(events)
            if events:
                last_position = base | numbers[good[-1]]
        for shard in shards:
            shard.close()
    finally:
        dead.close()
    result = SplitResult(
        chunk.index,
        records,
        dead.total,
        last_position,
        reader.no_final_newline and chunk.last_file and last_position == base | reader.lineno,
        time.perf_counter() - started,
        dict(dead.counts),
    )
    write_json(done, asdict(result))
    return result


class _Shard:
    """One partition's records of a chunk; written to ``PATH.lines`` / ``PATH.pos`` (atomic on close)."""

    FLUSH = 1 << 20

    def __init__(self, path: Path) -> None:
        self.path = path
        private_folder(path.parent)
        self.lines_tmp = private_file(path.with_suffix(".lines.tmp"))  # closed in close()
        self.pos_tmp = private_file(path.with_suffix(".pos.tmp"))
        self.buf: list[bytes] = []
        self.pos: list[int] = []
        self.size = 0

    def add(self, raw: bytes, position: int) -> None:
        self.buf.append(raw)
        self.pos.append(position)
        self.size += len(raw)
        if self.size >= self.FLUSH:
            self._write()

    def _write(self) -> None:
        if self.buf:
            self.lines_tmp.write(b"\n".join(self.buf) + b"\n")
            np.asarray(self.pos, dtype="<i8").tofile(self.pos_tmp)
        self.buf, self.pos, self.size = [], [], 0

    def close(self) -> None:
        self._write()
        for f, suffix in ((self.lines_tmp, ".lines"), (self.pos_tmp, ".pos")):
            f.flush()
            os.fsync(f.fileno())
            f.close()
            os.replace(self.path.with_suffix(suffix + ".tmp"), self.path.with_suffix(suffix))


class _ChunkReader:
    """The complete lines of a chunk in blocks: ``(line numbers, texts, original bytes)``."""

    def __init__(self, chunk: Chunk, dead: DeadLetters, source: str, limit: int) -> None:
        self.chunk = chunk
        self.dead = dead
        self.source = source
        self.limit = limit
        self.lineno = 0
        self.no_final_newline = False
        self.at_end = False  # the chunk's bytes reach the end of its file

    def _raw_blocks(self) -> Iterator[bytes]:
        """Bytes of the chunk, from its first line start to the line start at or after its end."""
        c = self.chunk
        if c.path.endswith(".gz"):
            self.at_end = True
            with gzip.open(c.path, "rb") as stream:
                while True:
                    try:
                        data = stream.read(BLOCK)
                    except EOFError:
                        self.dead.add("truncated_gzip", self.source, None, None)
                        return
                    except (gzip.BadGzipFile, zlib.error, OSError):
                        self.dead.add("corrupt_gzip", self.source, None, None)
                        return
                    if not data:
                        return
                    yield data
        with open(c.path, "rb") as f:
            start, stop = _line_start(f, c.start), _line_start(f, c.stop)
            self.at_end = stop == os.fstat(f.fileno()).st_size
            f.seek(start)
            left = stop - start
            while left > 0:
                data = f.read(min(BLOCK, left))
                if not data:
                    return
                left -= len(data)
                yield data

    def blocks(self) -> Iterator[tuple[Sequence[int], list[str], list[bytes]]]:
        pending = b""
        last = b""
        for data in self._raw_blocks():
            last = data[-1:]
            data = pending + data if pending else data
            cut = data.rfind(b"\n")
            if cut < 0:
                pending = data
                continue
            pending = data[cut + 1 :]
            yield self._lines(data[:cut])
        if pending:
            yield self._lines(pending)
        self.no_final_newline = bool(last) and last != b"\n" and self.at_end

    def _lines(self, blob: bytes) -> tuple[Sequence[int], list[str], list[bytes]]:
        """Decode complete lines; oversized and invalid UTF-8 lines are dead-lettered (their numbers kept)."""
        raws = blob.split(b"\n")
        first = self.lineno + 1
        self.lineno += len(raws)
        try:
            texts = blob.decode("utf-8").split("\n")
            if all(len(r) <= self.limit for r in raws):
                return range(first, first + len(raws)), texts, raws
        except UnicodeDecodeError:
            pass
        keep_t: list[str] = []
        keep_r: list[bytes] = []
        numbers: list[int] = []
        for i, r in enumerate(raws):
            if len(r) > self.limit:
                self.dead.add("oversized_record", self.source, first + i, None)
                continue
            try:
                keep_t.append(r.decode("utf-8"))
            except UnicodeDecodeError:
                self.dead.add("invalid_utf8", self.source, first + i, r)
                continue
            keep_r.append(r)
            numbers.append(first + i)
        return numbers, keep_t, keep_r


def _line_start(f: IO[bytes], offset: int) -> int:
    """The first line start at or after ``offset`` (a line starts at 0 and after every newline)."""
    if offset == 0:
        return 0
    f.seek(offset - 1)
    if f.read(1) == b"\n":
        return offset
    f.readline()
    return f.tell()
