"""`replay --workers N` keeps its raw shards private and leaves no worker behind its parent (issue 24 item 17).

While the partitions run, every work file of the run (shards of raw input records, partition inputs) is mode
0600 in folders of mode 0700. Killed with kill -9, the parent leaves no worker process running: each local
worker watches its parent and exits when it is gone (polled here until none remains, bounded)."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

from helpers import QUERYLOG, exited, wait_until

from sidecar.tools.generate.synthetic import generate_log


def _children(pid: int) -> set[int]:
    """Processes whose parent is ``pid`` (from /proc)."""
    found = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.add(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_shards_are_private_and_workers_die_with_the_parent(tmp_path: Path, config: Callable[[str], Path]) -> None:
    log = tmp_path / "in.tsv"
    with log.open("w", encoding="utf-8") as fh:
        generate_log(4000, 5, fh)  # about 100,000 lines: the partitions run for seconds
    cfg = config("state_dir: state\nfilters:\n  - hipaa_scrub: {}\n")
    run_dir = tmp_path / "state" / "partitions" / "run-of-0002"
    cmd = [QUERYLOG, "replay", "-c", str(cfg), str(log), "-o", str(tmp_path / "out.tsv"), "--workers", "2"]
    proc = subprocess.Popen([*cmd, "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(
            lambda: any(run_dir.glob("part-*.in.*")),  # split done, partition tasks started
            what="the partition tasks to start",
            timeout=300,
            interval=0.002,
            abort=exited(proc),
        )
        modes = {p: stat.S_IMODE(p.stat().st_mode) for p in run_dir.rglob("*") if p.exists()}
        workers = _children(proc.pid)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the replay ended before the kill landed"
    assert stat.S_IMODE(run_dir.stat().st_mode) == 0o700
    shards = [p for p in modes if p.suffix in (".lines", ".pos") or ".in." in p.name]
    assert shards, sorted(modes)
    assert {p: m for p, m in modes.items() if m != (0o700 if p.is_dir() else 0o600)} == {}
    assert workers, "no worker process was seen"
    wait_until(
        lambda: not any(_alive(pid) for pid in workers),
        what="every worker process to exit after its parent was killed",
        timeout=60,
    )
    assert os.getpid() not in workers
