"""The contract's rules, checked on every built-in codec: identity, field access, annotations."""

from __future__ import annotations

import json

import pytest

from adapters.grpc.codec import ProtoCodec, QueryEvent
from sidecar.api import NO_META, Event, FieldError
from sidecar.codecs import JsonlCodec, SchemaConfig, TsvCodec

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\tSession"


def _tsv() -> TsvCodec:
    codec = TsvCodec(SchemaConfig())
    codec.accept_header(HEADER)
    return codec


def test_tsv_unchanged_event_encodes_to_its_input_line() -> None:
    """Identity rule: role values untouched, the encoder returns the very input line (CR included)."""
    codec = _tsv()
    line = "7\tweather\t2006-03-01 10:00:00\t\t\ts1\r"
    (ev,) = codec.decode_many([line], "\n", [])
    assert codec.encode(ev) is ev.raw
    assert codec.encode(ev) == line


def test_tsv_set_field_changes_the_output_and_keeps_raw_in_step() -> None:
    """A non-role column set through the codec reaches the output; the line end is kept."""
    codec = _tsv()
    (ev,) = codec.decode_many(["7\tweather\t2006-03-01 10:00:00\t\t\ts1\r"], "\n", [])
    codec.set_field(ev, "Session", "s2")
    assert codec.get_field(ev, "Session") == "s2"
    assert codec.encode(ev) == "7\tweather\t2006-03-01 10:00:00\t\t\ts2\r"
    codec.remove_field(ev, "Session")  # a column cannot go away: it is emptied
    assert codec.encode(ev) == "7\tweather\t2006-03-01 10:00:00\t\t\t\r"


@pytest.mark.parametrize(("name", "reason"), [("Query", "field_is_role"), ("Nope", "no_such_field")])
def test_tsv_set_field_refuses_roles_and_unknown_columns(name: str, reason: str) -> None:
    """Roles are set as attributes of the event; the output keeps the input's columns."""
    codec = _tsv()
    (ev,) = codec.decode_many(["7\tweather\t\t\t\ts1"], "\n", [])
    with pytest.raises(FieldError) as err:
        codec.set_field(ev, name, "x")
    assert err.value.reason == reason


def test_mark_changed_makes_the_encoder_write_the_record_afresh() -> None:
    """A filter that edits the record itself calls mark_changed; without it the edit would be lost."""
    codec = _tsv()
    (ev,) = codec.decode_many(["7\tweather\t\t\t\ts1"], "\n", [])
    ev.record = [*ev.record[:5], "edited"]
    assert codec.encode(ev) == "7\tweather\t\t\t\ts1"  # identity: the edit is invisible
    ev.mark_changed()
    assert codec.encode(ev) == "7\tweather\t\t\t\tedited"


def test_jsonl_field_access_keeps_the_line_style() -> None:
    """JSON: set adds or replaces a key in the style of the input line; remove drops it; roles are refused."""
    codec = JsonlCodec(SchemaConfig())
    line = '{"AnonID": 7, "Query": "weather", "src": "web"}'
    (ev,) = codec.decode_many([line], "\n", [])
    assert codec.encode(ev) is ev.raw
    codec.set_field(ev, "src", "app")
    assert codec.encode(ev) == '{"AnonID": 7, "Query": "weather", "src": "app"}'
    codec.remove_field(ev, "src")
    assert json.loads(codec.encode(ev)) == {"AnonID": 7, "Query": "weather"}
    with pytest.raises(FieldError) as err:
        codec.set_field(ev, "Query", "x")
    assert err.value.reason == "field_is_role"


def test_proto_fields_are_the_message_attributes() -> None:
    """gRPC: non-role fields are attributes of the event's own message, so the encoded message carries them."""
    codec = ProtoCodec()
    (ev,) = codec.decode_batch([QueryEvent(user="7", query="weather", seq=3, attributes={"ip": "10.0.0.1"})])
    assert codec.get_field(ev, "ip") == "10.0.0.1"
    codec.set_field(ev, "ip", "10.0.0.2")
    codec.set_field(ev, "session", 5)
    assert dict(codec.encode(ev).attributes) == {"ip": "10.0.0.2", "session": "5"}
    codec.remove_field(ev, "ip")
    assert dict(codec.encode(ev).attributes) == {"session": "5"}
    with pytest.raises(FieldError):
        codec.get_field(ev, "ip")


def test_events_share_one_read_only_empty_meta_until_annotated() -> None:
    """meta is never None; the first annotate gives the event its own dict and the shared one stays empty."""
    a, b = Event("1", "q"), Event("2", "q")
    assert a.meta is NO_META and b.meta is NO_META
    a.annotate("category", "Arts")
    a.annotate("main_unit", "art")
    assert a.meta == {"category": "Arts", "main_unit": "art"}
    assert b.meta == {} and NO_META == {}
    with pytest.raises(TypeError):
        b.meta["x"] = 1  # the shared mapping is read-only on purpose
