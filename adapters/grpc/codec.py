"""QueryEvent messages <-> events, in batches.

An event decoded from a :class:`QueryEvent` keeps the message as its ``record``
and :class:`ProtoCodec` as its ``codec``. Encoding an unchanged event returns the
very same message; changed roles are written back into it (``seq`` and the
``attributes`` ride along untouched). Events from other codecs (a TSV line, a JSON
object) become fresh messages: roles as strings, the record's other fields in
``attributes`` (the other codec's ``fields``).

Empty ``time``/``rank``/``url`` strings decode to ``None`` (absent), as proto3
strings cannot tell empty from unset. An empty ``query`` decodes to ``""``: a valid
event (a passthrough chain returns the very same message).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from adapters.grpc.stubs.querylog.v1.querylog_pb2 import EventBatch, QueryEvent
from sidecar.api import NO_META, ROLES, Codec, Event, FieldError

__all__ = ["DECODED", "DecodedCodec", "EventBatch", "ProtoCodec", "ProtoEvent", "QueryEvent"]


class ProtoEvent(Event):
    """An event decoded from a QueryEvent; ``orig`` holds the role values as decoded."""

    __slots__ = ("orig",)

    orig: tuple[Any, Any, Any, Any, Any]


def _text(value: Any) -> str:
    return "" if value is None else value if type(value) is str else str(value)


class ProtoCodec(Codec):
    """Decode QueryEvent messages to events and encode events to QueryEvents."""

    format = "proto"

    def decode_batch(self, messages: Any) -> list[ProtoEvent]:
        """Events for the messages of a repeated field, in order (no validation)."""
        new = ProtoEvent.__new__
        out: list[ProtoEvent] = []
        append = out.append
        for m in messages:
            ev = new(ProtoEvent)
            u = ev.user = m.user
            q = ev.query = m.query
            t = ev.time = m.time or None
            r = ev.rank = m.rank or None
            lk = ev.url = m.url or None
            ev.orig = (u, q, t, r, lk)
            ev.record = m
            ev.raw = None
            ev.codec = self
            ev.eol = "\n"
            ev.meta = NO_META
            append(ev)
        return out

    def decode(self, message: QueryEvent) -> ProtoEvent:
        return self.decode_batch((message,))[0]

    def decode_many(self, records: Sequence[Any], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        """Events for QueryEvent messages, a fresh list, one per message.

        An empty query (``""`` or only spaces) is a valid event, as in every codec: whether it is
        kept is a filter's decision. A parsed message has no other way to be bad here, so ``bad``
        is never appended to (callers that dead-letter what it reports find it empty).
        """
        events: list[Event] = list(self.decode_batch(records))
        return events

    def encode(self, event: Event) -> QueryEvent:
        """The event as a QueryEvent: its own message when it came from one, else a fresh one.

        A filter may emit a new :class:`Event` that shares a decoded event's message
        (category_buffer re-pairs a query with another user): every role is then
        written into that message. An event whose message was not kept (restored
        from a state store without it) gets a fresh one; one restored with its
        message (its codec another ProtoCodec) gets that message back.
        """
        if type(event.record) is QueryEvent and isinstance(event.codec, ProtoCodec):
            m: QueryEvent = event.record
            if type(event) is not ProtoEvent:
                m.user, m.query = _text(event.user), _text(event.query)
                m.time, m.rank, m.url = _text(event.time), _text(event.rank), _text(event.url)
                return m
            u, q, t, r, lk = event.orig
            if event.user is not u:
                m.user = _text(event.user)
            if event.query is not q:
                m.query = _text(event.query)
            if event.time is not t:
                m.time = _text(event.time)
            if event.rank is not r:
                m.rank = _text(event.rank)
            if event.url is not lk:
                m.url = _text(event.url)
            return m
        return self.fresh(event)

    def fresh(self, event: Event) -> QueryEvent:
        """A new QueryEvent from an event of another codec; non-role fields go to attributes."""
        return QueryEvent(
            user=_text(event.user),
            query=_text(event.query),
            time=_text(event.time),
            rank=_text(event.rank),
            url=_text(event.url),
            attributes={str(k): _text(v) for k, v in event.codec.fields(event).items()} if event.codec else {},
        )

    def encode_batch(self, events: list[Event]) -> list[QueryEvent]:
        encode = self.encode
        return [encode(e) for e in events]

    def fields(self, event: Event) -> Mapping[str, Any]:
        """Non-role fields: the message's attributes (used when a TSV/JSONL sink writes it)."""
        record = event.record
        return dict(record.attributes) if type(record) is QueryEvent else {}

    def get_field(self, event: Event, name: str) -> Any:
        """A non-role field is an entry of the message's ``attributes``."""
        record = event.record
        if type(record) is not QueryEvent or name not in record.attributes:
            raise FieldError("no_such_field")
        return record.attributes[name]

    def set_field(self, event: Event, name: str, value: Any) -> None:
        """Set an ``attributes`` entry of the event's own message (the message is what is encoded)."""
        record = event.record
        if type(record) is not QueryEvent:
            raise FieldError("unsupported_codec")
        if name in ROLES:
            raise FieldError("field_is_role")
        record.attributes[name] = _text(value)

    def remove_field(self, event: Event, name: str) -> None:
        record = event.record
        if type(record) is not QueryEvent:
            raise FieldError("unsupported_codec")
        if name in ROLES:
            raise FieldError("field_is_role")
        if name in record.attributes:
            del record.attributes[name]

    def pack_record(self, record: Any) -> Any:
        """The message's wire bytes (``seq`` and ``attributes`` included)."""
        return record.SerializeToString() if type(record) is QueryEvent else None

    def unpack_record(self, data: Any) -> Any:
        return QueryEvent.FromString(data) if isinstance(data, bytes) else None


class DecodedCodec(ProtoCodec):
    """The codec of a :class:`~sidecar.api.RecordBatch` whose records are events a :class:`ProtoCodec` already
    decoded: the gRPC service decodes a request once (to check sizes, answer with the request's own messages and
    detach held ones) and the runtime takes the events as they are. Everything else is :class:`ProtoCodec`'s."""

    def decode_many(self, records: Sequence[Any], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        return list(records)


#: The one :class:`DecodedCodec` (stateless).
DECODED = DecodedCodec()
