"""The ``vector`` codec: Vector log events <-> events without losing a type or a byte."""

from __future__ import annotations

import datetime as dt
import json
import math
from typing import Any

import msgpack
import pytest
from helpers.vector import log_event, wire
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.vector.codec import VectorCodec, VectorRecord, frame, split_request
from adapters.vector.stubs.event_pb2 import NULL_VALUE, EventWrapper, Metric, Trace, Value, ValueArray, ValueMap
from adapters.vector.values import VectorTimestamp, plain, set_value, to_python
from sidecar.api import BadRecord, Event, FieldError, RolesConfig, SchemaConfig
from sidecar.codecs import JsonlCodec

SCHEMA = SchemaConfig(roles=RolesConfig(user="user_id", query="message", time="timestamp", rank=None, url=None))
CODEC = VectorCodec(SCHEMA)
INT64 = st.integers(-(2**63), 2**63 - 1)


def _map(items: dict[str, Value]) -> Value:
    v = Value(map=ValueMap())
    for k, item in items.items():
        v.map.fields[k].CopyFrom(item)
    return v


def _timestamp(seconds: int, nanos: int) -> Value:
    v = Value()
    v.timestamp.SetInParent()
    v.timestamp.seconds = seconds
    v.timestamp.nanos = nanos
    return v


SCALARS = st.one_of(
    st.binary(max_size=12).map(lambda b: Value(raw_bytes=b)),
    st.text(max_size=12).map(lambda t: Value(raw_bytes=t.encode())),
    st.builds(_timestamp, INT64, st.integers(0, 999_999_999)),
    INT64.map(lambda i: Value(integer=i)),
    st.floats().map(lambda f: Value(float=f)),  # NaN, infinities and -0.0 included
    st.booleans().map(lambda b: Value(boolean=b)),
    st.just(Value(null=NULL_VALUE)),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(
        st.dictionaries(st.text(max_size=6), inner, max_size=4).map(_map),
        st.lists(inner, max_size=4).map(lambda items: Value(array=ValueArray(items=items))),
    ),
    max_leaves=16,
)
#: bytes for Log.metadata_full that our Metadata message does not declare (Vector's fields, say)
UNKNOWN_METADATA = st.binary(max_size=6).map(lambda b: b"\x0a" + bytes([len(b)]) + b + b"\x18\x05")


@st.composite
def wrappers(draw: st.DrawFn) -> EventWrapper:
    """A log with a user (any non-null value), a query (any text), a time (any value), more keys of any value,
    in Log.value or the deprecated Log.fields, with metadata (known and unknown fields) sometimes."""
    fields: dict[str, Value] = draw(st.dictionaries(st.text(max_size=6), VALUES, max_size=4))
    fields["user_id"] = draw(VALUES.filter(lambda v: v.WhichOneof("kind") != "null"))
    fields["message"] = Value(raw_bytes=draw(st.text(max_size=20)).encode())
    if draw(st.booleans()):
        fields["timestamp"] = draw(VALUES)
    w = EventWrapper()
    if draw(st.booleans()):
        w.log.SetInParent()
        for k, v in fields.items():
            w.log.fields[k].CopyFrom(v)
    else:
        w.log.value.CopyFrom(_map(fields))
    if draw(st.booleans()):
        w.log.metadata.CopyFrom(draw(VALUES))
    if draw(st.booleans()):
        w.log.metadata_full.MergeFromString(draw(UNKNOWN_METADATA))
    return w


def decode_one(data: bytes | EventWrapper, codec: VectorCodec = CODEC) -> Event:
    bad: list[tuple[int, str]] = []
    events = codec.decode_many([data], "\n", bad)
    assert not bad, bad
    return events[0]


def canonical(v: Value) -> bytes:
    return v.SerializeToString(deterministic=True)


