"""Key set and key order survive every source -> sink pair that can carry them (issue 24, item 14).

A record is generated with role keys (some null, some absent) and extra keys in a random order, decoded by a
source's codec, perhaps changed by a chain (the query rewritten), and encoded on the sink's path. The output has
the input's keys, null role keys included, in the input's order.

What a pair cannot carry, and so is not asserted:

* **vector**: a Vector log is a map with no order of its own (a ``BTreeMap``; the protobuf map is serialized in
  key order). As a sink it keeps the key set; as a source it hands its other keys over in key order, then its
  role keys (null ones too) in role order, as other formats have always received them.
* **tsv**: a TSV record has the header's columns and text values: as a source it has no null (an empty field is
  ``""``); as a sink it writes its header's columns only (a key outside them has no column), so it is left out.
* **proto** (gRPC ``QueryEvent``): a fixed schema (five roles, ``attributes`` a string map): no key order, no
  null, no typed value; excluded.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.file.sink import FileSink, FileSinkConfig
from adapters.forward.codec import ForwardCodec
from adapters.forward.protocol import Entry, EventTime, packb, unpackb
from adapters.http.body import split_records
from adapters.vector.codec import VectorCodec
from adapters.vector.stubs.event_pb2 import EventWrapper
from adapters.vector.values import set_value, to_python
from sidecar.api import BuildContext, Codec, Event
from sidecar.codecs import AOL_COLUMNS, JsonlCodec, SchemaConfig

SCHEMA = SchemaConfig()
USER, QUERY, TIME, RANK, URL = AOL_COLUMNS
SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])

Record = dict[str, Any]

# ---- records --------------------------------------------------------------------------------------
_values = st.one_of(st.none(), st.booleans(), st.integers(-(2**31), 2**31), st.text(max_size=8))
_extra_keys = st.text("abcdefgh_", min_size=1, max_size=6).filter(lambda k: k not in AOL_COLUMNS)


@st.composite
def records(draw: st.DrawFn) -> Record:
    """Both required roles; each optional role absent, null or a text; extra keys; all in a random order."""
    items: list[tuple[str, Any]] = [(USER, draw(st.text(min_size=1, max_size=6))), (QUERY, draw(st.text(max_size=8)))]
    for key in (TIME, RANK, URL):
        choice = draw(st.sampled_from(("absent", "null", "text")))
        if choice != "absent":
            items.append((key, None if choice == "null" else draw(st.text("0123456789", min_size=1, max_size=4))))
    extras = draw(st.dictionaries(_extra_keys, _values, max_size=5))
    items.extend(extras.items())
    return dict(draw(st.permutations(items)))


# ---- sources: a record's bytes as that source reads them, decoded by its codec ----------------------------
def _one(codec: Codec, records: list[Any]) -> Event:
    bad: list[tuple[int, str]] = []
    events = codec.decode_many(records, "\n", bad)
    assert not bad and len(events) == 1, bad
    return events[0]


def from_jsonl(record: Record) -> tuple[Event, list[str]]:
    return _one(JsonlCodec(SCHEMA), [json.dumps(record, ensure_ascii=False)]), list(record)


def from_http(record: Record) -> tuple[Event, list[str]]:
    """An HTTP body (a JSON array), split as the HTTP source does, decoded by a JSON-lines codec."""
    lines, _, bad = split_records(json.dumps([record]).encode(), True, 65536)
    assert not bad
    return _one(JsonlCodec(SCHEMA), lines), list(record)


def from_forward(record: Record) -> tuple[Event, list[str]]:
    """A forward entry through msgpack (a map keeps its order on the wire)."""
    tag, t, m = unpackb(packb(["app", EventTime(1, 2), record]))
    return _one(ForwardCodec(SCHEMA), [Entry(tag, t, m)]), list(record)


def from_vector(record: Record) -> tuple[Event, list[str]]:
    """A Vector log (its map goes on the wire in key order, as Vector writes it)."""
    wrapper = EventWrapper()
    wrapper.log.value.map.SetInParent()
    for key, value in record.items():
        set_value(wrapper.log.value.map.fields[key], value)
    roles = [k for k in AOL_COLUMNS if k in record]
    keys = [*sorted(k for k in record if k not in AOL_COLUMNS), *roles]
    return _one(VectorCodec(SCHEMA), [wrapper.SerializeToString(deterministic=True)]), keys


SOURCES: dict[str, Callable[[Record], tuple[Event, list[str]]]] = {
    "jsonl": from_jsonl,
    "http": from_http,
    "forward": from_forward,
    "vector": from_vector,
}


# ---- sinks: the event encoded on the sink's path, read back as (key, value) pairs ------------------------
def to_file_jsonl(event: Event) -> list[tuple[str, Any]]:
    """The file sink (format jsonl), written to a file and read back."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "out.jsonl"
        sink = FileSink(FileSinkConfig(path=str(path)), BuildContext(config_dir=Path(tmp), schema=SCHEMA))
        sink.start(None, event.codec)
        sink.write([event])
        sink.close()
        text = path.read_text(encoding="utf-8")
    pairs: list[tuple[str, Any]] = json.loads(text, object_pairs_hook=list)
    return pairs


