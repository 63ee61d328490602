"""A replay killed with kill -9 while its forked first pass runs (:class:`sidecar.prescan.BackgroundPrescan`): the
child holds no state-folder lock (closed at the fork, :mod:`sidecar.state`), so the rerun is not refused, and it
ends with the replay (SIGKILL from the kernel, ``PR_SET_PDEATHSIG``; else its look between batches)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import QUERYLOG
from helpers.commitgroups import N_EVENTS, check_exactly_once, config, write_input
from helpers.waiting import wait_until

from sidecar.state import state_lock

ROOT = Path(__file__).resolve().parents[2]

# The replay under test: its forked first pass never ends (its pid written first, then the input's first batch
# again and again, or stuck before one); the replay kills itself (kill -9) at its first batch, once that child runs.
DIES = """
import os, signal, sys
from pathlib import Path
sys.path[:0] = [os.getcwd()]
sys.path.append("tests")
from helpers.waiting import wait_until
from adapters.file.source import FileSource
from sidecar import prescan
from sidecar.config import load_config
from sidecar.drive import replay
from sidecar.pipeline import Pipeline

mode = sys.argv[5]
prescan.DEATH_SIGNAL = mode == "signal"
child_pid = Path(sys.argv[4])
batches = FileSource.prescan_batches

def endless(self):
    child_pid.write_text(str(os.getpid()))
    while mode == "stuck":  # inside a batch: no look between batches either
        signal.pause()
    first = next(iter(batches(self)))
    while True:
        yield first

def die(self, batch):
    wait_until(child_pid.exists, what="the first pass to start in the child")
    os.kill(os.getpid(), signal.SIGKILL)

FileSource.prescan_batches = endless
Pipeline.receive = die
replay(load_config(sys.argv[1]), sys.argv[2], sys.argv[3], resume=True, prescan=True)
"""


def gone(pid: int) -> bool:
    """The process ended (no longer there, or a zombie nobody reaped yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("mode", ["signal", "look", "stuck"])
def test_kill_9_of_a_replay_leaves_no_first_pass_running_nor_its_state_folder_locked(tmp_path: Path, mode: str) -> None:
    """``signal``: the kernel's SIGKILL ends the child; ``look``: without it, the child's look between batches;
    ``stuck``: a child that can do neither (stuck in a batch) still leaves the state folder free for the rerun."""
    src, out, child = tmp_path / "in.jsonl", tmp_path / "out.jsonl", tmp_path / "child.pid"
    write_input(src)
    cfg = config(tmp_path, "o")
    script = tmp_path / "dies.py"
    script.write_text(DIES, encoding="utf-8")
    args = [sys.executable, str(script), str(cfg), str(src), str(out), str(child), mode]
    with (tmp_path / "dies.log").open("wb") as log:  # not a pipe: a child left running would hold it open
        code = subprocess.Popen(args, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT).wait(timeout=120)
    assert code == -signal.SIGKILL, (tmp_path / "dies.log").read_bytes()[-2000:]
    pid = int(child.read_text())
    try:
        with state_lock(tmp_path / "state-o"):  # at once, whether the child still runs or not: it holds no lock
            pass
        if mode != "stuck":
            wait_until(lambda: gone(pid), what="the forked first pass to end with the killed replay")
    finally:
        if not gone(pid):
            os.kill(pid, signal.SIGKILL)
    assert mode == "stuck" or gone(pid)
    cmd = [QUERYLOG, "replay", "-c", str(cfg), str(src), "-o", str(out), "--resume", "--no-progress"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    check_exactly_once(tmp_path, "o", src, out)
    assert len(out.read_text(encoding="utf-8").splitlines()) < N_EVENTS  # k-anonymity held some back
