"""Reading a log for the audit: (user, query, time, record line) per decodable record."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from adapters.files import open_input
from sidecar.api import DeadLetter
from sidecar.records import SchemaConfig, codec_for


@dataclass(frozen=True, slots=True)
class Record:
    user: str
    query: str
    time: str
    line: str


def read_log(path: str, schema: SchemaConfig | None = None) -> tuple[list[Record], int]:
    """All decodable records of a TSV/JSONL log (.gz ok) and the number of undecodable lines."""
    schema = schema or SchemaConfig()
    codec = codec_for(schema, path)
    records: list[Record] = []
    bad = 0
    for i, line in enumerate(_lines(path)):
        if i == 0 and codec.format == "tsv" and schema.header:
            codec.accept_header(line)
            continue
        if not line:
            continue
        try:
            ev = codec.decode(line, "\n")
        except DeadLetter:
            bad += 1
            continue
        records.append(Record(str(ev.user), str(ev.query), "" if ev.time is None else str(ev.time), line))
    return records, bad


def _lines(path: str) -> Iterator[str]:
    with open_input(path) as fh:
        for raw in fh:
            text = raw.decode("utf-8", errors="replace")
            yield text[:-1] if text.endswith("\n") else text
