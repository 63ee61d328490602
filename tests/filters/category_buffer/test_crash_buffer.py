"""Crash test: kill -9 in the middle of a replay through category_buffer, restart, finish.

Every input event must end up released exactly once or still held; nothing lost.

The child below is a replay driver that commits delivery and state together:
per batch it opens a transaction on the state store, runs the chain (the
filter's own writes nest in it as a savepoint), writes and fsyncs the released
records, records the input position and output size, then commits. On restart
it truncates the output to the committed size and resumes the input there. One
run kills itself (SIGKILL) at the worst moment — output written, state not yet
committed — and one is killed from outside at a random moment, reading its input from a FIFO the test feeds
(the tail held back), so it is still running when the kill comes however fast the machine.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

N_EVENTS = 3000
BATCH = 40


def _querylog() -> str:
    """The ``querylog`` command (imported here: the child driver runs this file without ``tests/`` on its path)."""
    from helpers import QUERYLOG

    return QUERYLOG


def _config(tmp: Path) -> Path:
    cfg = tmp / "crash.yaml"
    cfg.write_text(
        "state_dir: state\n"
        "schema:\n  format: jsonl\n  roles: {user: uid, query: q, time: ts, rank: null, url: null}\n"
        "filters:\n  - category_buffer:\n      k: 5\n      category_field: cat\n"
    )
    return cfg


def _input(tmp: Path) -> Path:
    rng = random.Random(3)
    path = tmp / "in.jsonl"
    with path.open("w") as fh:
        for i in range(N_EVENTS):
            fh.write(
                json.dumps(
                    {
                        "id": i,
                        "uid": f"u{rng.randrange(60)}",
                        "q": f"query {i}",
                        "ts": i,
                        "cat": rng.choice(["A", "B", "C", "D"]),
                    }
                )
                + "\n"
            )
    return path


def child(cfg_path: str, in_path: str, out_path: str, crash_at: int) -> None:
    """The replay driver (runs in a subprocess)."""
    from sidecar.codecs import JsonlCodec
    from sidecar.config import load_config
    from sidecar.pipeline import Pipeline

    cfg = load_config(cfg_path)
    pipe = Pipeline(cfg, with_sinks=False)
    conn = pipe.state.conn
    conn.execute("CREATE TABLE IF NOT EXISTS replay_checkpoint (id INTEGER PRIMARY KEY, line INT, bytes INT)")
    row = conn.execute("SELECT line, bytes FROM replay_checkpoint WHERE id = 1").fetchone()
    line_done, size = row if row else (0, 0)
    codec = JsonlCodec(cfg.sidecar.schema)
    with open(in_path, encoding="utf-8") as src, open(out_path, "a+b") as out:
        lines = (line.rstrip("\n") for line in src)  # read as it comes: the input may be a FIFO the test feeds
        for _ in itertools.islice(lines, line_done):
            pass
        out.truncate(size)
        out.seek(size)
        start = line_done
        for batch_no in itertools.count(1):
            chunk = list(itertools.islice(lines, BATCH))
            if not chunk:
                break
            events = [codec.decode(line, "\n") for line in chunk]
            conn.execute("BEGIN IMMEDIATE")
            released = pipe.process(events)
            data = "".join(codec.encode(e) + "\n" for e in released).encode()
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
            size += len(data)
            if batch_no == crash_at:
                os.kill(os.getpid(), signal.SIGKILL)  # output written, state not committed
            conn.execute(
                "INSERT INTO replay_checkpoint(id, line, bytes) VALUES (1, ?, ?) "
                "ON CONFLICT(id) DO UPDATE SET line = excluded.line, bytes = excluded.bytes",
                (start + len(chunk), size),
            )
            conn.execute("COMMIT")
            start += len(chunk)
            print(f"batch {batch_no}", flush=True)
    pipe.close()


def _run_child(tmp: Path, crash_at: int = 0) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            __file__,
            str(tmp / "crash.yaml"),
            str(tmp / "in.jsonl"),
            str(tmp / "out.jsonl"),
            str(crash_at),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[3],
    )


def _check(tmp: Path) -> None:
    from filters.category_buffer.store import unpack_event
    from sidecar.state import StateStore

    released = [json.loads(line) for line in (tmp / "out.jsonl").read_text().splitlines()]
    ids = Counter(r["id"] for r in released)
    assert not [i for i, n in ids.items() if n > 1], "an event was released twice"
    state = StateStore(tmp / "state")
    rows = state.conn.execute("SELECT user_bucket, query_bucket, event FROM category_buffer_held").fetchall()
    state.close()
    held_q: Counter[int] = Counter()
    held_u: Counter[str] = Counter()
    for ub, qb, blob in rows:
        ev, _ = unpack_event(blob)
        if qb is not None:
            held_q[ev.record["id"]] += 1
        if ub is not None:
            held_u[ev.user] += 1
    assert not set(ids) & set(held_q), "an event is both released and held"
    assert set(ids) | set(held_q) == set(range(N_EVENTS)), "an event was lost"
    assert sum(held_q.values()) == N_EVENTS - len(released)
    inp = [json.loads(line) for line in (tmp / "in.jsonl").read_text().splitlines()]
    assert Counter(r["uid"] for r in released) + held_u == Counter(r["uid"] for r in inp)
    assert all(r["uid"] != inp[r["id"]]["uid"] for r in released)


@pytest.mark.slow
def test_self_kill_between_output_and_commit(tmp_path: Path) -> None:
    """SIGKILL after the output of a batch is written but before its state commits: the rerun truncates
    to the committed output and resumes; every event released exactly once or still held, none lost."""
    _config(tmp_path)
    _input(tmp_path)
    p = _run_child(tmp_path, crash_at=17)
    p.wait(timeout=120)
    assert p.returncode == -signal.SIGKILL
    assert (tmp_path / "out.jsonl").stat().st_size > 0
    p = _run_child(tmp_path)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err[-2000:]
    _check(tmp_path)


@pytest.mark.slow
def test_external_kill_mid_replay(tmp_path: Path) -> None:
    """SIGKILL from outside at a random moment of a replay, then a rerun: every event released exactly once
    or still held, none lost, and no released event keeps its own user.

    The first run reads a FIFO the test feeds, the last third of the input held back: once it has committed a
    random batch (5-39 of 75) it is still running (processing, or waiting for input) when the kill comes, on any
    machine; a run that ends first fails the test. The rerun reads the same bytes from a file at that path."""
    from helpers.fifo import FifoFeed

    _config(tmp_path)
    data = _input(tmp_path).read_bytes()
    (tmp_path / "in.jsonl").unlink()
    feed = FifoFeed(tmp_path / "in.jsonl", data, hold_back=len(data) // 3)
    first = _run_child(tmp_path)
    done: list[int] = []

    def progress() -> None:
        assert first.stdout is not None
        done.extend(int(line.split()[1]) for line in first.stdout if line.startswith("batch"))

    reader = threading.Thread(target=progress, daemon=True)
    reader.start()
    target = random.Random().randrange(5, 40)
    try:
        feed.until(lambda: bool(done) and done[-1] >= target, first)  # the kill point: a random batch committed
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=60)
        feed.close()
    reader.join(timeout=10)
    assert first.returncode == -signal.SIGKILL, "the replay ended before the kill"
    (tmp_path / "in.jsonl").write_bytes(data)
    p = _run_child(tmp_path)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 0, err[-2000:]
    _check(tmp_path)


def _replay_cmd(tmp: Path) -> list[str]:
    return [
        _querylog(),
        "replay",
        "--config",
        str(tmp / "crash.yaml"),
        str(tmp / "in.jsonl"),
        "-o",
        str(tmp / "out.jsonl"),
        "--resume",
        "--no-progress",
    ]


@pytest.mark.slow
@pytest.mark.parametrize("kills", [1, 3])
def test_querylog_replay_resume_survives_kill9(tmp_path: Path, kills: int) -> None:
    """`querylog replay --resume` killed with SIGKILL mid-run, then rerun to the end: every event is
    released exactly once or still held, none lost (the product path, not a test driver).

    Each run is killed once its output has grown by 1-4,000 bytes; it then has about 1 s of work left here
    (of ~205 kB of output) and the output is polled every ms, and a run that ends first fails the test at once.
    (`replay` refuses a FIFO as its input, so a pipe the test feeds cannot hold the window open.)"""
    from helpers import exited, wait_until

    _config(tmp_path)
    cfg = tmp_path / "crash.yaml"
    cfg.write_text(cfg.read_text() + "limits:\n  batch_size: 5\n")
    _input(tmp_path)
    out = tmp_path / "out.jsonl"
    rng = random.Random()
    for _ in range(kills):
        before = out.stat().st_size if out.exists() else 0
        p = subprocess.Popen(
            _replay_cmd(tmp_path),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=Path(__file__).resolve().parents[3],
        )
        grown = before + rng.randrange(1, 4000)  # the kill point: this many bytes of output (drawn once per run)
        try:
            wait_until(
                lambda n=grown: out.exists() and out.stat().st_size > n,
                what=f"the output to pass {grown} bytes",
                timeout=120,
                interval=0.001,
                abort=exited(p),
            )
        finally:
            p.kill()
            p.wait(timeout=30)
        assert p.returncode == -signal.SIGKILL, "the replay ended before it could be killed"
    done = subprocess.run(
        _replay_cmd(tmp_path), capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[3]
    )
    assert done.returncode == 0, done.stderr[-2000:]
    _check(tmp_path)
    again = subprocess.run(
        _replay_cmd(tmp_path), capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[3]
    )
    assert again.returncode == 0
    _check(tmp_path)  # a finished --resume run is not replayed twice


def test_resume_refuses_outputs_it_cannot_resume(tmp_path: Path) -> None:
    """--resume needs a plain output file: stdout and .gz are refused with exit 2."""
    _config(tmp_path)
    _input(tmp_path)
    for output in ("-", str(tmp_path / "out.jsonl.gz")):
        r = subprocess.run(
            [
                _querylog(),
                "replay",
                "--config",
                str(tmp_path / "crash.yaml"),
                str(tmp_path / "in.jsonl"),
                "-o",
                output,
                "--resume",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=Path(__file__).resolve().parents[3],
        )
        assert r.returncode == 2
        assert "--resume needs -o OUTPUT" in r.stderr


if __name__ == "__main__":
    child(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
