"""A whole log in memory, grouped by user: read with the schema codec, written back in the same schema."""

from __future__ import annotations

import gzip
import math
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import IO, Any

import numpy as np
import numpy.typing as npt

from sidecar.api import BadRecord, Event, SchemaConfig
from sidecar.codecs import JsonlCodec, TsvCodec, codec_for

AOL_TIME = "%Y-%m-%d %H:%M:%S"

Floats = npt.NDArray[np.float64]


def parse_time(value: Any) -> float:
    """Seconds since the epoch of a time value (AOL ``YYYY-MM-DD HH:MM:SS``, ISO 8601 or a number); NaN if none."""
    if value is None or value == "":
        return math.nan
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    try:
        return float(text)
    except ValueError:
        pass
    for parse in (lambda t: datetime.strptime(t, AOL_TIME), datetime.fromisoformat):
        try:
            stamp = parse(text)
        except ValueError:
            continue
        return (stamp if stamp.tzinfo else stamp.replace(tzinfo=UTC)).timestamp()
    return math.nan


def parse_times(values: list[Any]) -> Floats:
    """:func:`parse_time` of each value; AOL ``YYYY-MM-DD HH:MM:SS`` texts at once with numpy's parser (UTC, as
    :func:`parse_time`), the rest (and a batch numpy rejects) value by value."""
    out = np.full(len(values), np.nan, dtype=np.float64)
    aol = [i for i, v in enumerate(values) if isinstance(v, str) and len(v) == 19 and v[10] == " "]
    done = np.zeros(len(values), dtype=bool)
    if aol:
        try:
            stamps = np.array([values[i] for i in aol], dtype="datetime64[s]")
        except ValueError:
            pass
        else:
            out[aol] = stamps.astype(np.int64).astype(np.float64)
            done[aol] = True
    for i in np.nonzero(~done)[0].tolist():
        out[i] = parse_time(values[i])
    return out


def parse_rank(value: Any) -> float:
    """A rank as a number; NaN when there is none."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return math.nan
    return number if math.isfinite(number) else math.nan


def _span(values: Floats) -> tuple[float, float]:
    present = values[~np.isnan(values)]
    return (float(present.min()), float(present.max())) if len(present) else (0.0, 0.0)


@dataclass(frozen=True)
class Bounds:
    """Minimum and maximum, over a whole log, of the attributes paper 003 normalises (§3.2): time (seconds),
    rank, queries per user and words per query. A block of users is normalised with its whole log's bounds."""

    time: tuple[float, float]
    rank: tuple[float, float]
    count: tuple[float, float]
    words: tuple[float, float]

    @classmethod
    def of(cls, time: Floats, rank: Floats, counts: Floats, words: Floats) -> Bounds:
        """The bounds of these values (NaN: missing, ignored)."""
        return cls(_span(time), _span(rank), _span(counts), _span(words))


@dataclass
class UserLog:
    """Every event of a log, by user in order of first appearance.

    ``bounds`` is set on a block cut from a bigger log (:mod:`~adapters.microaggregate.blocks`): the whole log's
    normalisation bounds, which ``mdav`` then uses instead of the block's own."""

    codec: TsvCodec | JsonlCodec
    users: list[Any] = field(default_factory=list)
    events: list[list[Event]] = field(default_factory=list)
    bad_records: int = 0
    bounds: Bounds | None = None

    @property
    def numeric_time(self) -> bool:
        """Whether the log writes times as numbers (else as AOL text)."""
        for group in self.events:
            for event in group:
                if event.time not in (None, ""):
                    return isinstance(event.time, int | float) or _is_number(str(event.time))
        return False


def gather(
    starts: npt.NDArray[np.intp], counts: npt.NDArray[np.intp], users: npt.NDArray[np.intp]
) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """The query indexes of ``users`` concatenated in the order given (user ``u``'s queries are ``starts[u] :
    starts[u] + counts[u]``), and where each user's start in them."""
    sizes = counts[users]
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.intp)
    index = np.repeat(starts[users] - offsets, sizes) + np.arange(int(sizes.sum()), dtype=np.intp)
    return index.astype(np.intp), offsets


