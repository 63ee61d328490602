"""The forward codec (adapters/forward/codec.py): (tag, time, record) entries <-> events."""

from __future__ import annotations

from pathlib import Path

from adapters.forward.codec import ForwardCodec
from adapters.forward.protocol import Entry, EventTime, pack_entries, packb, parse_message, unpackb
from filters.category_buffer.store import pack_event, unpack_event
from sidecar.api import CODECS, Event, RolesConfig, SchemaConfig
from sidecar.codecs import JsonlCodec
from sidecar.pipeline import codec_lookup
from sidecar.registry import plugins

AOL = {"AnonID": "217", "Query": "lottery", "QueryTime": "2006-03-01 07:17:12", "ItemRank": 1, "ClickURL": b"x"}


def decode(codec: ForwardCodec, *entries: Entry) -> tuple[list[Event], list[tuple[int, str]]]:
    bad: list[tuple[int, str]] = []
    return codec.decode_many(list(entries), "\n", bad), bad


def test_roles_come_from_record_keys_and_the_entry_is_kept() -> None:
    """Each role reads its configured key (AOL names by default); the event's record is the entry itself."""
    entry = Entry("app.search", EventTime(1141251120, 5), dict(AOL, extra=[1, 2]))
    (ev,), bad = decode(ForwardCodec(), entry)
    assert bad == []
    assert (ev.user, ev.query, ev.time, ev.rank, ev.url) == ("217", "lottery", "2006-03-01 07:17:12", 1, b"x")
    assert ev.record is entry
    custom = ForwardCodec(SchemaConfig(roles=RolesConfig(user="uid", query="q", time=None, rank=None, url=None)))
    (ev,), _ = decode(custom, Entry("t", 1, {"q": "", "uid": 7}))
    assert (ev.user, ev.query, ev.time) == (7, "", None)  # an empty query is a valid event


def test_bad_records_are_reported_by_reason() -> None:
    """A record without a query, with a non-string query, without a user, or with a user/query that is not UTF-8
    text is reported (index, reason) and the other entries are decoded."""
    good = Entry("t", 1, {"AnonID": "1", "Query": "q"})
    entries = [
        Entry("t", 1, {"AnonID": "1"}),
        Entry("t", 1, {"AnonID": "1", "Query": 5}),
        Entry("t", 1, {"Query": "q"}),
        Entry("t", 1, {"AnonID": "1", "Query": b"\xff".decode("utf-8", "surrogateescape")}),
        Entry("t", 1, "not a map"),
        good,
    ]
    events, bad = decode(ForwardCodec(), *entries)
    assert [e.record for e in events] == [good]
    assert bad == [
        (0, "missing_query"),
        (1, "query_not_string"),
        (2, "missing_user"),
        (3, "invalid_utf8"),
        (4, "record_not_map"),
    ]


def test_encode_keeps_tag_time_keys_order_and_types() -> None:
    """Unchanged: the very same entry. A changed role: a new entry, the same tag and time (an integer stays an
    integer), every key in its order with its type (bytes stay bytes); the shared original is not touched."""
    codec = ForwardCodec()
    entry = Entry("app.search", 1141251120, dict(AOL))
    (ev,), _ = decode(codec, entry)
    assert codec.encode(ev) is entry
    ev.user = "pseudonym-1"
    out = codec.encode(ev)
    assert out is not entry and (out.tag, out.time) == ("app.search", 1141251120)
    assert list(out.record) == list(AOL) and out.record["AnonID"] == "pseudonym-1"
    assert out.record["ClickURL"] == b"x" and entry.record == AOL
    ev.url = None  # a role set to None keeps its key (null), as JSON lines do
    assert codec.encode(ev).record["ClickURL"] is None
    assert packb([out.time, out.record]) == packb([1141251120, {**AOL, "AnonID": "pseudonym-1"}])


def test_rank_of_another_type_is_a_change() -> None:
    """1 and "1" are different values in a record: a filter that turns one into the other changes the record."""
    codec = ForwardCodec()
    (ev,), _ = decode(codec, Entry("t", 1, dict(AOL)))
    ev.rank = "1"
    assert codec.encode(ev).record["ItemRank"] == "1"


