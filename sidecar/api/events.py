"""Events, the codecs that make them from records and back, and the errors a codec raises."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

ROLES: tuple[str, ...] = ("user", "query", "time", "rank", "url")
"""The roles a schema map assigns to record fields."""

NO_META: Mapping[str, Any] = MappingProxyType({})
"""The annotations of an event that has none: one shared, read-only mapping (write with ``Event.annotate``)."""


class Event:
    """One query event.

    ``record`` is the decoded original (a list of TSV fields, a JSON dict, a
    protobuf message); ``raw`` is the original line when the source was text, so
    an unchanged event is written back byte for byte (see the identity rule
    in :mod:`sidecar.api`). ``codec`` is the codec that decoded it (None for an event rebuilt
    without one: it is then encoded from its roles). ``meta`` carries per-event
    facts for later filters (category, detector counts...) and is never written
    to the output; it is a mapping, never None (one shared empty one until
    :meth:`annotate` adds the first fact).
    """

    __slots__ = ("codec", "eol", "meta", "query", "rank", "raw", "record", "time", "url", "user")

    def __init__(
        self,
        user: Any,
        query: Any,
        time: Any = None,
        rank: Any = None,
        url: Any = None,
        record: Any = None,
        raw: str | None = None,
        codec: Codec | None = None,
        eol: str = "\n",
    ) -> None:
        self.user = user
        self.query = query
        self.time = time
        self.rank = rank
        self.url = url
        self.record = record
        self.raw = raw
        self.codec = codec
        self.eol = eol
        self.meta: Mapping[str, Any] = NO_META

    def annotate(self, key: str, value: Any) -> None:
        """Attach a per-event fact (``category``, ``scrub_counts``...) for later filters."""
        meta = self.meta
        if type(meta) is dict:
            meta[key] = value
        elif meta is NO_META:  # the first fact: this event gets its own dict
            self.meta = {key: value}
        else:  # another read-only mapping
            self.meta = {**meta, key: value}

    def mark_changed(self) -> None:
        """Say that ``record`` was edited in place: the encoder must not return the original ``raw``."""
        self.raw = None

    def __repr__(self) -> str:  # never show values: events end up in tracebacks
        return f"<Event codec={type(self.codec).__name__} meta_keys={sorted(self.meta)}>"


class BadRecord(Exception):
    """Raised by a decoder for a record that cannot become an event; ``reason`` is a slug."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class FieldError(Exception):
    """A record field cannot be read or set; ``reason`` is a slug (``no_such_field``, ``field_is_role``...)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Codec:
    """Records of one format <-> events.

    Subclasses set ``format`` and implement ``decode_many`` and ``encode``; text
    formats also implement the field access methods. ``encode`` follows the
    identity rule. ``pack_record``/``unpack_record`` let a filter keep an
    event's record in the state store and get it back after a restart.
    """

    format: ClassVar[str] = ""

    def accept_header(self, line: str) -> None:
        """Called with the first line when the format has a header."""

    def header_for_output(self) -> str | None:
        """The header line to write before the first record, if the format has one."""
        return None

    def decode_many(self, records: Sequence[Any], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        """Events for ``records`` in order; a record that cannot be one is skipped and ``(index, reason)``
        appended to ``bad`` (it is dead-lettered by the caller). Never raises for a bad record."""
        raise NotImplementedError

    def encode(self, event: Event) -> Any:
        """The record for ``event`` (a line without its end for text formats)."""
        raise NotImplementedError

    def fields(self, event: Event) -> Mapping[str, Any]:
        """The non-role fields of the event's record, by name (carried into other formats)."""
        return {}

    def layout(self, event: Event) -> list[tuple[str, str | None]] | None:
        """The record's keys in their order, each with the role it plays (None: not a role), so another format
        can keep key set and key order (null role keys included) when it writes the event. None: a fixed schema
        with no order of its own (its :meth:`fields`, then the roles with a value, are written)."""
        return None

    def get_field(self, event: Event, name: str) -> Any:
        """The value of record field ``name``; :class:`FieldError` when there is none."""
        raise FieldError("unsupported_codec")

    def set_field(self, event: Event, name: str, value: Any) -> None:
        """Set non-role field ``name`` of the event's record, keeping ``raw`` in step (the identity rule)."""
        raise FieldError("unsupported_codec")

    def remove_field(self, event: Event, name: str) -> None:
        """Remove non-role field ``name`` (a format with fixed columns empties it instead); keeps ``raw`` in step."""
        raise FieldError("unsupported_codec")

    def pack_record(self, record: Any) -> Any:
        """The record as msgpack-able data (lists, dicts, strings, numbers, bytes), for the state store."""
        return record

    def unpack_record(self, data: Any) -> Any:
        """The inverse of :meth:`pack_record`."""
        return data
