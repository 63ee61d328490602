"""QueryEvent <-> Event: unchanged events reuse their message, changes are written back, clients round-trip."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from adapters.grpc.client import Reassembler, to_batch
from adapters.grpc.codec import EventBatch, ProtoCodec, QueryEvent
from sidecar.codecs import JsonlCodec, SchemaConfig, TsvCodec
from sidecar.records import LINE_BREAKS, escape_breaks

text = st.text(max_size=30)
#: queries, empty and blank ones drawn often: a valid event (issue 11, defect 13)
query = st.one_of(st.just(""), st.text(" ", min_size=1, max_size=3), text)
# a TSV field never holds a tab or a line break (such a record is dead-lettered: sidecar.records.LINE_BREAKS)
tsv_field = st.text(
    alphabet=st.characters(blacklist_characters="\t" + LINE_BREAKS, blacklist_categories=("Cs",)), max_size=20
)
ROLES = ("user", "query", "time", "rank", "url")


def _message(draw_roles: tuple[str, str, str, str, str], attrs: dict[str, str], seq: int) -> QueryEvent:
    u, q, t, r, lk = draw_roles
    return QueryEvent(user=u, query=q, time=t, rank=r, url=lk, attributes=attrs, seq=seq)


@given(st.tuples(text, query, text, text, text), st.dictionaries(text, text, max_size=3), st.integers(0, 2**64 - 1))
def test_unchanged_event_reuses_its_message(roles, attrs, seq) -> None:  # hypothesis supplies the arguments
    """Encoding an untouched decoded QueryEvent returns the very message it came from, and the batch serializes to
    the same bytes; empty optional roles decode as None; an empty or blank query is an event like any other."""
    batch = EventBatch(events=[_message(roles, attrs, seq)])
    before = batch.SerializeToString()
    codec = ProtoCodec()
    bad: list[tuple[int, str]] = []
    (ev,) = codec.decode_many(batch.events, "\n", bad)
    assert bad == []
    assert ev.query == roles[1] and ev.user == roles[0]
    assert ev.time == (roles[2] or None)  # empty optional roles are absent
    out = codec.encode(ev)
    assert out is ev.record
    assert batch.SerializeToString() == before


@given(
    st.tuples(text, query, text, text, text),
    st.dictionaries(text, text, max_size=3),
    st.dictionaries(st.sampled_from(ROLES), st.one_of(st.none(), text, st.integers())),
)
def test_changed_roles_are_written_back(roles, attrs, changes) -> None:  # hypothesis supplies the arguments
    """Role values set on a decoded event (strings, integers or None) are written into the message as strings, None
    as empty; seq and attributes are kept."""
    codec = ProtoCodec()
    batch = EventBatch(events=[_message(roles, attrs, 7)])
    (ev,) = codec.decode_batch(batch.events)
    for role, value in changes.items():
        setattr(ev, role, value)
    m = codec.encode(ev)
    for role, original in zip(ROLES, roles):
        expected = changes.get(role, original)
        assert getattr(m, role) == ("" if expected is None else str(expected))
    assert m.seq == 7 and dict(m.attributes) == attrs


@given(
    st.lists(
        st.tuples(tsv_field, tsv_field, tsv_field, tsv_field, tsv_field),
        min_size=1,
        max_size=20,
    )
)
def test_tsv_records_round_trip_through_messages(rows) -> None:  # hypothesis supplies the arguments
    """Client -> QueryEvents -> server decode/encode (unchanged) -> client writes the same lines, empty queries
    included."""
    tsv = TsvCodec(SchemaConfig())
    lines = ["\t".join(r) for r in rows]
    events = tsv.decode_many(lines, "\n", [])
    assert len(events) == len(lines)
    wire = to_batch(events, 1).SerializeToString()
    server = ProtoCodec()
    request = EventBatch.FromString(wire)
    response = EventBatch(events=[server.encode(e) for e in server.decode_batch(request.events)])
    back = Reassembler()
    back.add(events, 1)
    returned = back.take(EventBatch.FromString(response.SerializeToString()))
    assert [tsv.encode(e) for e in returned] == lines
    assert not back.pending


json_value = st.one_of(st.none(), st.integers(-(10**6), 10**6), st.text(max_size=10), st.booleans())


@given(
    st.lists(
        st.fixed_dictionaries(
            {"AnonID": st.one_of(st.integers(0, 10**9), st.text(min_size=1, max_size=8)), "Query": query},
            optional={"QueryTime": json_value, "ItemRank": json_value, "ClickURL": json_value, "other": json_value},
        ),
        min_size=1,
        max_size=10,
    )
)
def test_jsonl_records_keep_types_through_messages(records) -> None:  # hypothesis supplies the arguments
    """Non-string role values (integer ranks, nulls) come back as they were."""
    codec = JsonlCodec(SchemaConfig(format="jsonl"))
    # the lines as the sidecar writes them: NEL, LS and PS escaped (sidecar.records.escape_breaks)
    lines = [escape_breaks(json.dumps(r, ensure_ascii=False)) for r in records]
    events = codec.decode_many(lines, "\n", [])
    server = ProtoCodec()
    request = EventBatch.FromString(to_batch(events, 1).SerializeToString())
    response = EventBatch(events=[server.encode(e) for e in server.decode_batch(request.events)])
    back = Reassembler()
    back.add(events, 1)
    assert [codec.encode(e) for e in back.take(response)] == lines


def test_unknown_seq_becomes_a_fresh_record_with_attributes() -> None:
    """A returned message whose seq the Reassembler never sent becomes a new event; a TSV codec with an Ip column
    writes its attributes into that column."""
    tsv = TsvCodec(SchemaConfig(header=False, columns=("AnonID", "Query", "QueryTime", "ItemRank", "ClickURL", "Ip")))
    m = QueryEvent(user="u", query="q", attributes={"Ip": "1.2.3.4"}, seq=999)
    (ev,) = Reassembler().take(EventBatch(events=[m]))
    assert tsv.encode(ev) == "u\tq\t\t\t\t1.2.3.4"
