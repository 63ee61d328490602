"""One writer per state folder: a second process on the same ``state_dir`` refuses to start (issues 23, 24)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import QUERYLOG

from sidecar.state import LOCK_NAME, StateInUse, StateStore, remove_state_database, state_lock

HOLD = """
import sys
from sidecar.state import StateStore
store = StateStore(sys.argv[1])
print("held", flush=True)
sys.stdin.read()
"""


def _holder(state_dir: Path) -> subprocess.Popen[str]:
    """Another process that opened the state store and keeps it open until its stdin closes."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(state_dir)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "held"
    return proc


def test_a_second_process_is_refused_with_the_folder_and_the_holders_pid(tmp_path: Path) -> None:
    holder = _holder(tmp_path)
    try:
        with pytest.raises(StateInUse) as refused:
            StateStore(tmp_path)
        message = str(refused.value)
        assert str(tmp_path.resolve()) in message
        assert f"process {holder.pid}" in message
    finally:
        holder.communicate("")
    StateStore(tmp_path).close()  # the holder is gone: the lock went with it


def test_a_killed_holder_leaves_no_stale_lock(tmp_path: Path) -> None:
    holder = _holder(tmp_path)
    holder.kill()
    holder.wait()
    StateStore(tmp_path).close()


def test_one_process_may_open_its_own_folder_twice(tmp_path: Path) -> None:
    """A runtime and an outbox store of the same process share the lock; it goes when both closed."""
    first = StateStore(tmp_path)
    second = StateStore(tmp_path)
    second.close()
    first.close()
    with state_lock(tmp_path):
        pass
    assert (tmp_path / LOCK_NAME).exists()


def test_reset_state_never_deletes_a_database_in_use(tmp_path: Path) -> None:
    holder = _holder(tmp_path)
    try:
        with pytest.raises(StateInUse):
            remove_state_database(tmp_path)
        assert (tmp_path / "querylog.db").exists()
    finally:
        holder.communicate("")


def test_serve_beside_a_running_process_exits_4_with_one_line(
    tmp_path: Path, write_config: Callable[..., Path]
) -> None:
    config = write_config("sources:\n  - grpc: {listen: 127.0.0.1:0}\n")
    holder = _holder(tmp_path / "state")
    try:
        run = subprocess.run([QUERYLOG, "serve", "-c", str(config)], capture_output=True, text=True, timeout=120)
    finally:
        holder.communicate("")
    assert run.returncode == 4, run.stderr[-2000:]
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith(f"state folder {(tmp_path / 'state').resolve()} is in use by process {holder.pid}")
    assert "Traceback" not in run.stderr


def test_a_finite_source_in_serve_ends_with_its_input(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """`serve` reads a file source to its end like any source; with no other source it then exits 0."""
    text = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n1\tfirst\t\t\t\n2\tsecond\t\t\t\n"
    (tmp_path / "in.tsv").write_text(text, encoding="utf-8")
    config = write_config("sources:\n  - file: {path: in.tsv}\nsinks:\n  - file: {path: out.tsv}\n")
    run = subprocess.run([QUERYLOG, "serve", "-c", str(config)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert (tmp_path / "out.tsv").read_text(encoding="utf-8") == text


def test_a_finite_source_that_fails_is_named_and_serve_exits_non_zero(
    tmp_path: Path, write_config: Callable[..., Path]
) -> None:
    (tmp_path / "in.tsv").write_text("AnonID\tQuery\n1\tfirst\n", encoding="utf-8")  # no time/rank/url columns
    config = write_config("sources:\n  - file: {path: in.tsv}\nsinks:\n  - file: {path: out.tsv}\n")
    run = subprocess.run([QUERYLOG, "serve", "-c", str(config)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 2, run.stderr[-2000:]
    assert "header: role column(s) not in the record's columns" in run.stderr


def test_pid_is_this_process_while_held(tmp_path: Path) -> None:
    with state_lock(tmp_path):
        assert (tmp_path / LOCK_NAME).read_text().strip() == str(os.getpid())
