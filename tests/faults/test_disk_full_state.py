"""Disk full on the state folder (issue 11, fault-injection suite).

The state database (and the dead-letter file beside it) sits on a small tmpfs; a k-anonymity-like chain
(category_buffer holding events in SQLite, then profile) makes it grow until the file system is full.
Expected: one clear line naming the state database and what to do (free space, not reset), exit code 3,
no traceback, a database that passes ``PRAGMA integrity_check``, no acknowledged event lost, and a run
after the space is back that continues where the full disk stopped the last one.
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from faults.faultkit import (
    Ingester,
    JsonlOutput,
    MiB,
    Serve,
    Tmpfs,
    held_ids,
    integrity,
    non_json_lines,
    serving,
)
from helpers import QUERYLOG

from sidecar.commandkit import EXIT_STATE

N_LINES = 20_000
BAD_EVERY = 97  # one line in 97 is not JSON: its dead letter goes to the full disk too


def _input(path: Path) -> set[str]:
    """JSON lines with unique ids (and a few broken lines); the ids of the good ones."""
    rng = random.Random(5)
    good: set[str] = set()
    with path.open("w", encoding="utf-8") as fh:
        for i in range(N_LINES):
            if i % BAD_EVERY == 0:
                fh.write("{broken json\n")
                continue
            user = f"user-{rng.randrange(10**12):032d}"  # mostly new users: the profile table grows too
            query = f"query {i} " + "x" * 100
            fh.write(json.dumps({"id": i, "uid": user, "q": query, "ts": i, "cat": rng.choice("ABCD")}) + "\n")
            good.add(str(i))
    return good


def _replay_config(tmp: Path, state_dir: Path) -> Path:
    cfg = tmp / "replay.yaml"
    cfg.write_text(
        f"state_dir: {state_dir}\n"
        "logging: {level: warning}\n"
        "schema:\n  format: jsonl\n  roles: {user: uid, query: q, time: ts, rank: null, url: null}\n"
        "limits: {batch_size: 50}\n"
        "filters:\n  - category_buffer: {k: 5, category_field: cat}\n  - profile: {}\n",
        encoding="utf-8",
    )
    return cfg


def _the_error_line(stderr: str, db: Path) -> str:
    """The one operator line of a run stopped by a full state disk (JSON log lines aside); checks its words."""
    assert "Traceback" not in stderr, stderr[-3000:]
    lines = non_json_lines(stderr)
    assert len(lines) == 1, lines
    line = lines[0]
    assert str(db) in line, line
    assert "space" in line.lower(), f"the line does not say that space must be freed: {line}"
    assert "--reset-state" not in line, f"a full disk is no reason to throw the state away: {line}"
    return line


@pytest.mark.slow
def test_replay_resume_stops_on_a_full_state_disk_and_the_rerun_continues(
    tmp_path: Path, tmpfs: Callable[[str, int], Tmpfs]
) -> None:
    """`replay --resume` into a state folder that fills up: exit 3 with one line naming the state database
    and saying to free space, no traceback, an intact database; after the file system grows, the same
    command finishes the input: every good input event is released exactly once or still held, none lost."""
    fs = tmpfs("state", 512 * 1024)
    good = _input(tmp_path / "in.jsonl")
    cfg = _replay_config(tmp_path, fs.path)
    out = tmp_path / "out.jsonl"
    db = fs.path / "querylog.db"
    cmd = [QUERYLOG, "replay", "--config", str(cfg), str(tmp_path / "in.jsonl"), "-o", str(out), "--resume"]
    cmd.append("--no-progress")

    first = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert first.returncode == EXIT_STATE, first.stderr[-3000:]
    _the_error_line(first.stderr, db)
    assert integrity(db) == "ok"
    stopped_at = JsonlOutput.read(out)
    assert 0 < sum(stopped_at.ids.values()) < len(good), "the disk filled neither too early nor too late"

    fs.resize(16 * MiB)
    second = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "Traceback" not in second.stderr
    assert integrity(db) == "ok"

    released = JsonlOutput.read(out)
    held = held_ids(db)
    assert released.broken == 0 and not released.ends_mid_line
    duplicates = sum(n - 1 for n in released.ids.values() if n > 1)
    lost = good - set(released.ids) - set(held)
    print(
        f"replay --resume, full state disk: good events={len(good)} released before the disk filled="
        f"{sum(stopped_at.ids.values())} released in the end={sum(released.ids.values())} held={sum(held.values())} "
        f"duplicates={duplicates} lost={len(lost)}"
    )
    assert duplicates == 0, "exactly once"
    assert not lost
    assert not set(released.ids) & set(held), "an event is both released and held"
    assert set(released.ids) | set(held) <= good


def _serve_config(tmp: Path, state_dir: Path) -> Path:
    cfg = tmp / "serve.yaml"
    cfg.write_text(
        f"state_dir: {state_dir}\n"
        "logging: {level: warning}\n"
        "flush_interval_seconds: 0.2\nserver: {shutdown_grace_seconds: 5}\n"
        "filters:\n  - category_buffer: {k: 8, category_field: cat}\n  - profile: {}\n"
        f"sinks:\n  - file: {{path: {tmp / 'out.jsonl'}, format: jsonl}}\n",
        encoding="utf-8",
    )
    return cfg


def test_serve_ingest_on_a_full_state_disk_acknowledges_only_what_is_durable_and_recovers(
    tmp_path: Path, tmpfs: Callable[[str, int], Tmpfs]
) -> None:
    """`serve` with its state on a file system that fills up mid-stream: Ingest RPCs whose state could not be
    committed get an error, not an OK; the server does not crash and takes Ingest again once space is
    freed (no restart); every acknowledged event is in the output or still held, the database is intact."""
    fs = tmpfs("state", 8 * MiB)
    cfg = _serve_config(tmp_path, fs.path)
    db = fs.path / "querylog.db"
    with serving(cfg) as serve:
        client = Ingester(serve.stub)
        assert client.rpc(), "the first Ingest, with space left, is acknowledged"
        fs.fill(leave=256 * 1024)
        for _ in range(400):
            client.rpc()
            if len(client.refused) >= 4:
                break
        acked_while_filling = len(client.acked)
        assert client.refused, "the disk never filled up"
        assert integrity(db) == "ok", "the database is sound while the disk is full"
        fs.unfill()
        recovered = [client.rpc() for _ in range(10)]
        assert all(recovered), f"Ingest after space was freed: {[r.code for r in client.refused[-3:]]}"
        assert serve.stop() == 0
        stderr = serve.stderr()
    assert "Traceback" not in stderr, stderr[-3000:]
    assert integrity(db) == "ok"

    out = JsonlOutput.read(tmp_path / "out.jsonl")
    held = held_ids(db)
    acked = set(client.acked)
    lost = acked - set(out.ids) - set(held)
    duplicates = sum(n - 1 for n in out.ids.values() if n > 1)
    both = set(out.ids) & set(held)  # delivered, and held again after a rolled-back release: at-least-once
    print(
        f"serve, full state disk: acknowledged={len(acked)} (before space was freed: {acked_while_filling}) "
        f"refused RPCs={len(client.refused)} delivered={sum(out.ids.values())} held={sum(held.values())} "
        f"duplicates={duplicates} delivered-and-still-held={len(both)} lost={len(lost)}"
    )
    assert out.broken == 0
    assert not lost, f"{len(lost)} acknowledged events are neither delivered nor held"
    assert {r.code.name for r in client.refused} == {"UNAVAILABLE"}, "a full disk: try again, not a bug"
    named = [r for r in client.refused if "state database" in r.details and str(tmp_path) not in r.details]
    logged = [line for line in stderr.splitlines() if str(db) in line]
    assert named, "the refused RPC's status says the state database, without the server's path (issue 24 item 12)"
    assert logged, "the log line names the file"


def test_serve_refuses_to_start_on_a_full_state_disk_with_one_clear_line(
    tmp_path: Path, tmpfs: Callable[[str, int], Tmpfs]
) -> None:
    """`serve` whose state folder has no space left for a new database: exit 3, one line naming the state
    database and saying to free space, no traceback; once space is freed it starts."""
    fs = tmpfs("state", 1 * MiB)
    fs.fill(leave=0)
    cfg = _serve_config(tmp_path, fs.path)
    serve = Serve(cfg, wait=False)
    rc = serve.wait()
    assert rc == EXIT_STATE, serve.stderr()[-3000:]
    _the_error_line(serve.stderr(), fs.path / "querylog.db")
    fs.unfill()
    with serving(cfg) as again:
        assert Ingester(again.stub).rpc()
        assert again.stop() == 0


def test_a_full_dead_letter_disk_never_stops_a_replay_and_leaves_no_torn_entry(
    tmp_path: Path, tmpfs: Callable[[str, int], Tmpfs]
) -> None:
    """The dead-letter file (here on its own small file system) fills up: the replay goes on and writes
    every good line (bad input never stops a run), every bad line is still counted, the dead letters
    that could not be written are counted and the file named in a warning, the file holds only whole
    entries, and once space is back the next entries are written again."""
    fs = tmpfs("dead", 64 * 1024)
    dead_file = fs.path / "dead.jsonl"
    cfg = tmp_path / "replay.yaml"
    cfg.write_text(
        f"state_dir: state\ndead_letter_file: {dead_file}\nlogging: {{level: warning}}\nfilters: []\n",
        encoding="utf-8",
    )
    header = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"
    good = [f"{i}\tquery {i}\t\t\t\n" for i in range(0, 8000, 2)]
    lines = [good[i // 2] if i % 2 == 0 else f"{i}\tnot a record {i} " + "x" * 50 + "\n" for i in range(8000)]
    (tmp_path / "in.tsv").write_text(header + "".join(lines), encoding="utf-8")
    out = tmp_path / "out.tsv"
    cmd = [QUERYLOG, "replay", "--config", str(cfg), str(tmp_path / "in.tsv"), "-o", str(out), "--no-progress"]

    run = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "Traceback" not in run.stderr
    assert out.read_text(encoding="utf-8") == header + "".join(good), "every good line is written"
    assert "dead_letter=4000 " in run.stderr.strip().splitlines()[-1], "every bad line is counted"
    warnings = [json.loads(line) for line in run.stderr.splitlines() if line.startswith("{")]
    full = [w for w in warnings if w.get("event") == "dead_letter_file_unwritable"]
    assert full and full[0].get("path") == str(dead_file), "a warning names the dead-letter file"
    unwritten = next(w["unwritten"] for w in warnings if w.get("event") == "dead_letters_unwritten")
    entries = dead_file.read_bytes()
    assert entries.endswith(b"\n"), "no torn entry at the end"
    written = [json.loads(line) for line in entries.splitlines()]
    assert len(written) + unwritten == 4000
    print(f"full dead-letter disk: bad lines=4000 written={len(written)} unwritten={unwritten}")

    fs.resize(4 * MiB)  # space is back: the next run's dead letters are written again, after whole entries
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-3000:]
    assert len(dead_file.read_bytes().splitlines()) == len(written) + 4000
    assert all(json.loads(line) for line in dead_file.read_bytes().splitlines())
