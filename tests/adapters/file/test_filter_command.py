"""`querylog filter`: stdin to stdout as records come, with a timed release while the input is idle
(issue 11 defect 17, issue 12 "Pipes")."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from helpers import QUERYLOG
from helpers.kb import kb_file

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"


def _readlines(stream: IO[str], n: int, timeout: float) -> list[str]:
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.extend(stream.readline() for _ in range(n)), daemon=True)
    reader.start()
    reader.join(timeout)
    return got


def test_a_buffered_release_reaches_stdout_while_stdin_is_idle(
    tmp_path: Path, write_config: Callable[..., Path]
) -> None:
    """Two users in two categories, k=2: neither category can release on arrival; after max_hold_seconds
    the timer merges them and the release is written out while stdin is still open."""
    config = write_config(
        f"filters:\n  - classify: {{kb_path: {kb_file()}}}\n"
        "  - category_buffer: {k: 2, max_hold: merge, max_hold_seconds: 0.3, time: query}\n"
    )
    proc = subprocess.Popen(
        [QUERYLOG, "filter", "--config", str(config), "--flush-interval", "0.2"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(
            HEADER + "1\tweather forecast\t2006-03-01 00:00:00\t\t\n2\tfootball scores\t2006-03-01 00:00:01\t\t\n"
        )
        proc.stdin.flush()
        got = _readlines(proc.stdout, 2, timeout=30)
        assert proc.poll() is None, "stdin is still open: the release came from the timer"
        assert got[0] == HEADER
        user, query = got[1].split("\t")[:2]
        assert (user, query) in {("2", "weather forecast"), ("1", "football scores")}  # re-paired, never own
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert proc.returncode == 0
    assert "events in=2 out=" in proc.stderr.read()  # stderr is a pipe


def test_filter_passes_records_through_as_they_come(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    config = write_config("filters: []\n")
    proc = subprocess.Popen(
        [QUERYLOG, "filter", "-c", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(HEADER + "7\tbus times\t\t\t\n")
        proc.stdin.flush()
        assert _readlines(proc.stdout, 2, timeout=30) == [HEADER, "7\tbus times\t\t\t\n"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    assert proc.returncode == 0