@dataclass
class FlatLog:
    """A log's queries as flat arrays in user order (user ``u``'s are ``starts[u] : starts[u] + counts[u]``):
    ``sid`` indexes ``strings``; ``time`` (seconds) and ``rank`` are NaN when missing; ``url`` is ``""`` if none."""

    strings: list[str]
    sid: npt.NDArray[np.intp]
    time: Floats
    rank: Floats
    url: list[str]
    counts: npt.NDArray[np.intp]
    starts: npt.NDArray[np.intp]

    @classmethod
    def of(cls, log: UserLog) -> FlatLog:
        """Flatten ``log`` (an empty query and a missing one are the string ``""``)."""
        ids: dict[str, int] = {}
        sid: list[int] = []
        times: list[Any] = []
        ranks: list[float] = []
        urls: list[str] = []
        for group in log.events:
            for event in group:
                sid.append(ids.setdefault("" if event.query is None else str(event.query), len(ids)))
                times.append(event.time)
                ranks.append(parse_rank(event.rank))
                urls.append("" if event.url is None else str(event.url))
        counts = np.array([len(g) for g in log.events], dtype=np.intp)
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.intp)
        return cls(list(ids), np.array(sid, dtype=np.intp), parse_times(times), np.array(ranks), urls, counts, starts)

    def bounds(self) -> Bounds:
        """This log's normalisation bounds."""
        words = np.array([len(s.split()) for s in self.strings], dtype=np.float64)
        return Bounds.of(self.time, self.rank, self.counts.astype(np.float64), words)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _open_text(path: str, mode: str) -> IO[str]:
    if path == "-":
        return sys.stdin if mode == "r" else sys.stdout
    if path.endswith(".gz"):
        if mode == "r":
            return gzip.open(path, "rt", encoding="utf-8", newline="")
        return gzip.open(path, "wt", encoding="utf-8", newline="")
    return open(path, mode, encoding="utf-8", newline="")


def _lines(stream: IO[str]) -> Iterator[str]:
    for line in stream:
        yield line[:-1] if line.endswith("\n") else line  # a trailing \r is the codec's to keep


def read_log(path: str, schema: SchemaConfig | None = None) -> UserLog:
    """Read a TSV or JSON-lines log (gzip by extension, ``-`` for stdin); bad records are counted, not kept."""
    schema = schema or SchemaConfig()
    codec = codec_for(schema, path)
    log = UserLog(codec)
    index: dict[Any, int] = {}
    stream = _open_text(path, "r")
    try:
        header_pending = isinstance(codec, TsvCodec) and codec.has_header
        for line in _lines(stream):
            if header_pending:
                assert isinstance(codec, TsvCodec)
                codec.accept_header(line)
                header_pending = False
                continue
            if not line.strip():
                continue
            try:
                event = codec.decode(line, "\n")
            except BadRecord:
                log.bad_records += 1
                continue
            key = event.user
            slot = index.get(key)
            if slot is None:
                slot = index[key] = len(log.users)
                log.users.append(key)
                log.events.append([])
            log.events[slot].append(event)
    finally:
        if stream is not sys.stdin:
            stream.close()
    return log


def write_log(path: str, codec: TsvCodec | JsonlCodec, events: Iterator[Event]) -> int:
    """Write events in the codec's schema (the TSV header first when the input had one); returns the count."""
    stream = _open_text(path, "w")
    written = 0
    try:
        header = codec.header_for_output() if isinstance(codec, TsvCodec) else None
        if header is not None:
            stream.write(header + "\n")
        for event in events:
            stream.write(codec.encode(event) + "\n")
            written += 1
    finally:
        if stream is sys.stdout:
            stream.flush()
        else:
            stream.close()
    return written
