"""Latency metrics (issue 26 item 4): per-batch histograms by source, filter and sink, events per batch, the
outbox's oldest pending age and the build info; one timing per batch and stage, never per event."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

import sidecar.chain
import sidecar.timings
from sidecar.api import RecordBatch
from sidecar.config import load_config
from sidecar.metrics import PipelineCollector
from sidecar.outbox import Outbox
from sidecar.pipeline import Pipeline
from sidecar.state import DB_NAME
from sidecar.timings import Histogram, source_kind

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
CHAIN = (
    "filters:\n"
    "  - drop: {rules: [{role: query, equals: ['-']}]}\n"
    "  - drop: {rules: [{role: query, equals: ['--']}]}\n"
    "sinks:\n"
    "  - file: {path: out.tsv}\n"
)


def _lines(n: int) -> list[str]:
    return [f"u-secret-{i}\tsecret query {i}\t2006-03-01 00:00:00\t\t" for i in range(n)]


def _batch(pipeline: Pipeline, origin: str, n: int) -> RecordBatch:
    codec = pipeline.ctx.codec_for("tsv")
    assert codec is not None
    codec.accept_header(HEADER)
    return RecordBatch(_lines(n), codec, origin)


class OutboxSink:
    """A duck-typed network sink: its flush puts the batch into an outbox whose sender never runs."""

    NAME = "forward"

    def __init__(self, pipeline: Pipeline) -> None:
        self.outbox = Outbox(pipeline.state, "latency_test")
        self.pending = 0

    def start(self, header: object, codec: object) -> None: ...

    def write(self, events: list[Any]) -> None:
        self.pending += len(events)

    def flush(self) -> None:
        if self.pending:
            self.outbox.put(b"batch", self.pending)
            self.pending = 0

    def close(self) -> None:
        self.outbox.close()


@pytest.fixture
def pipeline(write_config: Callable[[str], Path]) -> Iterator[Pipeline]:
    built = Pipeline(load_config(write_config(CHAIN)))
    yield built
    built.close()


def _scrape(pipeline: Pipeline) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(pipeline.stats))
    return generate_latest(registry).decode()


def _samples(text: str) -> list[tuple[str, dict[str, str], float]]:
    return [
        (sample.name, sample.labels, sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


def test_histogram_buckets_are_cumulative_upper_bounds() -> None:
    """A value lands in the first bucket whose bound is >= it (Prometheus `le`); +Inf counts them all."""
    h = Histogram((1.0, 2.0))
    for value in (1.0, 1.5, 3.0):
        h.observe(value)
    assert h.snapshot() == {"buckets": [(1.0, 1), (2.0, 2), (float("inf"), 3)], "sum": 5.5, "count": 3}


@pytest.mark.parametrize(
    ("origin", "kind"),
    [
        ("grpc:Filter", "grpc"),
        ("grpc:Ingest", "grpc"),
        ("http", "http"),
        ("vector:PushEvents", "vector"),
        ("forward", "forward"),
        ("/var/log/search/queries.tsv", "file"),  # the file source's origin is its path: never a label
        ("-", "file"),
        ("u-secret-1:query", "file"),
    ],
)
def test_a_batch_is_labelled_by_its_source_component(origin: str, kind: str) -> None:
    assert source_kind(origin) == kind


def test_each_stage_is_timed_per_batch(pipeline: Pipeline) -> None:
    """An http batch through receive and a gRPC batch through transform: one observation per source, per filter
    and batch, per sink delivery; events per batch by source."""
    pipeline.receive(_batch(pipeline, "http", 5))
    receipt, mine = pipeline.transform(_batch(pipeline, "grpc:Filter", 3))
    assert len(mine) == 3 and not receipt.delivered
    latency = pipeline.stats()["latency"]
    assert sorted(latency["sources"]) == ["grpc", "http"]
    assert latency["sources"]["http"]["count"] == latency["sources"]["grpc"]["count"] == 1
    assert latency["events"]["http"]["sum"] == 5 and latency["events"]["grpc"]["sum"] == 3
    assert [f["count"] for f in latency["filters"]] == [2, 2]
    assert [s["count"] for s in latency["sinks"]] == [1]  # transform delivered nothing to the sinks
    assert all(h["sum"] >= 0 for h in latency["filters"] + latency["sinks"])


def test_the_scrape_has_every_histogram_once_and_no_value(pipeline: Pipeline) -> None:
    """Histograms by source, filter (`drop`, `drop#2`) and sink (`file` at index 0, `forward` at 1, which has an
    outbox: its oldest pending age), the build info; no repeated series, no user id or query in a label."""
    pipeline.sinks.append(OutboxSink(pipeline))  # duck-typed sink
    pipeline.receive(_batch(pipeline, "http", 4))
    text = _scrape(pipeline)
    samples = _samples(text)
    keys = [(name, tuple(sorted(labels.items()))) for name, labels, _ in samples]
    assert len(keys) == len(set(keys)), sorted(k for k in keys if keys.count(k) > 1)
    assert "secret" not in text
    value = {(name, frozenset(labels.items())): v for name, labels, v in samples}

    def of(name: str, **labels: str) -> float:
        return value[(name, frozenset(labels.items()))]

    assert of("querylog_source_batch_duration_seconds_count", source="http") == 1
    assert of("querylog_source_batch_events_bucket", source="http", le="1.0") == 0
    assert of("querylog_source_batch_events_bucket", source="http", le="5.0") == 1
    assert of("querylog_source_batch_events_sum", source="http") == 4
    for label in ("drop", "drop#2"):
        assert of("querylog_filter_batch_duration_seconds_count", filter=label) == 1
    assert of("querylog_sink_batch_duration_seconds_count", sink="file", index="0") == 1
    assert of("querylog_sink_batch_duration_seconds_count", sink="forward", index="1") == 1
    ages = [(labels, v) for name, labels, v in samples if name == "querylog_outbox_oldest_pending_age_seconds"]
    assert len(ages) == 1 and ages[0][0] == {"sink": "forward", "index": "1"} and ages[0][1] >= 0
    (info,) = [labels for name, labels, v in samples if name == "querylog_build_info" and v == 1]
    assert set(info) == {"version", "python"} and info["python"].count(".") == 2


def test_one_timing_per_batch_and_stage_never_per_event(pipeline: Pipeline, monkeypatch: pytest.MonkeyPatch) -> None:
    """The clock is read as often for a batch of 1 event as for one of 500."""
    calls = [0]
    real = time.perf_counter

    def counting() -> float:
        calls[0] += 1
        return real()

    for module in (time, sidecar.chain, sidecar.timings):
        monkeypatch.setattr(module, "perf_counter", counting)
    pipeline.receive(_batch(pipeline, "http", 1))  # the first batch starts the sinks
    counts = []
    for n in (1, 500):
        calls[0] = 0
        pipeline.receive(_batch(pipeline, "http", n))
        counts.append(calls[0])
    assert counts[0] == counts[1] > 0


def test_the_outbox_reports_the_age_of_its_oldest_pending_batch(tmp_path: Path) -> None:
    """0 when empty; from `created` of the oldest row after a restart; 0 again once the sender delivered all."""
    box = Outbox(tmp_path / "state", "age")
    assert box.oldest_age() == 0.0
    box.put(b"one", 1)
    box.put(b"two", 1)
    assert 0.0 <= box.oldest_age() < 60
    box.close()
    with sqlite3.connect(tmp_path / "state" / DB_NAME) as db:
        db.execute("UPDATE outbox_age SET created = created - 100 WHERE id = (SELECT MIN(id) FROM outbox_age)")
    again = Outbox(tmp_path / "state", "age")
    assert again.oldest_age() >= 100
    sent = threading.Event()

    def send(payload: bytes) -> None:
        if payload == b"two":
            sent.set()

    again.start(send)
    assert sent.wait(10) and again.drain(10)
    assert again.oldest_age() == 0.0
    again.close()
