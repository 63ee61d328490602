"""Records of a structured protocol read as JSON objects by the schema's codec (``format: ubi`` over Vector, OTLP).

A codec whose records are JSON objects (``json_records``: the UBI codec) reads the objects a network source parsed.
The ``http`` and ``forward`` sources parse them from their bodies themselves; a source whose protocol carries
structured values (a Vector log's map, an OTLP log record's body) hands its batches an :class:`ObjectRecords`:
each record becomes its JSON object by the source's ``to_object`` (a record that is none is dead-lettered with
the reason it raises as :class:`~sidecar.api.BadRecord`), then the schema's codec decodes the objects. The events
are that codec's own: sinks, the join stage and the state store see a UBI record whatever protocol brought it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sidecar.api import BadRecord, Codec, Event

__all__ = ["ObjectRecords", "reads_objects"]


def reads_objects(codec: Codec | None) -> bool:
    """Whether ``codec`` (the schema's) reads JSON objects itself (``json_records``: ``format: ubi``)."""
    return codec is not None and bool(getattr(codec, "json_records", False))


class ObjectRecords(Codec):
    """A protocol's records as JSON objects, decoded by ``target`` (a codec that :func:`reads_objects`)."""

    format = "objects"

    def __init__(self, target: Codec, to_object: Callable[[Any], dict[str, Any]]) -> None:
        self.target = target
        self.to_object = to_object

    def decode_many(self, records: Sequence[Any], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        objects: list[dict[str, Any]] = []
        where: list[int] = []  # the record index of each object
        for i, record in enumerate(records):
            try:
                objects.append(self.to_object(record))
            except BadRecord as exc:
                bad.append((i, exc.reason))
                continue
            where.append(i)
        refused: list[tuple[int, str]] = []
        events = self.target.decode_many(objects, eol, refused)
        bad.extend((where[j], reason) for j, reason in refused)
        bad.sort()
        return events

    def encode(self, event: Event) -> Any:
        """The event as its own codec writes it (the events of this batch are the target codec's)."""
        codec = event.codec if event.codec is not None and event.codec is not self else self.target
        return codec.encode(event)
