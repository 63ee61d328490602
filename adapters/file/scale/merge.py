"""The partitions' outputs into the replay's output: one same-schema log, or one file per partition.

Merged, records are ordered by the key each partition wrote (the input position at which the record left
its chain; see :mod:`adapters.file.scale.worker`); equal keys keep partition order, then each partition's order.
For a chain that neither holds nor reorders events every key is the record's own input position, so the
merged log is the one-process replay's, byte for byte. Outputs are written to a temporary file, fsynced
and renamed: a reader never sees half a log.
"""

from __future__ import annotations

import gzip
import heapq
import os
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from adapters.file.scale.job import fsync_dir

#: bytes of output collected before a write
WRITE_BYTES = 1 << 20


def _keyed(path: Path) -> Iterator[tuple[int, str]]:
    with open(path, encoding="utf-8", newline="\n") as f:
        for line in f:
            k, _, rest = line.partition("\t")
            yield int(k), rest


def _open_out(path: str) -> IO[str]:
    if path.endswith(".gz"):
        return gzip.open(path, "wt", encoding="utf-8", newline="", compresslevel=6)
    return open(path, "w", encoding="utf-8", newline="")


def _write_all(path: str, header: str | None, lines: Iterator[str]) -> int:
    """Write ``header`` and ``lines`` atomically to ``path``; returns the number of records."""
    final = os.path.abspath(path)
    tmp = os.path.join(os.path.dirname(final), f".{os.path.basename(final)}.partial-{os.getpid()}")
    if final.endswith(".gz"):
        tmp += ".gz"
    n = 0
    with _open_out(tmp) as out:
        buf: list[str] = [header + "\n"] if header is not None else []
        size = 0
        for line in lines:
            buf.append(line)
            size += len(line)
            n += 1
            if size >= WRITE_BYTES:
                out.write("".join(buf))
                buf, size = [], 0
        out.write("".join(buf))
    with open(tmp, "rb") as f:
        os.fsync(f.fileno())
    os.replace(tmp, final)
    fsync_dir(Path(final).parent)
    return n


def merge(parts: list[Path], output: str, header: str | None, last_record: int | None) -> int:
    """One log from the partition outputs, in key order; returns the number of records.

    ``last_record``: the position of the input's last record when the input ends without a newline; the
    output then ends without one too, when that record is the output's last (as ``replay`` writes it).
    """
    merged = heapq.merge(*(_keyed(p) for p in parts), key=lambda t: t[0])
    return _write_all(output, header, _last_newline(merged, last_record))


def _last_newline(merged: Iterator[tuple[int, str]], last_record: int | None) -> Iterator[str]:
    prev: tuple[int, str] | None = None
    for item in merged:
        if prev is not None:
            yield prev[1]
        prev = item
    if prev is not None:
        yield prev[1][:-1] if last_record is not None and prev[0] == last_record else prev[1]


def split_name(output: str, p: int, n: int) -> str:
    """``out.tsv.gz`` -> ``out.part-0001-of-0004.tsv.gz``."""
    folder, name = os.path.split(output)
    gz = ".gz" if name.endswith(".gz") else ""
    stem, ext = os.path.splitext(name[: len(name) - len(gz)])
    return os.path.join(folder, f"{stem}.part-{p:04d}-of-{n:04d}{ext}{gz}")


def write_split(parts: list[Path], output: str, header: str | None) -> list[str]:
    """One output per partition (each with the header), for stores that ingest in parallel."""
    names = []
    for p, path in enumerate(parts):
        name = split_name(output, p, len(parts))
        _write_all(name, header, (line for _, line in _keyed(path)))
        names.append(name)
    return names
