"""``replay --resume`` commits its position, output size and filter state together every few batches
(:mod:`sidecar.commitgroups`): the release is that of a commit per batch, and a failure or a kill -9 anywhere in a
group (the worst moment: its output written, just before its commit) leaves a rerun exactly-once."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, ClassVar

import pytest
from helpers.commitgroups import (
    N_EVENTS,
    check_exactly_once,
    committed,
    config,
    state_rows,
)
from helpers.waiting import wait_until

from adapters.file.sink import FileSink
from filters.category_buffer.store import HELD, HeldStore
from sidecar import commitgroups, drive, prescan, replayprogress
from sidecar.config import load_config
from sidecar.drive import replay
from sidecar.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("first_pass_in_place")  # groups commit at fixed batches


def test_grouped_commits_release_what_per_batch_commits_release(
    tmp_path: Path, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same output byte for byte and the same held rows and k as a commit per batch (and as a replay
    without --resume), with one state-store write, one fsync of the output and one commit per group of batches."""
    writes: list[int] = []
    commits: list[int] = []
    syncs: list[int] = []
    write, transaction, sync = HeldStore.write, Pipeline.transaction, FileSink.sync

    def counted_sync(self: FileSink) -> None:
        syncs.append(1)
        sync(self)

    def counted_write(self: HeldStore, *args: Any) -> None:
        writes.append(1)
        write(self, *args)

    def counted_transaction(self: Pipeline, **kw: Any) -> Any:
        if not self._in_transaction:
            commits.append(1)
        return transaction(self, **kw)

    monkeypatch.setattr(HeldStore, "write", counted_write)
    monkeypatch.setattr(Pipeline, "transaction", counted_transaction)
    monkeypatch.setattr(FileSink, "sync", counted_sync)
    runs = {}
    for name, group in (("grouped", 10), ("each", 1)):
        monkeypatch.setattr(commitgroups, "GROUP_BATCHES", group)
        writes.clear()
        commits.clear()
        syncs.clear()
        out = tmp_path / f"{name}.jsonl"
        summary = replay(load_config(config(tmp_path, name)), str(src), str(out), seed=4, resume=True)
        counted = (len(writes), len(commits), len(syncs))
        runs[name] = (out.read_bytes(), summary, state_rows(tmp_path, name), *counted)
    plain = tmp_path / "plain.jsonl"
    replay(load_config(config(tmp_path, "plain")), str(src), str(plain), seed=4)
    grouped, each = runs["grouped"], runs["each"]
    assert grouped[0] == each[0] == plain.read_bytes()
    assert grouped[1].events_held == each[1].events_held > 0 and grouped[1].events_out == each[1].events_out
    assert grouped[2] == each[2] == state_rows(tmp_path, "plain")
    assert 0 < grouped[3] <= each[3] // 5  # 100 batches: about 11 writes against about 100
    assert 0 < grouped[4] <= each[4] // 5
    assert 0 < grouped[5] <= each[5] // 5  # the output fsynced once a group, before its commit
    check_exactly_once(tmp_path, "grouped", src, tmp_path / "grouped.jsonl")


class Boom(RuntimeError):
    pass


