"""Reading a log for the audit: (user, query, time, record line[, instance key]) per decodable record.

Any registered text format is read (:func:`sidecar.textcodecs.text_codec`: TSV, JSON lines, access logs...);
``format: auto`` picks by extension, else by the first line's content (:func:`~sidecar.textcodecs.sniff_format`).

A record with an empty query (``""`` or only spaces: a query scrubbed to nothing and kept) is a
record like any other, read and audited (it has no category); :func:`empty_queries` counts them.
Only a line the codec cannot decode (wrong column count, not JSON...) is undecodable.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import islice

from adapters.file.reader import open_input
from sidecar.api import Codec, Event, FieldError
from sidecar.codecs import SchemaConfig, carried_fields, format_from_path
from sidecar.textcodecs import sniff_format, text_codec

FieldSink = Callable[[str, str], None]
"""Called with (field name, value as text) for each non-role field of each decodable record."""


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
    path: str,
    schema: SchemaConfig | None = None,
    instance_field: str | None = None,
    fields: FieldSink | None = None,
) -> tuple[list[Record], int]:
    """All decodable records of a log in a text format (.gz ok), empty queries included, and the number of
    undecodable lines.

    ``instance_field``: a field identifying each query event (a role's field or
    any other); its value becomes ``Record.instance`` (None where it is absent).
    ``fields``: receives every non-role field of each record, as logged (:data:`FieldSink`).
    """
    codec = _codec(path, schema or SchemaConfig())
    role_of = {col: role for role, col in codec_schema(codec).roles.mapping().items() if col}
    records: list[Record] = []
    bad = 0
    lines = _lines(path)
    if codec.format == "tsv" and codec_schema(codec).header:
        first = next(lines, None)
        if first is not None:
            codec.accept_header(first)
    while block := list(islice(lines, 1024)):
        chunk = [line for line in block if line]
        failed: list[tuple[int, str]] = []
        events = codec.decode_many(chunk, "\n", failed)
        bad += len(failed)
        for ev in events:
            instance = _field(ev, instance_field, role_of) if instance_field else None
            records.append(
                Record(
                    str(ev.user),
                    str(ev.query),
                    "" if ev.time is None else str(ev.time),
                    ev.raw if ev.raw is not None else "",
                    instance,
                    _rest(ev),
                    "" if ev.url is None else str(ev.url),
                )
            )
            if fields is not None:
                _each_field(codec, ev, fields)
    return records, bad


def codec_schema(codec: Codec) -> SchemaConfig:
    """The schema a text codec was built with."""
    schema: SchemaConfig = getattr(codec, "schema")  # noqa: B009  # every text codec keeps it
    return schema


def _codec(path: str, schema: SchemaConfig) -> Codec:
    """The codec of the log: the schema's format; ``auto``: by extension, else by the first line's content."""
    if schema.format == "auto" and format_from_path(path) is None:
        first = next((line for line in _lines(path) if line), None)
        if first is not None:
            schema = dataclasses.replace(schema, format=sniff_format(first))  # type: ignore[arg-type]
    return text_codec(schema, path)


def _each_field(codec: Codec, ev: Event, sink: FieldSink) -> None:
    """Every non-role field of ``ev``, its value as logged (an access log's referer too, as it is in the line)."""
    for name, role in codec.layout(ev) or ():
        if role is not None:
            continue
        try:
            value = codec.get_field(ev, name)
        except FieldError:
            continue
        if value is None or value == "":
            continue
        sink(name, value if isinstance(value, str) else json.dumps(value, ensure_ascii=False))


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
