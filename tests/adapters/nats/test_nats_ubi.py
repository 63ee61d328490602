"""UBI records (``format: ubi``) through NATS JetStream, against a real nats-server: the nats sink publishes each
record as its own JSON line (its UBI keys, their order and nesting, not its roles under ``schema.roles``' keys), and
a nats source of ``format: ubi`` reads those lines back and joins them: the golden outputs of the UBI spec fixtures
(a passthrough byte for byte; a keyed chain, the changed values re-encoded in place) arrive as a file sink writes
them."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from helpers import wait_until
from helpers.natskit import PREFIX, STREAM, publish, source
from helpers.ubicodec import KEY, KEYED_CHAIN, KEYED_SCHEMA, golden_ubi
from helpers.ubipipe import EVENTS, QUERIES, dead, feed, write_config

from sidecar.config import load_config
from sidecar.pipeline import Pipeline
from sidecar.tools.bench.natsserver import NatsServer


def publishing_config(folder: Path, url: str, filters: str, schema: str) -> Path:
    """``format: ubi`` with the chain ``filters``, publishing to ``<PREFIX>.0`` of the stream (one partition)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "a.yaml"
    chain = "\n" + filters if filters else " []\n"
    path.write_text(
        f"state_dir: state\ndead_letter_file: dead.jsonl\nschema:\n  format: ubi\n{schema}filters:{chain}sinks:\n"
        f"  - nats: {{servers: ['{url}'], subject: {PREFIX}, partition_count: 1, stream: {STREAM}, "
        "create_stream: true}\n",
        encoding="utf-8",
    )
    return path


def stream_lines(url: str) -> list[bytes]:
    """Every message of the stream's partition 0, in order (the lines the sink published)."""
    import nats

    async def run() -> list[bytes]:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            sub = await js.pull_subscribe(f"{PREFIX}.0", durable="ubi_check", stream=STREAM)
            got: list[bytes] = []
            while True:
                try:
                    msgs = await sub.fetch(100, timeout=0.5)
                except TimeoutError:
                    return got
                got += [m.data for m in msgs]
        finally:
            await nc.close()

    return asyncio.run(run())


def through_nats(server: NatsServer, tmp_path: Path, filters: str, schema: str) -> str:
    """The spec fixtures into a runtime publishing to NATS; what a second runtime's nats source wrote."""
    sender = Pipeline(load_config(publishing_config(tmp_path / "a", server.url, filters, schema)), seed=1)
    try:
        feed(sender, [*QUERIES, *EVENTS])
        (out,) = sender.sinks
        wait_until(lambda: out.stats().get("pending_events", 1) == 0, what="the outbox sent")
    finally:
        sender.close()
    assert dead(tmp_path / "a") == ["missing_query_id"]
    (tmp_path / "b").mkdir()
    receiver = Pipeline(load_config(write_config(tmp_path / "b", "", out="out.jsonl")), seed=1)
    src = source(receiver, server.url, partition_count=1)
    expected = golden_ubi("pseudonymized.jsonl" if filters else "passthrough.jsonl")
    try:
        src.start(receiver)
        path = tmp_path / "b" / "out.jsonl"
        wait_until(lambda: path.exists() and len(path.read_text("utf-8")) >= len(expected), what="records read")
    finally:
        src.stop(grace=5)
        receiver.close()
    return path.read_text(encoding="utf-8")


def test_a_passthrough_publishes_the_ubi_records_as_they_came(nats_server: NatsServer, tmp_path: Path) -> None:
    text = through_nats(nats_server, tmp_path, "", "")
    expected = golden_ubi("passthrough.jsonl")
    assert text == expected  # through the sink, the stream and the source: byte for byte, in release order
    assert stream_lines(nats_server.url) == [line.encode() for line in expected.splitlines()]
    assert b"AnonID" not in b"".join(stream_lines(nats_server.url))


def test_a_changed_record_is_published_under_its_own_keys(
    nats_server: NatsServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The keyed chain's output (query scrubbed, client_id pseudonymized, the clicked object's description
    scrubbed): each record keeps its keys, order and nesting, only the changed values rewritten."""
    monkeypatch.setenv("UBI_KEY", KEY)
    text = through_nats(nats_server, tmp_path, KEYED_CHAIN, KEYED_SCHEMA)
    assert text == golden_ubi("pseudonymized.jsonl")
    assert "jane.roe@example.com" not in text


def test_ubi_lines_published_by_another_producer_join_their_queries(nats_server: NatsServer, tmp_path: Path) -> None:
    """Messages as a UBI producer publishes them (one JSON line each, or several lines a message): a click that
    arrives before its query waits for it and leaves after it; a record with no query_id is dead-lettered."""
    subject = f"{PREFIX}.0"
    raw = [(subject, EVENTS[0].encode()), (subject, "\n".join(QUERIES).encode()), (subject, EVENTS[5].encode())]
    publish(nats_server.url, [], 1, raw)
    receiver = Pipeline(load_config(write_config(tmp_path, "", out="out.jsonl")), seed=1)
    src = source(receiver, nats_server.url, partition_count=1)
    path = tmp_path / "out.jsonl"
    try:
        src.start(receiver)
        wait_until(lambda: path.exists() and len(path.read_text("utf-8").splitlines()) == 5, what="records read")
        wait_until(lambda: dead(tmp_path) == ["missing_query_id"], what="the record without a query_id")
    finally:
        src.stop(grace=5)
        receiver.close()
    out = path.read_text(encoding="utf-8").splitlines()
    assert sorted(out) == sorted([*QUERIES, EVENTS[0]]) and out.index(EVENTS[0]) > out.index(QUERIES[0])
