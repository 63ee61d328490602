"""Reading a log for the audit: (user, query, time, record line[, instance key]) per decodable record.

A record with an empty query (``""`` or only spaces: a query scrubbed to nothing and kept) is a
record like any other, read and audited (it has no category); :func:`empty_queries` counts them.
Only a line the codec cannot decode (wrong column count, not JSON...) is undecodable.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from adapters.file.reader import open_input
from sidecar.api import BadRecord, Event
from sidecar.codecs import SchemaConfig, carried_fields, codec_for


@dataclass(frozen=True, slots=True)
class Record:
    user: str
    query: str
    time: str
    line: str
    instance: str | None = None
    rest: str = ""
    """Every field but the user, in a fixed order: two records are identical when user and rest are."""
    url: str = ""
    """The clicked URL ("" when none): its host is evidence for the user linkage attack."""


def read_log(
    path: str, schema: SchemaConfig | None = None, instance_field: str | None = None
) -> tuple[list[Record], int]:
    """All decodable records of a TSV/JSONL log (.gz ok), empty queries included, and the number of
    undecodable lines.

    ``instance_field``: a field identifying each query event (a role's field or
    any other); its value becomes ``Record.instance`` (None where it is absent).
    """
    schema = schema or SchemaConfig()
    role_of = {col: role for role, col in schema.roles.mapping().items() if col}
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
        except BadRecord:
            bad += 1
            continue
        instance = _field(ev, instance_field, role_of) if instance_field else None
        records.append(
            Record(
                str(ev.user),
                str(ev.query),
                "" if ev.time is None else str(ev.time),
                line,
                instance,
                _rest(ev),
                "" if ev.url is None else str(ev.url),
            )
        )
    return records, bad


def empty_queries(records: list[Record]) -> int:
    """How many records have an empty query (nothing but spaces)."""
    return sum(1 for r in records if not r.query.strip())


def _rest(ev: Event) -> str:
    roles = ["" if v is None else str(v) for v in (ev.query, ev.time, ev.rank, ev.url)]
    carried = [f"{k}={v}" for k, v in sorted(carried_fields(ev).items())]
    return "\x1f".join(roles + carried)


def _field(ev: Event, name: str, role_of: dict[str, str]) -> str | None:
    value = getattr(ev, role_of[name]) if name in role_of else carried_fields(ev).get(name)
    return None if value is None or value == "" else str(value)


def _lines(path: str) -> Iterator[str]:
    with open_input(path) as fh:
        for raw in fh:
            text = raw.decode("utf-8", errors="replace")
            yield text[:-1] if text.endswith("\n") else text
