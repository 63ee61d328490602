"""A change of partitioning never grants a new privacy budget (issue 24 item 2).

Every partition task of every ``replay --workers`` count, and a replay without workers, charge the one ledger of
the state folder (``STATE_DIR/dp_ledger.db``): releasing an archive with 2 workers, then 3, then 1, then none
into the same state releases it once."""

from __future__ import annotations

import sqlite3
import subprocess
from fractions import Fraction
from pathlib import Path

import yaml
from helpers import QUERYLOG
from helpers.kb import kb_file

from filters.dp_replace.budget import LEDGER_FILE, read_ledger

USERS = 12
PER_USER = 3  # = max_queries: the first release spends every user's whole budget


def _config(tmp_path: Path) -> Path:
    """dp_replace alone, stream budget (epsilon 1, 3 concepts per user, one window forever), state in tmp_path."""
    cfg = {
        "state_dir": str(tmp_path / "state"),
        "schema": {"format": "auto", "header": True},
        "filters": [
            {
                "dp_replace": {
                    "epsilon": 1.0,
                    "budget": "stream",
                    "max_queries": PER_USER,
                    "window_seconds": None,
                    "kb_path": str(kb_file()),
                    "rebuild": False,
                }
            }
        ],
    }
    path = tmp_path / "dp.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def _log(tmp_path: Path) -> Path:
    words = ("dogs", "cats", "flu")
    rows = [
        f"{u}\t{words[(u + i) % 3]}\t2006-03-01 00:{u:02d}:{i:02d}\t\t\n" for u in range(USERS) for i in range(PER_USER)
    ]
    path = tmp_path / "in.tsv"
    path.write_text("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n" + "".join(rows), encoding="utf-8")
    return path


def test_replays_with_2_then_3_then_1_workers_then_none_release_the_archive_once(tmp_path: Path) -> None:
    config, log = _config(tmp_path), _log(tmp_path)
    runs = [
        ["--workers", "2"],  # Dask's process pool: partitions in other processes
        ["--workers", "3", "--scheduler", "threads"],
        ["--workers", "1", "--scheduler", "synchronous"],  # one partition (0000-of-0001)
        [],  # no workers: the one-process replay on the state folder itself
    ]
    released: list[int] = []
    for n, options in enumerate(runs):
        out = tmp_path / f"out{n}.tsv"
        cmd = [QUERYLOG, "replay", "-c", str(config), str(log), "-o", str(out), "--no-progress", *options]
        if n:
            cmd.append("--allow-empty")  # nothing to release is this test's expectation, not a failure
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr[-2000:]
        released.append(len(out.read_text(encoding="utf-8").splitlines()[1:]))
    assert released == [USERS * PER_USER, 0, 0, 0]
    with sqlite3.connect(tmp_path / "state" / LEDGER_FILE) as conn:
        _, rows = read_ledger(conn)
    assert len(rows) == USERS  # one account per user, whatever the partitioning
    assert all(spent == Fraction(1) for _, _, spent, _, _ in rows)
    assert sum(units for _, _, _, units, _ in rows) == USERS * PER_USER  # charged = released
    assert not list((tmp_path / "state" / "partitions").glob("*/" + LEDGER_FILE))  # no ledger per partition
