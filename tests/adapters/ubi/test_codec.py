"""``format: ubi``: UBI query and event records (fixtures written from the o19s/ubi schema) decode to events, come
back byte for byte, and expose their nested fields by dotted path for the field policies."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from adapters.ubi.codec import UbiCodec
from sidecar.api import SchemaConfig

FIXTURES = Path(__file__).parent / "fixtures"
QUERIES = (FIXTURES / "queries.jsonl").read_text(encoding="utf-8").splitlines()
EVENTS = (FIXTURES / "events.jsonl").read_text(encoding="utf-8").splitlines()


def decode(lines: list[str], codec: UbiCodec | None = None) -> tuple[list, list[tuple[int, str]]]:
    bad: list[tuple[int, str]] = []
    return (codec or UbiCodec(SchemaConfig(format="ubi"))).decode_many(lines, "\n", bad), bad


def test_spec_records_decode_with_their_roles_and_join_key() -> None:
    events, bad = decode(QUERIES + EVENTS)
    assert bad == [(len(QUERIES) + len(EVENTS) - 1, "missing_query_id")]  # the page_view with no query_id
    q = events[0]
    assert (q.user, q.query, q.time) == ("5e3b7c10-a1b2-4c3d-9e8f-000000000001", "notebook", "2024-05-01T10:00:00.000Z")
    codec = q.codec
    assert isinstance(codec, UbiCodec)
    assert codec.join_of(q) == ("00112233-4455-6677-8899-aabbccddeeff", True)
    click = events[len(QUERIES)]
    assert codec.join_of(click) == ("00112233-4455-6677-8899-aabbccddeeff", False)
    assert click.query == ""  # an attached event has no query of its own
    assert [codec.encode(e) for e in events] == (QUERIES + EVENTS)[:-1]  # byte for byte


def test_nested_fields_by_dotted_path_and_rewritten_in_place() -> None:
    (click,), _ = decode([EVENTS[0]])
    codec = click.codec
    fields = codec.fields(click)
    assert fields["event_attributes.object.object_id"] == "B0002"
    assert fields["event_attributes.position.ordinal"] == 2
    assert "client_id" not in fields and "timestamp" not in fields  # roles are not fields
    codec.set_field(click, "event_attributes.object.object_id", "h:1")
    codec.remove_field(click, "event_attributes.object.description")
    record = json.loads(codec.encode(click))
    assert record["event_attributes"]["object"] == {"object_id": "h:1", "object_id_field": "primary_ean"}
    assert list(record) == list(json.loads(EVENTS[0]))  # key order kept
    assert json.loads(EVENTS[0])["event_attributes"]["object"]["object_id"] == "B0002"


def test_a_changed_user_is_written_and_no_query_key_added_to_an_event() -> None:
    (q, click), _ = decode([QUERIES[0], EVENTS[0]])
    q.user = click.user = "pseudo-1"
    assert json.loads(q.codec.encode(q))["client_id"] == "pseudo-1"
    out = json.loads(click.codec.encode(click))
    assert out["client_id"] == "pseudo-1" and "user_query" not in out


def test_bad_records_are_dead_letters_with_reasons() -> None:
    lines = [
        "{",
        "[1]",
        '{"client_id":"a","user_query":"x"}',
        '{"query_id":"q","client_id":"a"}',
        '{"query_id":"q","client_id":"a","user_query":3}',
        '{"query_id":"q","user_query":"x"}',
    ]
    events, bad = decode(lines)
    assert events == []
    assert [r for _, r in bad] == [
        "invalid_json",
        "json_not_object",
        "missing_query_id",
        "not_ubi_record",
        "query_not_string",
        "missing_user",
    ]


def test_configured_roles_replace_the_ubi_defaults() -> None:
    schema = SchemaConfig(format="ubi", roles=SchemaConfig().roles.__class__(user="user_id", query="q", time=None))
    (ev,), bad = decode(['{"query_id":"1","user_id":"u","q":"maps","client_id":"c"}'], UbiCodec(schema))
    assert bad == [] and (ev.user, ev.query) == ("u", "maps")
    assert ev.codec.fields(ev) == {"query_id": "1", "client_id": "c"}


KEYS = st.text(st.characters(blacklist_characters="."), min_size=1, max_size=6)  # a dotted key: see paths.py
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(KEYS, inner, max_size=3),
    max_leaves=8,
)


@given(extra=st.dictionaries(KEYS, JSON, max_size=4), is_query=st.booleans())
def test_any_ubi_record_comes_back_byte_for_byte_and_its_leaves_are_its_fields(
    extra: dict[str, object], is_query: bool
) -> None:
    record: dict[str, object] = {**extra, "query_id": "q1", "client_id": "c1"}
    record["user_query" if is_query else "action_name"] = "x"
    line = json.dumps(record, ensure_ascii=False)
    (ev,), bad = decode([line])
    assert bad == []
    codec = ev.codec
    written = codec.encode(ev)
    if any(ch in line for ch in "\u2028\u2029\x85"):  # a line reader would split it: written escaped
        assert json.loads(written) == record and not any(ch in written for ch in "\u2028\u2029\x85")
    else:
        assert written == line
    for name, value in codec.fields(ev).items():
        assert codec.get_field(ev, name) == value
