"""A file replay without --resume writes category_buffer's held rows and profile's counts every few batches
(issue 28 item 7): the release, the counts, the held rows and the profiles at the end are those of a commit per
batch; --resume writes them with each of its commit groups."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from filters.category_buffer.filter import CategoryBufferFilter
from filters.category_buffer.store import HELD, KS, HeldStore
from filters.profile import TABLE as PROFILES
from sidecar import commitgroups, drive
from sidecar.config import load_config
from sidecar.drive import replay

CHAIN = """\
state_dir: {state}
dead_letter_file: null
schema: {{format: tsv, header: true}}
limits: {{batch_size: 40}}
filters:
  - category_buffer: {{k: 3, category_field: Cat, avoid_repeat_pairs: 50}}
  - profile: {{}}
"""


def write_log(path: Path, seed: int, n: int = 3000) -> None:
    """Users of very unequal activity over a few categories (some stay held at the end, k rises and decays)."""
    rng = random.Random(seed)
    lines = ["AnonID\tQuery\tQueryTime\tItemRank\tClickURL\tCat"]
    for i in range(n):
        user = f"u{min(int(rng.paretovariate(1.2)), 60)}"
        text = f"q{rng.randrange(400)}"
        lines.append(f"{user}\t{text}\t{i:06d}\t\t\tC{rng.randrange(6)}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run(
    tmp_path: Path, name: str, src: Path, seed: int, **kw: Any
) -> tuple[bytes, Any, list[Any], list[Any], list[Any]]:
    state = tmp_path / f"state-{name}"
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(CHAIN.format(state=state), encoding="utf-8")
    out = tmp_path / f"{name}.tsv"
    summary = replay(load_config(cfg), str(src), str(out), seed=seed, **kw)
    with sqlite3.connect(state / "querylog.db") as db:
        held = db.execute(f"SELECT id, user_bucket, query_bucket, arrived, event FROM {HELD} ORDER BY id").fetchall()
        ks = db.execute(f"SELECT bucket, k FROM {KS} ORDER BY bucket").fetchall()
        profiles = db.execute(f"SELECT * FROM {PROFILES} ORDER BY user, category").fetchall()
    return out.read_bytes(), summary, held, ks, profiles


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_deferred_commits_release_the_same_and_keep_the_same_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    src = tmp_path / "in.tsv"
    write_log(src, seed)
    writes: list[int] = []
    original = HeldStore.write

    def counted(self: HeldStore, *args: Any) -> None:
        writes.append(1)
        original(self, *args)

    monkeypatch.setattr(HeldStore, "write", counted)
    monkeypatch.setattr(drive, "DEFERRED_BATCHES", 7)
    deferred = run(tmp_path, "deferred", src, seed)
    deferred_writes = len(writes)
    writes.clear()
    monkeypatch.setattr(drive, "_defer_commits", lambda pipeline: None)  # the unoptimised path: every batch
    each = run(tmp_path, "each", src, seed)
    assert deferred[0] == each[0]  # the same release, byte for byte
    assert deferred[1].events_out == each[1].events_out and deferred[1].events_held == each[1].events_held > 0
    assert deferred[1].drop_reasons == each[1].drop_reasons
    rows = [[(r[1], r[2], r[4]) for r in run[2]] for run in (deferred, each)]  # not arrived: wall-clock time
    assert rows[0] == rows[1] and deferred[3] == each[3]
    assert deferred[4] == each[4] and sum(n for *_, n in each[4]) == each[1].events_out
    assert 0 < deferred_writes <= len(writes) // 5  # 75 batches: at most 11 writes (7 batches each + the end)


def test_resume_and_a_second_run_after_a_deferred_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--resume defers too, to its commit groups (its checkpoint commits with the held rows: see
    tests/sidecar/test_commit_groups.py). A rerun over the state a deferred replay left restores what a per-batch
    replay left."""
    src = tmp_path / "in.tsv"
    write_log(src, 9)
    calls: list[int] = []
    monkeypatch.setattr(CategoryBufferFilter, "defer_commits", lambda self, n: calls.append(n))
    run(tmp_path, "resume", src, 9, resume=True)
    assert calls == [commitgroups.GROUP_BATCHES]
    calls.clear()
    run(tmp_path, "plain", src, 9)
    assert calls == [drive.DEFERRED_BATCHES]
    monkeypatch.undo()
    first = run(tmp_path, "again", src, 9)
    second = run(tmp_path, "again", src, 9)  # the same state folder: the held events are restored
    assert second[1].events_restored == first[1].events_held > 0