def test_non_role_fields() -> None:
    """set_field/remove_field change a copy of the map (never a role key); fields() lists the non-role keys."""
    codec = ForwardCodec()
    entry = Entry("t", 1, dict(AOL, city="Springfield"))
    (ev,), _ = decode(codec, entry)
    assert dict(codec.fields(ev)) == {"city": "Springfield"}
    codec.set_field(ev, "city", "[removed]")
    assert codec.get_field(ev, "city") == "[removed]" and entry.record["city"] == "Springfield"
    codec.remove_field(ev, "city")
    assert "city" not in codec.encode(ev).record
    for call in (lambda: codec.set_field(ev, "Query", "x"), lambda: codec.get_field(ev, "nope")):
        try:
            call()
        except Exception as exc:
            assert getattr(exc, "reason", None) in {"field_is_role", "no_such_field"}
        else:
            raise AssertionError("expected a FieldError")


def test_events_from_another_codec_become_fresh_entries() -> None:
    """A JSON-lines event becomes an entry with the sink's tag, an EventTime, its carried keys and its roles."""
    jsonl = JsonlCodec(SchemaConfig())
    bad: list[tuple[int, str]] = []
    (ev,) = jsonl.decode_many(['{"AnonID": "9", "Query": "q", "city": "x"}'], "\n", bad)
    out = ForwardCodec(tag="querylog.out").encode(ev)
    assert out.tag == "querylog.out" and isinstance(out.time, EventTime)
    assert out.record == {"city": "x", "AnonID": "9", "Query": "q"}


def test_held_events_survive_the_state_store() -> None:
    """pack_record/unpack_record keep tag, EventTime, bin and non-UTF-8 str values; an event held by
    category_buffer comes back from its store with the codec of the configured schema and encodes the same."""
    odd = b"\xfe".decode("utf-8", "surrogateescape")
    entry = Entry("app", EventTime(1, 2), {"AnonID": "1", "Query": "q", "b": b"\x00", "u": odd})
    codec = ForwardCodec()
    assert codec.unpack_record(codec.pack_record(entry)) == entry
    (ev,), _ = decode(codec, entry)
    blob, kept = pack_event(ev)
    assert kept
    lookup = codec_lookup(SchemaConfig())
    back, fmt = unpack_event(blob, lambda f: lookup(f) if f else None)
    assert fmt == "forward" and isinstance(back.codec, ForwardCodec)
    again = back.codec.encode(back)
    assert packb(again) == packb(entry)
    assert unpackb(packb(entry))[1] == EventTime(1, 2)


def test_registered_and_built_with_the_configured_schema(tmp_path: Path) -> None:
    """The codec is registered under querylog.codecs as "forward"; the runtime's lookup builds it with the schema."""
    assert plugins(CODECS)["forward"] is ForwardCodec
    schema = SchemaConfig(roles=RolesConfig(user="uid", query="q"))
    codec = codec_lookup(schema)("forward")
    assert isinstance(codec, ForwardCodec) and codec.schema is schema


def test_unchanged_events_keep_their_original_bytes() -> None:
    """An event from a PackedForward stream, exactly as decoded, is sent as the entry's own bytes (an ext8 EventTime
    stays ext8); a changed role, a set_field or mark_changed() makes the sink encode it afresh."""
    ext8 = bytes.fromhex("92 c7 08 00 44 06 1c 30 00 00 01 f4")  # [EventTime(1141251120, 500) as ext8,
    ext8 += packb({"AnonID": "217", "Query": "lottery"})  # {"AnonID": "217", "Query": "lottery"}]
    blob = ext8 + pack_entries([(1, {"AnonID": "1", "Query": "q", "x": 1})] * 3)
    codec = ForwardCodec()
    events = codec.decode_many(parse_message(["t", blob]).entries, "\n", [])
    assert b"".join(ForwardCodec.unchanged(ev) or b"" for ev in events) == blob
    a, b, c, d = events
    b.user = "someone else"
    codec.set_field(c, "x", 2)
    d.mark_changed()
    assert ForwardCodec.unchanged(a) == ext8
    assert [ForwardCodec.unchanged(ev) for ev in (b, c, d)] == [None, None, None]