class TestRoundTrip:
    @settings(max_examples=150, deadline=None)
    @given(wrappers(), st.booleans())
    def test_unchanged_event_is_its_input_bytes(self, w: EventWrapper, deterministic: bool) -> None:
        """Any Value tree (every kind, nested, NaN, int64 bounds, any timestamp), in Log.value or Log.fields, with
        metadata of unknown fields, decodes and encodes to the very bytes it came as (map order included)."""
        data = w.SerializeToString(deterministic=deterministic)
        assert CODEC.encode(decode_one(data)) == data

    @settings(max_examples=150, deadline=None)
    @given(VALUES)
    def test_python_view_keeps_every_type(self, v: Value) -> None:
        """to_python then set_value gives the same Value: bytes vs text, integer vs float, exact timestamps,
        null, booleans, nested maps and arrays (compared in canonical bytes, so NaN counts as equal)."""
        back = Value()
        set_value(back, to_python(v))
        assert canonical(back) == canonical(v)

    @settings(max_examples=100, deadline=None)
    @given(wrappers(), st.text(max_size=10))
    def test_changed_query_changes_only_the_query(self, w: EventWrapper, new_query: str) -> None:
        """A new query is written into the message key; every other key, Log.metadata and the unknown fields of
        metadata_full come out as they went in."""
        ev = decode_one(w.SerializeToString())
        ev.query = new_query + "!"  # never equal to the old one
        out = EventWrapper.FromString(CODEC.encode(ev))
        legacy = not w.log.HasField("value")
        before = w.log.fields if legacy else w.log.value.map.fields
        after = out.log.fields if legacy else out.log.value.map.fields
        assert after["message"].raw_bytes.decode() == new_query + "!"
        assert set(after) == set(before)
        for key in before:
            if key != "message":
                assert canonical(after[key]) == canonical(before[key]), key
        assert out.log.metadata_full.SerializeToString() == w.log.metadata_full.SerializeToString()
        assert canonical(out.log.metadata) == canonical(w.log.metadata)

    @settings(max_examples=100, deadline=None)
    @given(wrappers())
    def test_record_restored_from_the_state_store_is_identical(self, w: EventWrapper) -> None:
        """pack_record, msgpack of the roles (as category_buffer keeps a held event) and unpack_record by a codec
        built without the schema (as the runtime builds registered codecs) give back the input bytes."""
        data = w.SerializeToString()
        ev = decode_one(data)
        blob = msgpack.packb(
            [ev.user, ev.query, ev.time, CODEC.pack_record(ev.record)], use_bin_type=True, default=lambda o: None
        )
        user, query, time, packed = msgpack.unpackb(blob, raw=False)
        restorer = VectorCodec()
        record = restorer.unpack_record(packed)
        assert isinstance(record, VectorRecord)
        again = Event(user, query, time, None, None, record, None, restorer)
        if ev.user == user and ev.time == time:  # msgpack kept them (a NaN is never equal: then it is rewritten)
            assert restorer.encode(again) == data
        else:
            assert EventWrapper.FromString(restorer.encode(again)).log.HasField("value") != record.legacy


