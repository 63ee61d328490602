"""Two processes on one state folder (issue 24 item 1): one writer, so one budget.

A DP chain (dp_replace, stream budget: 10 concepts per user) is served by one process; a second ``serve`` and a
``replay`` on the same state folder are refused (exit 4, one line naming the folder and the holder's pid), and
the ledger's charges equal what was released: 10 replacements for a user who sent 19 queries (two processes on
one state once released 19 against the limit of 10). No ClickHouse needed: the replay beside ``serve`` is
refused before it reads or delivers anything."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from fractions import Fraction
from pathlib import Path

import yaml
from helpers import QUERYLOG, wait_until
from helpers.kb import kb_file
from helpers.serving import ServeLog, listening_ports

from adapters.grpc.client import channel, wait_serving
from adapters.grpc.codec import EventBatch, QueryEvent
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub
from filters.dp_replace.budget import LEDGER_FILE, read_ledger

LIMIT = 10


def _config(tmp_path: Path) -> Path:
    cfg = {
        "state_dir": str(tmp_path / "state"),
        "sources": [{"grpc": {"listen": "127.0.0.1:0"}}],
        "filters": [
            {
                "dp_replace": {
                    "epsilon": 1.0,
                    "budget": "stream",
                    "max_queries": LIMIT,
                    "window_seconds": None,
                    "kb_path": str(kb_file()),
                    "rebuild": False,
                }
            }
        ],
        "sinks": [{"file": {"path": str(tmp_path / "out.jsonl")}}],
    }
    path = tmp_path / "dp.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def _serve(config: Path) -> tuple[subprocess.Popen[str], ServeLog]:
    proc = subprocess.Popen(
        [QUERYLOG, "serve", "-c", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    return proc, ServeLog(proc)


def _ingest(address: str, first: int, n: int) -> None:
    """``n`` queries of user u1 (numbered from ``first``) in one acknowledged Ingest RPC."""
    words = ("dogs", "cats", "flu")
    batch = EventBatch(
        events=[QueryEvent(user="u1", query=words[i % 3], attributes={"id": str(i)}) for i in range(first, first + n)]
    )
    with channel(address) as chan:
        assert wait_serving(chan, 30)
        QueryLogFilterStub(chan).Ingest(iter([batch]), timeout=60)


def _refused_in_one_line(stderr: str, state: Path, pid: int) -> None:
    operator = [line for line in stderr.splitlines() if line.strip() and not line.startswith("{")]
    assert operator == [
        f"state folder {state.resolve()} is in use by process {pid} (one writer per state folder): stop it, or "
        "give this run a state folder of its own (--state-dir, or state_dir in its config)"
    ], stderr[-2000:]


def test_a_second_serve_and_a_replay_on_a_served_dp_state_are_refused(tmp_path: Path) -> None:
    config, state = _config(tmp_path), tmp_path / "state"
    first, first_log = _serve(config)
    try:
        (port,) = first_log.ports("grpc")
        address = f"127.0.0.1:{port}"
        _ingest(address, 0, LIMIT)

        second, second_log = _serve(config)
        try:
            wait_until(
                lambda: second.poll() is not None or listening_ports(second_log.snapshot()),
                what="the second serve to exit or to listen",
                timeout=120,
            )
            assert second.poll() is not None, "a second serve started on the state folder in use"
        finally:
            if second.poll() is None:
                second.kill()
        assert second.wait() == 4
        _refused_in_one_line(second_log.text(), state, first.pid)

        log = tmp_path / "in.tsv"
        log.write_text("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\nu1\tdogs\t\t\t\n", encoding="utf-8")
        replay = subprocess.run(
            [QUERYLOG, "replay", "-c", str(config), str(log), "-o", str(tmp_path / "replayed.tsv"), "--no-progress"],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert replay.returncode == 4
        _refused_in_one_line(replay.stderr, state, first.pid)
        assert not (tmp_path / "replayed.tsv").exists() or not (tmp_path / "replayed.tsv").read_text().strip()

        _ingest(address, LIMIT, 19 - LIMIT)  # the same user's 9 more queries: budget spent, nothing released
    finally:
        if first.poll() is None:
            first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=120) == 0, first_log.text()[-2000:]

    released = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(released) == LIMIT
    with sqlite3.connect(state / LEDGER_FILE) as conn:
        _, rows = read_ledger(conn)
    ((_, _, spent, units, outcomes),) = rows  # one user
    assert units == len(released) == LIMIT  # charged = released
    assert spent == Fraction(1)
    assert outcomes[0] == LIMIT and outcomes[1] == 19 - LIMIT  # replaced, suppressed (budget spent)
