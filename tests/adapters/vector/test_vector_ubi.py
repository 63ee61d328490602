"""UBI records (``format: ubi``) through Vector's native protocol: the vector sink sends a UBI record as a log whose
map is the record (its own keys, nested objects as maps; not its roles under ``schema.roles``' keys), and a vector
source of ``format: ubi`` reads each log's map as a UBI record and joins the clicks to their queries. A protobuf map
keeps no key order (Vector orders every log's keys), so what comes back is each record with its keys sorted: the same
keys, values and nesting as the golden outputs of the spec fixtures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from helpers.ubicodec import KEY, KEYED_CHAIN, KEYED_SCHEMA, golden_ubi
from helpers.ubipipe import EVENTS, QUERIES, dead, feed, query_id
from helpers.vector import Running, log_event, request, vector_sidecar

from adapters.vector.stubs.event_pb2 import EventWrapper, Metric
from adapters.vector.values import VectorTimestamp
from sidecar.config import load_config
from sidecar.pipeline import Pipeline


def receiver_config(folder: Path, filters: str = "") -> Path:
    """B: a vector source of ``format: ubi`` into a file (B/out.jsonl)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "b.yaml"
    chain = "\n" + filters if filters else " []\n"
    path.write_text(
        "state_dir: state\ndead_letter_file: dead.jsonl\nschema: {format: ubi}\n"
        f"sources:\n  - vector: {{}}\nfilters:{chain}sinks:\n  - file: {{path: out.jsonl}}\n",
        encoding="utf-8",
    )
    return path


def sender(folder: Path, address: str, filters: str, schema: str) -> Pipeline:
    """A: ``format: ubi`` with the chain ``filters``, sending to a vector source at ``address``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "a.yaml"
    chain = "\n" + filters if filters else " []\n"
    path.write_text(
        f"state_dir: state\nschema:\n  format: ubi\n{schema}filters:{chain}"
        f"sinks:\n  - vector: {{address: '{address}'}}\n",
        encoding="utf-8",
    )
    return Pipeline(load_config(path), seed=1)


def lines(folder: Path) -> list[str]:
    out = folder / "out.jsonl"
    return out.read_text(encoding="utf-8").splitlines() if out.exists() else []


def through_vector(tmp_path: Path, filters: str, schema: str) -> list[str]:
    with vector_sidecar(receiver_config(tmp_path / "b")) as b:
        a = sender(tmp_path / "a", b.address, filters, schema)
        try:
            feed(a, [*QUERIES, *EVENTS])
            assert a.sinks[0].outbox.drain(15)  # type: ignore[attr-defined]
        finally:
            a.close()
    return lines(tmp_path / "b")


@pytest.mark.parametrize("chain", ["passthrough", "keyed"])
def test_ubi_records_cross_vector_with_their_own_keys_and_nesting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chain: str
) -> None:
    monkeypatch.setenv("UBI_KEY", KEY)
    keyed = chain == "keyed"
    got = through_vector(tmp_path, KEYED_CHAIN if keyed else "", KEYED_SCHEMA if keyed else "")
    expected = golden_ubi("pseudonymized.jsonl" if keyed else "passthrough.jsonl").splitlines()
    assert [json.loads(x) for x in got] == [json.loads(x) for x in expected]  # keys, values, nesting; in order
    for line in got:
        record = json.loads(line)
        assert list(record) == sorted(record)  # the map's order: Vector's
        assert not {"AnonID", "Query", "QueryTime"} & set(record)


def push_maps(b: Running, maps: list[dict[str, Any]], extra: list[EventWrapper] = ()) -> None:  # type: ignore[assignment]
    assert b.push(request([*(log_event(m) for m in maps), *extra])) == b""


def test_logs_of_ubi_maps_join_and_bad_events_are_dead_lettered(tmp_path: Path) -> None:
    """Logs pushed as Vector sends them (a timestamp value, the deprecated ``Log.fields`` map): a click before its
    query waits for it and leaves after it; an event that is no log map, or holds bytes that are no UTF-8, is
    dead-lettered by reason and the others go on."""
    query, click = json.loads(QUERIES[0]), json.loads(EVENTS[0])
    stamped = {**json.loads(QUERIES[3]), "timestamp": VectorTimestamp(1714557720, 5)}
    legacy = log_event(json.loads(QUERIES[1]), legacy=True)
    bare = EventWrapper()
    bare.log.value.raw_bytes = b"a bare message"
    metric = EventWrapper(metric=Metric())
    binary = {**json.loads(QUERIES[2]), "blob": b"\xff\xfe"}
    with vector_sidecar(receiver_config(tmp_path / "b")) as b:
        push_maps(b, [click])
        assert b.pipeline.joins.held() == 1
        push_maps(b, [query, stamped, binary], [legacy, bare, metric, EventWrapper()])
        assert b.pipeline.joins.held() == 0
    out = [json.loads(x) for x in lines(tmp_path / "b")]
    assert [(r["query_id"], "action_name" in r) for r in out] == [
        (query_id(QUERIES[0]), False),
        (query_id(QUERIES[0]), True),
        (query_id(QUERIES[3]), False),
        (query_id(QUERIES[1]), False),
    ]
    assert out[0] == query and out[1] == click and out[3] == json.loads(QUERIES[1])
    assert out[2]["timestamp"] == "2024-05-01T10:02:00.000000005Z"  # a Vector timestamp as its RFC 3339 text
    assert sorted(dead(tmp_path / "b")) == ["empty_event", "log_value_not_map", "not_json", "unsupported_event"]