class TestTypes:
    def test_values_decode_to_their_python_types(self) -> None:
        """raw_bytes: str when UTF-8, else bytes; integer int; float float; boolean bool; null None; timestamp a str
        with exact seconds and nanos; maps dicts; arrays lists."""
        w = EventWrapper()
        fields = w.log.value.map.fields
        fields["user_id"].raw_bytes = b"u-1"
        fields["message"].raw_bytes = "caf\u00e9".encode()
        fields["timestamp"].CopyFrom(_timestamp(1714564800, 123456789))
        fields["bin"].raw_bytes = b"\xff\x00"
        fields["n"].integer = 1
        fields["f"].float = 1.0
        fields["yes"].boolean = True
        fields["nothing"].null = NULL_VALUE
        fields["nested"].CopyFrom(_map({"a": Value(array=ValueArray(items=[Value(integer=2), Value(null=0)]))}))
        ev = decode_one(w)
        assert (ev.user, ev.query) == ("u-1", "caf\u00e9")
        assert type(ev.time) is VectorTimestamp
        assert ev.time == "2024-05-01T12:00:00.123456789Z"
        assert (ev.time.seconds, ev.time.nanos) == (1714564800, 123456789)
        got = {k: CODEC.get_field(ev, k) for k in ("bin", "n", "f", "yes", "nothing", "nested")}
        assert got == {"bin": b"\xff\x00", "n": 1, "f": 1.0, "yes": True, "nothing": None, "nested": {"a": [2, None]}}
        assert [type(got[k]) for k in ("bin", "n", "f", "yes")] == [bytes, int, float, bool]

    def test_other_formats_get_text_for_bytes_and_timestamps(self) -> None:
        """fields() (what a JSON lines or TSV sink writes) gives bytes as UTF-8 text (invalid bytes replaced) and
        timestamps as RFC 3339 text, in key order, without the roles."""
        ev = decode_one(
            wire({"user_id": "u", "message": "q", "z": b"\xff", "a": dt.datetime(2024, 1, 2, 3, 4, 5, 600000)})
        )
        assert CODEC.fields(ev) == {"a": "2024-01-02T03:04:05.600Z", "z": "\ufffd"}
        assert list(CODEC.fields(ev)) == ["a", "z"]

    @pytest.mark.parametrize(
        ("seconds", "nanos", "text"),
        [
            (0, 0, "1970-01-01T00:00:00Z"),
            (1714564800, 5_000_000, "2024-05-01T12:00:00.005Z"),
            (1714564800, 5_000, "2024-05-01T12:00:00.000005Z"),
            (1714564800, 5, "2024-05-01T12:00:00.000000005Z"),
            (-1, 999_999_999, "1969-12-31T23:59:59.999999999Z"),
            (-62135596800, 0, "0001-01-01T00:00:00Z"),
            (253402300800, 0, "253402300800s+0ns"),  # beyond year 9999: still exact
            (-(2**63), 0, f"{-(2**63)}s+0ns"),
        ],
    )
    def test_timestamp_text_is_exact_both_ways(self, seconds: int, nanos: int, text: str) -> None:
        """RFC 3339 with 0/3/6/9 fraction digits (as Vector's JSON writes), and back to the same seconds and nanos."""
        ts = VectorTimestamp(seconds, nanos)
        assert ts == text
        back = VectorTimestamp.parse(str(ts))
        assert back is not None and (back.seconds, back.nanos) == (seconds, nanos)

    def test_timestamp_parse_takes_offsets_and_refuses_other_text(self) -> None:
        ts = VectorTimestamp.parse("2024-05-01T14:00:00.5+02:00")
        assert ts is not None and (ts.seconds, ts.nanos) == (1714564800, 500_000_000)
        assert VectorTimestamp.parse("2024-05-01") is None
        assert VectorTimestamp.parse("2024-02-30T00:00:00Z") is None
        assert VectorTimestamp.parse("yesterday") is None

    def test_changed_time_stays_a_timestamp_when_it_parses(self) -> None:
        """A filter's new time text goes back as a timestamp when it is RFC 3339, else as bytes; a new integer
        rank stays an integer."""
        codec = VectorCodec(SchemaConfig(roles=RolesConfig(user="u", query="q", time="t", rank="r", url=None)))
        ev = decode_one(wire({"u": "x", "q": "y", "t": dt.datetime(2024, 1, 1), "r": 3}), codec)
        ev.time = "2024-01-01T00:00:00.000000001Z"
        ev.rank = 4
        out = EventWrapper.FromString(codec.encode(ev)).log.value.map.fields
        assert (out["t"].timestamp.seconds, out["t"].timestamp.nanos) == (1704067200, 1)
        assert out["r"].WhichOneof("kind") == "integer" and out["r"].integer == 4
        ev.time = "early 2024"
        out = EventWrapper.FromString(codec.encode(ev)).log.value.map.fields
        assert out["t"].raw_bytes == b"early 2024"

    def test_equal_value_of_another_type_is_a_change(self) -> None:
        """1.0 replacing the integer 1 is written as a float (equal, not the same kind); the very same int is not."""
        codec = VectorCodec(SchemaConfig(roles=RolesConfig(user="u", query="q", time=None, rank="r", url=None)))
        data = wire({"u": "x", "q": "y", "r": 1})
        ev = decode_one(data, codec)
        ev.rank = 1
        assert codec.encode(ev) == data
        ev.rank = 1.0
        assert EventWrapper.FromString(codec.encode(ev)).log.value.map.fields["r"].float == 1.0

    def test_a_role_set_to_none_becomes_null_and_an_absent_one_stays_absent(self) -> None:
        ev = decode_one(wire({"user_id": "u", "message": "q", "timestamp": 5}))
        ev.time = None
        assert EventWrapper.FromString(CODEC.encode(ev)).log.value.map.fields["timestamp"].WhichOneof("kind") == "null"
        ev = decode_one(wire({"user_id": "u", "message": "q"}))
        ev.user = "v"
        assert "timestamp" not in EventWrapper.FromString(CODEC.encode(ev)).log.value.map.fields

    def test_deprecated_fields_map_is_read_and_written_back_there(self) -> None:
        ev = decode_one(wire({"user_id": "u", "message": "old", "k": 1}, legacy=True))
        assert ev.query == "old"
        ev.query = "new"
        out = EventWrapper.FromString(CODEC.encode(ev))
        assert not out.log.HasField("value")
        assert out.log.fields["message"].raw_bytes == b"new" and out.log.fields["k"].integer == 1

    def test_values_vector_cannot_carry_are_bad_records(self) -> None:
        ev = decode_one(wire({"user_id": "u", "message": "q"}))
        for value, reason in ((2**63, "integer_out_of_range"), ("\ud800", "lone_surrogate"), (object(), "unsupported")):
            ev.user = value
            with pytest.raises(BadRecord, match=reason):
                CODEC.encode(ev)


