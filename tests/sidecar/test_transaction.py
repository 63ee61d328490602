"""A batch's state commits only with its delivery: a sink that fails rolls the release back (events stay
durably held, never lost), and a full outbox refuses the batch before the chain runs."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from filters.category_buffer.store import HELD
from sidecar.api import RecordBatch
from sidecar.config import load_config
from sidecar.outbox import Outbox, OutboxFull
from sidecar.pipeline import Pipeline
from sidecar.state import DB_NAME

LINES = [f"{u}\tquery number {u}\t2006-03-01 00:00:0{u}\t\t" for u in range(1, 7)]
BUFFER = "filters:\n  - category_buffer: {k: 2, time: query}\n"


def _batch(pipeline: Pipeline, lines: list[str] = LINES) -> RecordBatch:
    codec = pipeline.ctx.codec_for("tsv")
    assert codec is not None
    codec.accept_header("AnonID\tQuery\tQueryTime\tItemRank\tClickURL")
    return RecordBatch(lines, codec, "test")


class FailingSink:
    """Takes writes; its flush (the delivery point) fails from the moment ``fail`` is set."""

    NAME = "failing"

    def __init__(self) -> None:
        self.fail = False

    def start(self, header: object, codec: object) -> None: ...

    def write(self, events: object) -> None: ...

    def flush(self) -> None:
        if self.fail:
            raise OSError(28, "No space left on device")

    def close(self) -> None: ...


def test_a_failed_delivery_leaves_the_released_events_held(write_config: Callable[..., Path]) -> None:
    """A first batch is held (acknowledged: nothing to deliver); the second makes the buffer release the first
    batch's event, the sink's flush fails and the transaction rolls back, so a restarted pipeline finds the
    acknowledged event still held (the failed batch itself was never acknowledged)."""
    config = load_config(write_config(BUFFER))
    pipeline = Pipeline(config, with_sinks=False)
    sink = FailingSink()
    pipeline.sinks.append(sink)  # duck-typed sink
    assert pipeline.receive(_batch(pipeline, LINES[:1])).held == 1
    sink.fail = True
    with pytest.raises(OSError):
        pipeline.receive(_batch(pipeline, LINES[1:2]))
    assert pipeline.chain.events_out > 0, "the buffer did release: the failure was in the delivery"
    pipeline.sinks.clear()
    pipeline.close()
    # Rolled back: one row, the first event with both halves held. Committed, the release would have left two rows
    # (the first event's and the second's, one half each) and the released pair nowhere.
    with sqlite3.connect(config.state_dir / DB_NAME) as db:
        assert db.execute(f"SELECT user_bucket IS NOT NULL, query_bucket IS NOT NULL FROM {HELD}").fetchall() == [
            (1, 1)
        ]
    restarted = Pipeline(config, with_sinks=False)
    try:
        assert restarted.stats()["events_restored"] == 1
    finally:
        restarted.close()


def test_a_full_outbox_refuses_the_batch_before_the_chain_runs(write_config: Callable[..., Path]) -> None:
    pipeline = Pipeline(load_config(write_config(BUFFER)), with_sinks=False)

    class OutboxSink:
        NAME = "test"

        def __init__(self) -> None:
            self.outbox = Outbox(pipeline.state, "t", max_bytes=1 << 20, max_batches=1)
            self.outbox.put(b"x", 1)  # at its bound: full

    pipeline.sinks.append(OutboxSink())  # only its outbox is looked at
    try:
        with pytest.raises(OutboxFull):
            pipeline.receive(_batch(pipeline))
        assert pipeline.stats()["events_in"] == 0 and pipeline.held() == 0
    finally:
        pipeline.sinks.clear()
        pipeline.close()
