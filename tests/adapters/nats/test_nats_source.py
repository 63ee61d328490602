"""The nats source against a real nats-server (JetStream, temp store): every record delivered and acknowledged,
bad messages dead-lettered and acknowledged, a batch the runtime refused nak'ed and delivered again, a restarted
replica resuming its partitions, partitions split between two replicas."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import wait_until
from helpers.natskit import consumer_state, output, pipeline, publish, record, seqs, source

from adapters.nats.config import NatsSourceConfig
from adapters.nats.partition import owner, partition_key
from sidecar.api import Backpressure, ConfigValueError, Receipt, RecordBatch
from sidecar.config import load_config
from sidecar.pipeline import Pipeline
from sidecar.tools.bench.natsserver import NatsServer

N = 3000


def _all_acknowledged(url: str, durables: list[str]) -> bool:
    from nats.js.errors import NotFoundError

    try:
        return all(consumer_state(url, d) == {"pending": 0, "ack_pending": 0} for d in durables)
    except NotFoundError:  # not created yet
        return False


def test_every_record_is_delivered_once_and_every_message_acknowledged(nats_server: NatsServer, tmp_path: Path) -> None:
    publish(nats_server.url, (record(i) for i in range(N)), partitions=4)
    pipe = pipeline(tmp_path)
    src = source(pipe, nats_server.url, partition_count=4, batch_size=500)
    try:
        src.start(pipe)
        wait_until(lambda: len(output(tmp_path)) >= N, what="every record in the output")
        wait_until(
            lambda: _all_acknowledged(nats_server.url, [f"querylog_p{p}" for p in range(4)]),
            what="every message acknowledged",
        )
    finally:
        src.stop(grace=5)
        pipe.close()
    assert seqs(tmp_path) == {i: 1 for i in range(N)}
    assert src.counts["acknowledged"] == N and src.counts["redelivered"] == 0


def test_bad_messages_are_dead_lettered_then_acknowledged_good_ones_delivered(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    raw = [
        ("querylog.in.0", b"\xff\xfe not utf-8"),
        ("querylog.in.0", b"{not json"),
        ("querylog.in.0", b'{"AnonID": "natsuser1", "Query": "' + b"x" * 70_000 + b'"}'),
        ("querylog.in.0", b""),
        (
            "querylog.in.0",
            b'{"AnonID": "natsuser2", "Query": "two lines a", "seq": 100001}\n'
            b'{"AnonID": "natsuser2", "Query": "two lines b", "seq": 100002}\n',
        ),
    ]
    publish(nats_server.url, (record(i) for i in range(100)), partitions=1, raw=raw)
    pipe = pipeline(tmp_path)
    src = source(pipe, nats_server.url)
    try:
        src.start(pipe)
        wait_until(lambda: _all_acknowledged(nats_server.url, ["querylog_p0"]), what="every message acknowledged")
    finally:
        src.stop(grace=5)
        reasons = dict(pipe.dead_letters.counts)
        pipe.close()
    assert seqs(tmp_path) == {**{i: 1 for i in range(100)}, 100001: 1, 100002: 1}
    assert src.counts["dead_lettered_invalid_utf8"] == 1
    assert src.counts["dead_lettered_oversized_record"] == 1
    assert src.counts["empty_messages"] == 1
    assert reasons == {"invalid_utf8": 1, "oversized_record": 1, "invalid_json": 1}
    kept = (tmp_path / "state" / "dead-letter.jsonl").read_text(encoding="utf-8")
    assert kept.count("\n") == 3 and "nats:QUERYLOG:0" in kept


def _wait_output(folder: Path, n: int) -> None:
    wait_until(lambda: len(output(folder)) >= n, what=f"{n} records in {folder.name}'s output")


class Refusing:
    """A runtime that refuses its first ``refusals`` batches (a full outbox), then hands them on."""

    def __init__(self, inner: Pipeline, refusals: int) -> None:
        self.inner = inner
        self.refusals = refusals

    def receive(self, batch: RecordBatch) -> Receipt:
        if self.refusals > 0:
            self.refusals -= 1
            raise Backpressure("fake", "full")
        return self.inner.receive(batch)

    def backpressure(self) -> str | None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_refused_batch_is_nakked_and_delivered_again(nats_server: NatsServer, tmp_path: Path) -> None:
    publish(nats_server.url, (record(i) for i in range(500)), partitions=1)
    pipe = pipeline(tmp_path)
    src = source(pipe, nats_server.url, batch_size=200, nak_delay_seconds=0.2)
    try:
        src.start(Refusing(pipe, refusals=2))
        wait_until(lambda: len(output(tmp_path)) >= 500, what="every record in the output")
        wait_until(lambda: _all_acknowledged(nats_server.url, ["querylog_p0"]), what="every message acknowledged")
    finally:
        src.stop(grace=5)
        pipe.close()
    assert seqs(tmp_path) == {i: 1 for i in range(500)}  # nothing of a refused batch reached the sink
    assert src.counts["nak"] >= 2 and src.counts["redelivered"] >= 1


class Slow:
    """A runtime whose first ``receive`` waits until ``go`` is set (a chain slower than ack_wait)."""

    def __init__(self, inner: Pipeline) -> None:
        self.inner = inner
        self.go = threading.Event()
        self.waited = False

    def receive(self, batch: RecordBatch) -> Receipt:
        if not self.waited:
            self.waited = True
            assert self.go.wait(60)
        return self.inner.receive(batch)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def test_a_batch_slower_than_ack_wait_is_kept_in_progress_not_redelivered(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    publish(nats_server.url, (record(i) for i in range(300)), partitions=1)
    pipe = pipeline(tmp_path)
    src = source(pipe, nats_server.url, batch_size=100, ack_wait_seconds=1.5)
    slow = Slow(pipe)
    try:
        src.start(slow)  # type: ignore[arg-type]
        wait_until(lambda: src.counts["in_progress_sent"] >= 4, what="two ack_waits of work signalled")
        slow.go.set()
        wait_until(lambda: _all_acknowledged(nats_server.url, ["querylog_p0"]), what="every message acknowledged")
    finally:
        slow.go.set()
        src.stop(grace=5)
        pipe.close()
    assert seqs(tmp_path) == {i: 1 for i in range(300)}
    assert src.counts["redelivered"] == 0


def test_tsv_lines_with_a_header_message(nats_server: NatsServer, tmp_path: Path) -> None:
    header = b"AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
    rows = [f"natstsv{i % 7}\tnats kestrel tsv {i}\t2006-03-01 07:17:{i % 60:02d}\t\t".encode() for i in range(50)]
    publish(nats_server.url, [], partitions=1, raw=[("querylog.in.0", header)] + [("querylog.in.0", r) for r in rows])
    (tmp_path).mkdir(exist_ok=True)
    pipe = Pipeline(load_config(_tsv_config(tmp_path)), seed=7)
    src = source(pipe, nats_server.url)
    try:
        src.start(pipe)
        wait_until(lambda: _all_acknowledged(nats_server.url, ["querylog_p0"]), what="every message acknowledged")
    finally:
        src.stop(grace=5)
        pipe.close()
    out = (tmp_path / "out.tsv").read_bytes().splitlines()
    assert out == [header, *rows]  # the header line once (the file sink's), every row byte for byte
    assert src.counts["header_lines"] == 1


def _tsv_config(folder: Path) -> Path:
    path = folder / "tsv.yaml"
    body = {"state_dir": "state", "schema": {"format": "tsv"}, "sinks": [{"file": {"path": "out.tsv"}}]}
    path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


def test_a_restarted_replica_resumes_its_partitions(nats_server: NatsServer, tmp_path: Path) -> None:
    publish(nats_server.url, (record(i) for i in range(N)), partitions=2)
    pipe = pipeline(tmp_path)
    first = source(pipe, nats_server.url, partition_count=2, batch_size=100)
    try:
        first.start(pipe)
        wait_until(lambda: len(output(tmp_path)) >= 500, what="a part of the stream taken")
    finally:
        first.stop(grace=5)
    taken = len(output(tmp_path))
    publish(nats_server.url, (record(i) for i in range(N, N + 1000)), partitions=2)
    second = source(pipe, nats_server.url, partition_count=2, batch_size=100)
    try:
        second.start(pipe)
        wait_until(lambda: len(output(tmp_path)) >= N + 1000, what="the rest of the stream")
    finally:
        second.stop(grace=5)
        pipe.close()
    assert taken < N + 1000
    assert seqs(tmp_path) == {i: 1 for i in range(N + 1000)}  # resumed where it stopped: nothing twice
    assert first.counts["acknowledged"] + second.counts["acknowledged"] == N + 1000


def test_two_replicas_split_the_partitions_by_user(nats_server: NatsServer, tmp_path: Path) -> None:
    publish(nats_server.url, (record(i) for i in range(N)), partitions=4)
    key = partition_key()
    outs = []
    for name, parts in (("a", (0, 1)), ("b", (2, 3))):
        pipe = pipeline(tmp_path / name)
        src = source(pipe, nats_server.url, partition_count=4, partitions=parts, durable=f"replica{name}")
        try:
            src.start(pipe)
            expected = sum(1 for i in range(N) if owner(record(i)[0], 4, key) in parts)
            _wait_output(tmp_path / name, expected)
        finally:
            src.stop(grace=5)
            pipe.close()
        outs.append(output(tmp_path / name))
    users_a = {r["AnonID"] for r in outs[0]}
    users_b = {r["AnonID"] for r in outs[1]}
    assert users_a and users_b and not users_a & users_b  # a user lives on one replica
    assert sorted(int(r["seq"]) for out in outs for r in out) == list(range(N))


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"partitions": (0, 4), "partition_count": 4}, "partitions"),
        ({"partitions": (1, 1), "partition_count": 4}, "partitions"),
        ({"partitions": ()}, "partitions"),
        ({"servers": ("http://x:1",)}, "servers"),
        ({"stream": "a.b"}, "stream"),
        ({"subject_prefix": "q.*"}, "subject_prefix"),
        ({"token_env": "A", "user": "u"}, "creds_file"),
        ({"password_env": "P"}, "user"),
        ({"batch_size": 100, "max_ack_pending": 10}, "max_ack_pending"),
    ],
)
def test_bad_options_are_located(options: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigValueError) as exc:
        NatsSourceConfig(**options)
    assert exc.value.key == key