class TestBadRecords:
    @pytest.mark.parametrize(
        ("record", "reason"),
        [
            (b"\xff\xff\xff", "invalid_event"),
            (EventWrapper(metric=Metric()).SerializeToString(), "unsupported_event"),
            (EventWrapper(trace=Trace()).SerializeToString(), "unsupported_event"),
            (b"", "empty_event"),
            (EventWrapper(log={"value": Value(raw_bytes=b"bare message")}).SerializeToString(), "log_value_not_map"),
            (wire({"user_id": "u"}), "missing_query"),
            (wire({"user_id": "u", "message": None}), "missing_query"),
            (wire({"user_id": "u", "message": 7}), "query_not_string"),
            (wire({"user_id": "u", "message": b"\xc3\x28"}), "query_not_utf8"),
            (wire({"message": "q"}), "missing_user"),
            (wire({"message": "q", "user_id": None}), "missing_user"),
        ],
    )
    def test_bad_record_reasons(self, record: bytes, reason: str) -> None:
        """Each shape Vector could send that is no query event is dead-lettered by its reason."""
        bad: list[tuple[int, str]] = []
        good = wire({"user_id": "u", "message": "fine"})
        events = CODEC.decode_many([good, record, good], "\n", bad)
        assert bad == [(1, reason)]
        assert len(events) == 2  # a bad record never takes good ones with it

    def test_empty_query_is_an_event(self) -> None:
        data = wire({"user_id": "u", "message": ""})
        ev = decode_one(data)
        assert ev.query == ""
        assert CODEC.encode(ev) == data


class TestFields:
    def test_set_and_remove_field_give_a_new_record(self) -> None:
        """set_field/remove_field leave the original record (perhaps held by another event) untouched, keep the
        field's kind where the value fits, refuse role keys, and keep the roles' identity."""
        data = wire({"user_id": "u", "message": "q", "host": "h", "seen": dt.datetime(2024, 1, 1)})
        ev = decode_one(data)
        original = ev.record
        CODEC.set_field(ev, "host", "other")
        CODEC.set_field(ev, "seen", "2025-01-01T00:00:00Z")
        assert ev.record is not original and original.wire == data
        assert CODEC.get_field(ev, "host") == "other"
        assert type(CODEC.get_field(ev, "seen")) is VectorTimestamp
        CODEC.remove_field(ev, "host")
        with pytest.raises(FieldError, match="no_such_field"):
            CODEC.get_field(ev, "host")
        with pytest.raises(FieldError, match="field_is_role"):
            CODEC.set_field(ev, "message", "x")
        out = EventWrapper.FromString(CODEC.encode(ev)).log.value.map.fields
        assert set(out) == {"user_id", "message", "seen"} and out["message"].raw_bytes == b"q"

    def test_field_access_on_foreign_records_is_refused(self) -> None:
        ev = Event("u", "q", record={"a": 1})
        with pytest.raises(FieldError):
            CODEC.set_field(ev, "a", 2)
        assert CODEC.fields(ev) == {}

    def test_event_from_json_lines_becomes_a_typed_log(self) -> None:
        """An event of another format becomes a log of its fields and roles in Log.value (JSON strings as
        raw_bytes, numbers, booleans, null, nested values kept)."""
        jsonl = JsonlCodec(SCHEMA)
        record = {"user_id": 7, "message": "q", "timestamp": "2024-01-01T00:00:00Z", "n": 1.5, "ok": False}
        line = json.dumps({**record, "x": None, "o": {"a": [1]}})
        ev = jsonl.decode(line, "\n")
        out = EventWrapper.FromString(CODEC.encode(ev)).log.value.map.fields
        assert to_python(out["user_id"]) == 7 and out["message"].raw_bytes == b"q"
        assert out["timestamp"].raw_bytes == b"2024-01-01T00:00:00Z"  # JSON text stays text
        assert (out["n"].float, out["ok"].boolean, out["x"].WhichOneof("kind")) == (1.5, False, "null")
        assert plain(out["o"]) == {"a": [1]}


