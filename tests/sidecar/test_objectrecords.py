"""ObjectRecords: a protocol's records as JSON objects for the schema's codec. Whatever mix of records the source
gives (objects, records that are none, objects the codec refuses), every record is an event or a dead letter at its
own index with its reason, and the events keep the records' order and belong to the schema's codec."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from adapters.ubi.codec import UbiCodec
from sidecar.api import BadRecord, SchemaConfig
from sidecar.codecs import JsonlCodec
from sidecar.objectrecords import ObjectRecords, reads_objects

KINDS = st.lists(st.sampled_from(["query", "click", "not_an_object", "no_query_id"]), max_size=30)


def to_object(record: tuple[str, int]) -> dict[str, Any]:
    kind, n = record
    if kind == "not_an_object":
        raise BadRecord("body_not_object")
    if kind == "no_query_id":
        return {"client_id": f"c{n}", "user_query": f"q {n}"}
    if kind == "click":
        return {"action_name": "click", "query_id": f"id{n}", "client_id": f"c{n}"}
    return {"query_id": f"id{n}", "client_id": f"c{n}", "user_query": f"q {n}"}


@given(KINDS)
def test_every_record_is_an_event_or_a_dead_letter_at_its_index(kinds: list[str]) -> None:
    target = UbiCodec()
    codec = ObjectRecords(target, to_object)
    bad: list[tuple[int, str]] = []
    events = codec.decode_many([(k, i) for i, k in enumerate(kinds)], "\n", bad)
    reasons = {"not_an_object": "body_not_object", "no_query_id": "missing_query_id"}
    assert bad == [(i, reasons[k]) for i, k in enumerate(kinds) if k in reasons]
    good = [i for i, k in enumerate(kinds) if k not in reasons]
    assert [json.loads(codec.encode(e))["query_id"] for e in events] == [f"id{i}" for i in good]
    assert all(e.codec is target for e in events)
    assert [target.join_of(e) for e in events] == [(f"id{i}", kinds[i] == "query") for i in good]


def test_only_a_codec_of_json_objects_reads_objects() -> None:
    assert reads_objects(UbiCodec()) and not reads_objects(JsonlCodec(SchemaConfig())) and not reads_objects(None)