def to_http(event: Event) -> list[tuple[str, Any]]:
    """The HTTP sink's encoding (adapters/http/sink.py ``start``): a JSON-lines event by its own codec, any other
    by the runtime's JSON-lines codec."""
    codec = event.codec if event.codec is not None and event.codec.format == "jsonl" else JsonlCodec(SCHEMA)
    pairs: list[tuple[str, Any]] = json.loads(codec.encode(event), object_pairs_hook=list)
    return pairs


def to_forward(event: Event) -> list[tuple[str, Any]]:
    entry = ForwardCodec(SCHEMA).encode(event)
    _, _, m = unpackb(packb([entry.tag, entry.time, entry.record]))
    return list(m.items())


def to_vector(event: Event) -> list[tuple[str, Any]]:
    fields = EventWrapper.FromString(VectorCodec(SCHEMA).encode(event)).log.value.map.fields
    return [(k, to_python(fields[k])) for k in fields]


#: sink -> whether it carries key order (else: the key set only)
SINKS: dict[str, tuple[Callable[[Event], list[tuple[str, Any]]], bool]] = {
    "file_jsonl": (to_file_jsonl, True),
    "http": (to_http, True),
    "forward": (to_forward, True),
    "vector": (to_vector, False),
}
PAIRS = [(s, k) for s in SOURCES for k in SINKS]


@SETTINGS
@given(record=records(), pair=st.sampled_from(PAIRS), rewrite=st.booleans())
def test_key_set_and_order_survive_every_pair(record: Record, pair: tuple[str, str], rewrite: bool) -> None:
    """Every key of the input (null role keys too) is in the output, in the input's order where the sink
    carries one, whether or not the chain changed a role."""
    source, sink = pair
    event, keys = SOURCES[source](record)
    if rewrite:
        event.query = event.query + "!"
    encode, ordered = SINKS[sink]
    out = encode(event)
    got = [k for k, _ in out]
    if ordered:
        assert got == keys, f"{source} -> {sink}"
    else:
        assert sorted(got) == sorted(keys), f"{source} -> {sink}"
    values = dict(out)
    for key in (TIME, RANK, URL):
        if key in record and record[key] is None:
            assert values[key] is None, f"{source} -> {sink}: null {key}"
    assert values[QUERY] == record[QUERY] + ("!" if rewrite else "")


def test_null_role_keys_from_forward_reach_a_vector_sink() -> None:
    """The reported case: ``rank: null`` and ``url: null`` were left out of a fresh Vector log."""
    event, _ = from_forward({USER: "u", QUERY: "q", RANK: None, URL: None, "id": 7})
    assert dict(to_vector(event)) == {USER: "u", QUERY: "q", RANK: None, URL: None, "id": 7}


def test_forward_into_a_jsonl_file_keeps_role_keys_first() -> None:
    """The reported case: a file sink fed by forward wrote the non-role keys first."""
    event, _ = from_forward({USER: "u", QUERY: "q", TIME: "t", "id": 7, "request_id": "r"})
    assert [k for k, _ in to_file_jsonl(event)] == [USER, QUERY, TIME, "id", "request_id"]