class TestFraming:
    def test_hand_written_bytes_decode_by_the_published_field_numbers(self) -> None:
        """A request written byte by byte from REFERENCE.md's field numbers (not by our stubs) decodes:

        PushEventsRequest{events[1]: EventWrapper{log[1]: Log{value[2]: Value{map[7]: ValueMap{fields[1]: {
          "message": Value{raw_bytes[1]: "hi"}, "user_id": Value{integer[4]: 5},
          "timestamp": Value{timestamp[2]: {seconds[1]: 1, nanos[2]: 2}}, "f": Value{float[5]: 0.5},
          "b": Value{boolean[6]: true}, "z": Value{null[9]: 0}, "a": Value{array[8]: {items[1]: [Value{}]}}}}}}}}
        """
        entries = [
            b"\x0a\x07message" + b"\x12\x04" + b"\x0a\x02hi",
            b"\x0a\x07user_id" + b"\x12\x02" + b"\x20\x05",
            b"\x0a\x09timestamp" + b"\x12\x06" + b"\x12\x04\x08\x01\x10\x02",
            b"\x0a\x01f" + b"\x12\x09" + b"\x29" + b"\x00\x00\x00\x00\x00\x00\xe0\x3f",
            b"\x0a\x01b" + b"\x12\x02" + b"\x30\x01",
            b"\x0a\x01z" + b"\x12\x02" + b"\x48\x00",
            b"\x0a\x01a" + b"\x12\x04" + b"\x42\x02\x0a\x00",
        ]
        value_map = b"".join(b"\x0a" + bytes([len(e)]) + e for e in entries)
        value = b"\x3a" + bytes([len(value_map)]) + value_map
        log = b"\x12" + bytes([len(value)]) + value
        event = b"\x0a" + bytes([len(log)]) + log
        request = b"\x0a" + bytes([len(event)]) + event
        (only,) = split_request(request)
        codec = VectorCodec(SCHEMA)
        ev = decode_one(only, codec)
        assert (ev.user, ev.query, ev.time) == (5, "hi", VectorTimestamp(1, 2))
        assert [codec.get_field(ev, k) for k in ("f", "b", "z", "a")] == [0.5, True, None, [None]]
        assert codec.encode(ev) == only

    @given(st.lists(st.binary(max_size=300), max_size=5))
    def test_split_is_the_inverse_of_frame(self, events: list[bytes]) -> None:
        assert split_request(frame(events)) == events

    def test_broken_framing_and_other_fields(self) -> None:
        """Truncated requests are refused; fields other than events (a newer sender's) are skipped."""
        good = frame([b"abc"])
        for broken in (good[:-1], b"\x0a\x85", b"\x0f", b"\x00\x01"):
            with pytest.raises(ValueError):
                split_request(broken)
        assert split_request(b"\x10\x01" + good + b"\x1a\x01x" + b"\x25\x00\x00\x00\x00") == [b"abc"]


def test_nan_role_is_kept() -> None:
    """A NaN role value (never equal to itself) is still the same object: the event is unchanged."""
    codec = VectorCodec(SchemaConfig(roles=RolesConfig(user="u", query="q", time=None, rank="r", url=None)))
    data = wire({"u": "x", "q": "y", "r": math.nan})
    assert codec.encode(decode_one(data, codec)) == data


def test_log_event_helper_builds_what_it_says() -> None:
    fields: dict[str, Any] = {"user_id": "u", "message": "m", "n": 2}
    assert to_python(log_event(fields).log.value) == fields
