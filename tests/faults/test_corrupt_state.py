"""A corrupt state database (issue 11, fault-injection suite).

A real state database (events held by category_buffer, profiles) is damaged the ways a disk or an
operator damages files: a page in the middle overwritten with random bytes, the file truncated (at half
its size, and in the middle of a page). `replay` and `serve` must refuse it with one line naming the file
and what to do, exit code 3, no traceback, and leave it as it is (never a silent reset); `--reset-state`
is the explicit way out. (A file truncated to 0 bytes, or overwritten whole, is in
tests/adapters/file/test_replay.py.)
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from faults.faultkit import Serve, non_json_lines, serving
from helpers import QUERYLOG

from sidecar.commandkit import EXIT_STATE

PAGE = 4096
CONFIG = (
    "state_dir: state\nlogging: {level: warning}\n"
    "schema:\n  format: jsonl\n  roles: {user: uid, query: q, time: ts, rank: null, url: null}\n"
    "filters:\n  - category_buffer: {k: 2000, category_field: cat}\n  - profile: {}\n"
)


@pytest.fixture(scope="module")
def healthy(tmp_path_factory: pytest.TempPathFactory) -> tuple[bytes, bytes]:
    """The input and the state database of a replay that holds all of its 6,000 events (about 3 MB)."""
    tmp = tmp_path_factory.mktemp("healthy")
    rng = random.Random(1)
    lines = [
        json.dumps({"id": i, "uid": f"u{rng.randrange(3000)}", "q": f"query {i} " + "x" * 100, "ts": i, "cat": c})
        + "\n"
        for i, c in enumerate(rng.choice("ABCDEFGH") for _ in range(6000))
    ]
    data = "".join(lines).encode()
    (tmp / "in.jsonl").write_bytes(data)
    (tmp / "c.yaml").write_text(CONFIG, encoding="utf-8")
    run = subprocess.run(
        [QUERYLOG, "replay", "-c", str(tmp / "c.yaml"), str(tmp / "in.jsonl"), "-o", str(tmp / "o.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "held=6000" in run.stderr
    db = (tmp / "state" / "querylog.db").read_bytes()
    assert len(db) > 100 * PAGE
    return data, db


def _page_overwritten(db: bytes) -> bytes:
    """One page in the middle of the file overwritten with random bytes."""
    at = len(db) // PAGE // 2 * PAGE
    noise = random.Random(7).randbytes(PAGE)
    return db[:at] + noise + db[at + PAGE :]


def _truncated_at_half(db: bytes) -> bytes:
    return db[: len(db) // 2 // PAGE * PAGE]


def _truncated_mid_page(db: bytes) -> bytes:
    return db[: len(db) // 2 + 1234]


def _held_event_bytes(db: bytes) -> bytes:
    """A few bytes of one held event's blob made invalid UTF-8: SQLite's own structure stays intact."""
    at = db.index(b"query 3000 ")
    return db[:at] + b"\xff\xfe\xfd\xfc" + db[at + 4 :]


def _setup(tmp: Path, healthy: tuple[bytes, bytes], damage: Callable[[bytes], bytes]) -> tuple[Path, Path, bytes]:
    data, db = healthy
    (tmp / "in.jsonl").write_bytes(data)
    cfg = tmp / "c.yaml"
    cfg.write_text(CONFIG, encoding="utf-8")
    (tmp / "state").mkdir()
    damaged = damage(db)
    path = tmp / "state" / "querylog.db"
    path.write_bytes(damaged)
    path.chmod(0o600)
    return cfg, path, damaged


def _refused(stderr: str, rc: int, db: Path) -> None:
    assert rc == EXIT_STATE, stderr[-3000:]
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = non_json_lines(stderr)
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"state database {db} "), lines[0]
    assert "--reset-state" in lines[0] and "backup" in lines[0], lines[0]


DAMAGES = {
    "a page overwritten with random bytes": _page_overwritten,
    "truncated at half its size": _truncated_at_half,
    "truncated in the middle of a page": _truncated_mid_page,
}


@pytest.mark.slow
@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_a_corrupt_state_database_is_refused_by_replay_and_serve_and_reset_state_recovers(
    tmp_path: Path, healthy: tuple[bytes, bytes], damage: str
) -> None:
    """replay and serve on a damaged state database: exit 3, one line naming the database and the way out
    (a backup or --reset-state), no traceback, the file left as it was; `--reset-state` starts afresh."""
    cfg, db, damaged = _setup(tmp_path, healthy, DAMAGES[damage])
    replay = [QUERYLOG, "replay", "-c", str(cfg), str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl")]
    run = subprocess.run([*replay, "--no-progress"], capture_output=True, text=True, timeout=120)
    _refused(run.stderr, run.returncode, db)
    serve = Serve(cfg, wait=False)
    rc = serve.wait()
    _refused(serve.stderr(), rc, db)
    assert db.read_bytes() == damaged, "the damaged database is left as it was"

    fresh = subprocess.run([*replay, "--no-progress", "--reset-state"], capture_output=True, text=True, timeout=120)
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert "held=6000" in fresh.stderr and "restored=" not in fresh.stderr
    db.write_bytes(damaged)
    with serving(cfg, "--reset-state") as again:  # serve has the same way out
        assert again.stop() == 0


def test_a_damaged_held_event_is_refused_with_one_line(tmp_path: Path, healthy: tuple[bytes, bytes]) -> None:
    """A held event whose stored bytes no longer decode: the same clear refusal as any other damage."""
    cfg, db, _ = _setup(tmp_path, healthy, _held_event_bytes)
    run = subprocess.run(
        [QUERYLOG, "replay", "-c", str(cfg), str(tmp_path / "in.jsonl"), "-o", str(tmp_path / "out.jsonl")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    _refused(run.stderr, run.returncode, db)
