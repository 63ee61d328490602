"""UBI records over the network join as they do from a file: the ``http`` source's NDJSON, JSON-array and msgpack
bodies and the ``forward`` source's maps (sent by PyPI ``fluent-logger``'s FluentSender) are read by the UBI codec
when the schema's format is ``ubi`` (its ``json_records``), so clicks leave after their query, under its released
user, or are dropped with it; the ``http`` sink sends UBI records with their own keys."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest
from fluent import sender
from helpers.httptest import Peer, post
from helpers.ubipipe import EVENTS, QUERIES, dead, feed, query_id, write_config
from helpers.waiting import wait_until

from adapters.forward.config import ForwardSourceConfig
from adapters.forward.source import ForwardSource
from adapters.http.config import HttpSourceConfig
from adapters.http.source import HttpSource
from adapters.ubi.codec import UbiCodec
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

CHARGER = query_id(QUERIES[1])
#: what a passthrough releases: every query, then the clicks of known queries (EVENTS[4]'s query never comes: held;
#: EVENTS[5] has no query_id: dead-lettered)
RELEASED = sorted([*QUERIES, *EVENTS[:4]])


@pytest.fixture
def peer() -> Iterator[Peer]:
    """An HTTP peer taking the http sink's batches (helpers.httptest.Peer)."""
    state = Peer()
    state.start()
    yield state
    state.stop()


@pytest.fixture
def http(tmp_path: Path) -> Iterator[tuple[Pipeline, HttpSource]]:
    pipeline = Pipeline(load_config(write_config(tmp_path, "")))
    source = HttpSource(HttpSourceConfig(listen="127.0.0.1:0"), pipeline.ctx)
    source.start(pipeline)
    yield pipeline, source
    source.stop(grace=2)
    pipeline.close()


def written(folder: Path) -> list[str]:
    path = folder / "out.ubi"
    return path.read_text(encoding="utf-8").splitlines() if path.exists() else []


@pytest.mark.parametrize("kind", ["application/x-ndjson", "application/json", "application/msgpack"])
def test_http_bodies_of_ubi_records_join(tmp_path: Path, http: tuple[Pipeline, HttpSource], kind: str) -> None:
    pipeline, source = http
    assert isinstance(source.codec, UbiCodec)
    records = [json.loads(x) for x in [*EVENTS, *QUERIES]]  # every click before its query
    if kind == "application/x-ndjson":
        body = "\n".join([*EVENTS, *QUERIES]).encode()
    elif kind == "application/json":
        body = json.dumps(records).encode()
    else:
        body = b"".join(msgpack.packb(r) for r in records)
    answer = post(source.port, body, headers={"Content-Type": kind})
    assert answer.status == 200, answer.body
    assert (answer.body["accepted"], answer.body["dead_lettered"], answer.body["held"]) == (9, 1, 1)
    out = written(tmp_path)
    assert sorted(out) == RELEASED  # the spec's records as they came, byte for byte
    for line in EVENTS[:4]:  # each click after its query
        assert out.index(line) > out.index(next(q for q in QUERIES if query_id(q) == query_id(line)))
    assert dead(tmp_path) == ["missing_query_id"]
    assert pipeline.joins.held() == 1


def test_http_body_with_a_map_json_cannot_carry_is_a_dead_letter(
    tmp_path: Path, http: tuple[Pipeline, HttpSource]
) -> None:
    _, source = http
    bad = {"query_id": "q", "client_id": "c", "user_query": "x", "blob": b"\x00\x01"}
    body = msgpack.packb(bad) + msgpack.packb(json.loads(QUERIES[0]))
    answer = post(source.port, body, headers={"Content-Type": "application/msgpack"})
    assert answer.status == 200 and answer.body["reasons"] == {"msgpack_not_json": 1}
    assert written(tmp_path) == [QUERIES[0]]


def test_forward_maps_from_fluent_logger_join_and_follow_a_drop(tmp_path: Path) -> None:
    config = write_config(tmp_path, "  - drop: {rules: [{role: query, matches: charger}]}\n")
    pipeline = Pipeline(load_config(config))
    source = ForwardSource(ForwardSourceConfig(listen="127.0.0.1:0"), pipeline.ctx)
    source.start(pipeline)
    try:
        assert isinstance(source.codec, UbiCodec)
        client = sender.FluentSender("ubi", host="127.0.0.1", port=source.port)
        for line in [EVENTS[2], *QUERIES, *EVENTS]:  # the charger's click first, then again later
            assert client.emit("events", json.loads(line)), client.last_error
        client.close()
        want = sorted(line for line in RELEASED if query_id(line) != CHARGER)
        wait_until(lambda: sorted(written(tmp_path)) == want, what="the other queries and their clicks released")
        stats = pipeline.joins.stats()
        assert stats["queries_dropped"] == {"drop": 1} and stats["counts"]["dropped_with_query"] == 2
        wait_until(lambda: dead(tmp_path) == ["missing_query_id"], what="the record without a query_id")
    finally:
        source.stop(grace=2)
        pipeline.close()


def test_the_http_sink_sends_ubi_records_with_their_own_keys(tmp_path: Path, peer: Peer) -> None:
    config = tmp_path / "q.yaml"
    config.write_text(
        f"state_dir: state\nschema: {{format: ubi}}\nfilters: []\nsinks:\n  - http: {{url: '{peer.url}'}}\n",
        encoding="utf-8",
    )
    pipeline = Pipeline(load_config(config))
    try:
        feed(pipeline, [*QUERIES, *EVENTS])
        pipeline.release(False)
        wait_until(lambda: sorted(peer.delivered()) == RELEASED, what="the records delivered as they came")
    finally:
        pipeline.close()


def test_forward_sink_to_forward_source_keeps_the_ubi_records(tmp_path: Path) -> None:
    """UBI records out of one runtime's forward sink into another's forward source: the maps are the records as they
    came (keys, order, nesting), so the second runtime joins them again and writes them byte for byte."""
    receiver_dir, sender_dir = tmp_path / "receiver", tmp_path / "sender"
    receiver_dir.mkdir()
    sender_dir.mkdir()
    receiver = Pipeline(load_config(write_config(receiver_dir, "")))
    source = ForwardSource(ForwardSourceConfig(listen="127.0.0.1:0"), receiver.ctx)
    source.start(receiver)
    try:
        config = sender_dir / "q.yaml"
        config.write_text(
            "state_dir: state\nschema: {format: ubi}\nfilters: []\n"
            f"sinks:\n  - forward: {{address: '127.0.0.1:{source.port}', require_ack: true}}\n",
            encoding="utf-8",
        )
        sender_runtime = Pipeline(load_config(config))
        try:
            feed(sender_runtime, [*QUERIES, *EVENTS])
            wait_until(lambda: sorted(written(receiver_dir)) == RELEASED, what="the records through forward")
        finally:
            sender_runtime.close()
    finally:
        source.stop(grace=2)
        receiver.close()
