"""``replay --resume``'s commit groups (:mod:`sidecar.commitgroups`) under what can go wrong around them: the
progress bar's thread while a group holds the runtime's lock (a stop meanwhile: test_commit_groups.py), an fsync
that fails at a group's commit, a sink's backpressure in the middle of a group."""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers.commitgroups import N_EVENTS, check_exactly_once, committed, config
from helpers.waiting import wait_until

from adapters.file.sink import FileSink
from sidecar import commitgroups, drive, replayprogress
from sidecar.api import Backpressure
from sidecar.config import load_config
from sidecar.drive import replay
from sidecar.pipeline import Pipeline

pytestmark = pytest.mark.usefixtures("first_pass_in_place")  # groups commit at fixed batches


def test_resume_with_the_progress_bar_finishes_and_the_bar_shows_counts(
    tmp_path: Path, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bar's thread looks at the runtime while the last batch ran inside a group (which holds the runtime's
    lock until it commits, after the replay's end joined that thread): it does not wait for that lock, so the
    replay finishes; the counts it shows come from the driver's snapshots between batches."""
    monkeypatch.setattr(commitgroups, "GROUP_BATCHES", 7)  # 100 batches: the last group is open at the end
    monkeypatch.setattr(drive, "WATCH_SECONDS", 0.001)
    monkeypatch.setattr(replayprogress.ReplayProgress, "REFRESH_SECONDS", 0.0)
    shown: list[int] = []
    looked = threading.Event()
    update, receive = replayprogress.ReplayProgress.update, Pipeline.receive
    batches: list[int] = []

    def seen(self: replayprogress.ReplayProgress, done: int, total: int | None, stats: Any) -> None:
        looked.set()
        shown.append(int(stats().get("events_out", 0)))
        update(self, done, total, stats)

    def last_waits_for_a_look(self: Pipeline, batch: Any) -> Any:
        receipt = receive(self, batch)
        batches.append(1)
        if len(batches) == N_EVENTS // 20:  # the last batch, its group open: the bar's thread looks now
            looked.clear()
            wait_until(looked.is_set, what="the progress bar's thread to look at the runtime")
        return receipt

    monkeypatch.setattr(replayprogress.ReplayProgress, "update", seen)
    monkeypatch.setattr(Pipeline, "receive", last_waits_for_a_look)
    out = tmp_path / "out.jsonl"
    threads = threading.active_count()
    result: list[drive.ReplaySummary] = []
    worker = threading.Thread(
        target=lambda: result.append(
            replay(load_config(config(tmp_path, "b")), str(src), str(out), seed=1, resume=True, progress=True)
        ),
        daemon=True,
    )
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "replay --resume --progress did not finish (the bar's thread waits on a group)"
    assert result and result[0].records_in == N_EVENTS
    assert committed(tmp_path, "b") == (N_EVENTS, out.stat().st_size)
    check_exactly_once(tmp_path, "b", src, out)
    assert shown and max(shown) > 0  # counts reached the bar while groups held the lock
    # no thread left behind (tqdm's monitor would be): a later replay in this process may fork its first pass
    assert threading.active_count() <= threads


def test_a_failed_fsync_at_a_group_commit_rolls_the_group_back(
    tmp_path: Path, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The output's fsync at the third group's commit fails (EIO): that group is not committed (position and size
    those of the second group), the replay fails; the rerun (fsync fine again) is exactly-once."""
    monkeypatch.setattr(commitgroups, "GROUP_BATCHES", 10)
    syncs: list[int] = []
    failing = [False]
    sync, real_fsync = FileSink.sync, os.fsync

    def fsync(fd: int) -> None:
        if failing[0]:
            raise OSError(errno.EIO, os.strerror(errno.EIO))
        real_fsync(fd)

    def third_fails(self: FileSink) -> None:
        syncs.append(1)
        failing[0] = len(syncs) == 3
        try:
            sync(self)
        finally:
            failing[0] = False

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(FileSink, "sync", third_fails)
    cfg, out = config(tmp_path, "f"), tmp_path / "out.jsonl"
    with pytest.raises(OSError) as raised:
        replay(load_config(cfg), str(src), str(out), seed=1, resume=True)
    assert raised.value.errno == errno.EIO and len(syncs) == 3
    position, size = committed(tmp_path, "f")
    assert position == 2 * 10 * 20 and 0 < size < out.stat().st_size
    monkeypatch.setattr(FileSink, "sync", sync)
    assert replay(load_config(cfg), str(src), str(out), seed=2, resume=True).events_in == N_EVENTS - position
    check_exactly_once(tmp_path, "f", src, out)


def test_an_fsync_that_does_not_apply_is_not_a_failure(
    tmp_path: Path, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EINVAL (a file that cannot be synced: nothing to make durable) does not fail the group."""

    def einval(fd: int) -> None:
        raise OSError(errno.EINVAL, os.strerror(errno.EINVAL))

    monkeypatch.setattr(os, "fsync", einval)
    out = tmp_path / "out.jsonl"
    assert replay(load_config(config(tmp_path, "v")), str(src), str(out), seed=1, resume=True).records_in == N_EVENTS
    assert committed(tmp_path, "v") == (N_EVENTS, out.stat().st_size)


def test_backpressure_before_a_batch_keeps_the_group_and_retries_only_that_batch(
    tmp_path: Path, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sink that is full when the second group's 6th batch comes: that batch is refused before anything of it ran and
    offered again once the sink takes batches; the group's first five stay in it (commits at 10, 20... as
    always); the release is that of a run without backpressure."""
    monkeypatch.setattr(commitgroups, "GROUP_BATCHES", 10)
    full = [0]  # looks at backpressure() that still find the sink full
    seen: list[int] = []
    backpressure, receive = Pipeline.backpressure, Pipeline.receive

    def pressed(self: Pipeline) -> str | None:
        if full[0]:
            full[0] -= 1
            return "out"
        return backpressure(self)

    def counted(self: Pipeline, batch: Any) -> Any:
        seen.append(len(batch.records))
        if len(seen) == 15:
            full[0] = 3
        return receive(self, batch)

    monkeypatch.setattr(Pipeline, "backpressure", pressed)
    monkeypatch.setattr(Pipeline, "receive", counted)
    out = tmp_path / "out.jsonl"
    replay(load_config(config(tmp_path, "p")), str(src), str(out), seed=5, resume=True)
    assert len(seen) == N_EVENTS // 20 and full[0] == 0
    monkeypatch.setattr(Pipeline, "backpressure", backpressure)
    plain = tmp_path / "plain.jsonl"
    replay(load_config(config(tmp_path, "q")), str(src), str(plain), seed=5, resume=True)
    assert out.read_bytes() == plain.read_bytes()
    check_exactly_once(tmp_path, "p", src, out)


def test_backpressure_inside_a_batch_of_a_group_is_fatal_and_rolls_the_group_back(
    tmp_path: Path, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Backpressure raised once a batch ran (a sink refused its output) cannot be retried for that batch alone
    inside a group: the group rolls back and the replay fails with an error that says so; the rerun is
    exactly-once."""
    monkeypatch.setattr(commitgroups, "GROUP_BATCHES", 10)
    write = FileSink.write
    writes: list[int] = []

    def refusing(self: FileSink, events: Any) -> None:
        writes.append(1)
        if len(writes) == 25:
            raise Backpressure("file", "full")
        write(self, events)

    monkeypatch.setattr(FileSink, "write", refusing)
    cfg, out = config(tmp_path, "r"), tmp_path / "out.jsonl"
    with pytest.raises(commitgroups.GroupRefused, match="inside a commit group"):
        replay(load_config(cfg), str(src), str(out), seed=1, resume=True)
    position, _ = committed(tmp_path, "r")
    assert position == 2 * 10 * 20
    monkeypatch.setattr(FileSink, "write", write)
    replay(load_config(cfg), str(src), str(out), seed=2, resume=True)
    check_exactly_once(tmp_path, "r", src, out)