def test_a_failure_inside_a_group_rolls_the_group_back_and_the_rerun_is_exactly_once(
    tmp_path: Path, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch fails in the middle of the third group: the group's earlier batches, already written to the
    output, roll back with it (position, size and held rows of the second group's commit); the rerun cuts the
    output back and continues: each event once, released or held."""
    monkeypatch.setattr(commitgroups, "GROUP_BATCHES", 10)
    receive = Pipeline.receive
    seen: list[int] = []

    def failing(self: Pipeline, batch: Any) -> Any:
        seen.append(1)
        if len(seen) == 25:
            raise Boom("batch 25")
        return receive(self, batch)

    monkeypatch.setattr(Pipeline, "receive", failing)
    cfg, out = config(tmp_path, "r"), tmp_path / "out.jsonl"
    with pytest.raises(Boom):
        replay(load_config(cfg), str(src), str(out), seed=1, resume=True)
    written = out.stat().st_size
    position, size = committed(tmp_path, "r")
    assert position == 20 * 20  # two groups of ten batches of 20 lines
    assert 0 < size < written  # batches 21-24 were written, not committed
    monkeypatch.setattr(Pipeline, "receive", receive)
    summary = replay(load_config(cfg), str(src), str(out), seed=2, resume=True)
    assert summary.records_in == N_EVENTS
    check_exactly_once(tmp_path, "r", src, out)


@pytest.mark.parametrize("progress", [False, True])
def test_a_stop_mid_group_commits_what_was_done_and_the_rerun_continues(
    tmp_path: Path, src: Path, monkeypatch: pytest.MonkeyPatch, progress: bool
) -> None:
    """SIGTERM (the stop flag) in the middle of a group: the source ends after the batch in hand and the open
    group commits (the output's size as recorded, the position after that batch); the rerun goes on from there.
    With the progress bar on, the watcher that passes the stop on is the bar's thread, which must not be stuck
    waiting for the lock the group holds."""
    from adapters.file.source import FileSource
    from sidecar.signals import StopFlag

    monkeypatch.setattr(commitgroups, "GROUP_BATCHES", 10)
    if progress:
        monkeypatch.setattr(drive, "WATCH_SECONDS", 0.001)
        monkeypatch.setattr(replayprogress.ReplayProgress, "REFRESH_SECONDS", 0.0)
    stopping = threading.Event()
    stop_source, receive = FileSource.stop, Pipeline.receive
    seen: list[int] = []
    flag = StopFlag()

    def stop(self: FileSource, grace: float | None = None) -> None:
        stop_source(self, grace)
        stopping.set()

    def receive_and_stop(self: Pipeline, batch: Any) -> Any:
        seen.append(1)
        if len(seen) == 25:
            flag.set()  # what SIGTERM does; the driver's watcher tells the source to stop
            wait_until(stopping.is_set, what="the watcher to tell the source to stop")
        return receive(self, batch)

    monkeypatch.setattr(FileSource, "stop", stop)
    monkeypatch.setattr(Pipeline, "receive", receive_and_stop)
    cfg, out = config(tmp_path, "s"), tmp_path / "out.jsonl"
    summary = replay(load_config(cfg), str(src), str(out), seed=1, resume=True, progress=progress, stop=flag)
    assert summary.interrupted and summary.events_in == 25 * 20
    position, size = committed(tmp_path, "s")
    assert position == 25 * 20 and size == out.stat().st_size > 0
    monkeypatch.setattr(Pipeline, "receive", receive)
    assert replay(load_config(cfg), str(src), str(out), seed=2, resume=True).events_in == N_EVENTS - 25 * 20
    check_exactly_once(tmp_path, "s", src, out)


KILLER = """
import os, signal, sys
from sidecar import commitgroups, drive, prescan, replayprogress
from sidecar.config import load_config
from sidecar.drive import replay

commitgroups.GROUP_BATCHES = 10
prescan.BACKGROUND = False
commit = commitgroups.CommitGroups.commit
kill_at = int(sys.argv[4])

def commit_or_die(self):
    if self.commits + 1 == kill_at and self._open is not None:
        os.kill(os.getpid(), signal.SIGKILL)  # the group's output written and flushed, its commit not made
    commit(self)

commitgroups.CommitGroups.commit = commit_or_die
replay(load_config(sys.argv[1]), sys.argv[2], sys.argv[3], resume=True)
"""


@pytest.mark.parametrize("kill_at", [1, 4])
def test_kill_9_just_before_a_group_commits_then_resume(tmp_path: Path, src: Path, kill_at: int) -> None:
    """SIGKILL at the worst moment of a group (every batch of it delivered to the output, the commit not made):
    the rerun of ``querylog replay --resume`` cuts the output back to the last commit and finishes: every event
    released once or held, none lost."""
    cfg, out = config(tmp_path, "k"), tmp_path / "out.jsonl"
    script = tmp_path / "killer.py"
    script.write_text(KILLER, encoding="utf-8")
    proc = subprocess.run(
        [sys.executable, str(script), str(cfg), str(src), str(out), str(kill_at)],
        cwd=ROOT,
        capture_output=True,
        timeout=120,
    )
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    killed_size = out.stat().st_size
    assert committed(tmp_path, "k")[1] < killed_size  # a whole group's output beyond the last commit
    from helpers import QUERYLOG

    cmd = [QUERYLOG, "replay", "-c", str(cfg), str(src), "-o", str(out), "--resume", "--no-progress"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    check_exactly_once(tmp_path, "k", src, out)


class FirstPassElsewhere:
    """A first pass "in another process" whose result is in only after ``ready_after`` batches were received (made
    here when taken: the same result), so the moment is fixed."""

    ready_after = 35
    received = 0
    made: ClassVar[list[FirstPassElsewhere]] = []

    def __init__(self, work: Any) -> None:
        self.work, self.taken = work, False
        self.made.append(self)

    def done(self) -> bool:
        return FirstPassElsewhere.received >= self.ready_after

    def result(self) -> bytes:
        self.taken = True
        return bytes(self.work())

    def waiting(self) -> bool:
        return not self.taken

    def close(self) -> None:
        self.taken = True


@pytest.fixture
def elsewhere(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first pass made "elsewhere" (:class:`FirstPassElsewhere`); returns what happened, in order: ``receive``
    per batch, ``commit`` per group committed, ``taken`` when the result was taken."""
    monkeypatch.setattr(prescan, "BACKGROUND", True)
    monkeypatch.setattr(prescan, "BackgroundPrescan", FirstPassElsewhere)
    # the stand-in forks nothing: threads an earlier test left running (which keep a real fork away) do not matter
    monkeypatch.setattr(prescan, "threading", SimpleNamespace(active_count=lambda: 1))
    monkeypatch.setattr(commitgroups, "GROUP_BATCHES", 10)
    monkeypatch.setattr(FirstPassElsewhere, "received", 0)
    monkeypatch.setattr(FirstPassElsewhere, "made", [])
    events: list[str] = []
    receive, commit, result = Pipeline.receive, commitgroups.CommitGroups.commit, FirstPassElsewhere.result

    def counted(self: Pipeline, batch: Any) -> Any:
        FirstPassElsewhere.received += 1
        events.append("receive")
        return receive(self, batch)

    def committed(self: commitgroups.CommitGroups) -> None:
        if self._open is not None:
            events.append("commit")
        commit(self)

    def taken(self: FirstPassElsewhere) -> bytes:
        events.append("taken")
        return result(self)

    monkeypatch.setattr(Pipeline, "receive", counted)
    monkeypatch.setattr(commitgroups.CommitGroups, "commit", committed)
    monkeypatch.setattr(FirstPassElsewhere, "result", taken)
    return events


def test_resume_with_the_first_pass_elsewhere_commits_only_once_its_result_is_in(
    tmp_path: Path, src: Path, elsewhere: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """--resume makes the first pass beside the real one too: no group commits while batches wait for its result
    (they are in no state store), the first commits at the batch that took it, then every 10; the release is the
    one of a first pass made before."""
    out = tmp_path / "out.jsonl"
    replay(load_config(config(tmp_path, "e")), str(src), str(out), seed=3, resume=True, prescan=None)
    assert FirstPassElsewhere.made and elsewhere.index("taken") < elsewhere.index("commit")
    assert elsewhere[: elsewhere.index("commit")].count("receive") == FirstPassElsewhere.ready_after
    assert elsewhere.count("commit") == 1 + (100 - 35) // 10 + 1  # then every 10, and the last group at the end
    in_place = tmp_path / "in-place.jsonl"
    monkeypatch.setattr(prescan, "BACKGROUND", False)
    replay(load_config(config(tmp_path, "p")), str(src), str(in_place), seed=3, resume=True, prescan=None)
    assert out.read_bytes() == in_place.read_bytes()
    assert state_rows(tmp_path, "e") == state_rows(tmp_path, "p")
    check_exactly_once(tmp_path, "e", src, out)


def test_a_failure_while_batches_wait_for_the_first_pass_commits_nothing(
    tmp_path: Path, src: Path, elsewhere: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch fails while 29 wait for the first pass (more than two groups' worth): nothing was committed, so
    the rerun starts from the input's first line and the output is cut back to nothing; exactly-once after it."""
    receive = Pipeline.receive

    def failing(self: Pipeline, batch: Any) -> Any:
        if FirstPassElsewhere.received == 30:
            raise Boom("batch 30")
        return receive(self, batch)

    monkeypatch.setattr(Pipeline, "receive", failing)
    cfg, out = config(tmp_path, "w"), tmp_path / "out.jsonl"
    with pytest.raises(Boom):
        replay(load_config(cfg), str(src), str(out), seed=1, resume=True, prescan=None)
    assert "commit" not in elsewhere and "taken" not in elsewhere
    with sqlite3.connect(tmp_path / "state-w" / "querylog.db") as db:
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "source_positions" not in tables or not db.execute("SELECT * FROM source_positions").fetchall()
        assert not db.execute(f"SELECT * FROM {HELD}").fetchall()
    monkeypatch.setattr(Pipeline, "receive", receive)
    summary = replay(load_config(cfg), str(src), str(out), seed=2, resume=True, prescan=None)
    assert summary.events_in == N_EVENTS
    check_exactly_once(tmp_path, "w", src, out)
