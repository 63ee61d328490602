"""``querylog replay`` on a named pipe or a process substitution (``<(zcat a.gz)``): read once, as it comes,
like stdin; what needs to read the input twice or to seek in it says so."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import threading
from pathlib import Path

import pytest
from helpers import QUERYLOG, ROOT

from sidecar.tools.generate.synthetic import generate_log


@pytest.fixture
def passthrough(tmp_path: Path) -> Path:
    cfg = tmp_path / "passthrough.yaml"
    cfg.write_text((ROOT / "config" / "passthrough.yaml").read_text().replace(".querylog-state/passthrough", "st"))
    return cfg


@pytest.fixture
def log_bytes() -> bytes:
    buf = io.StringIO()
    generate_log(120, 4, buf)
    return buf.getvalue().encode("utf-8")


def _feed(path: Path, data: bytes) -> threading.Thread:
    def write() -> None:
        with open(path, "wb") as f:  # blocks until the reader opens the pipe
            f.write(data)

    t = threading.Thread(target=write, daemon=True)
    t.start()
    return t


def test_a_named_pipe_replays_byte_identical_to_the_file(tmp_path: Path, passthrough: Path, log_bytes: bytes) -> None:
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    writer = _feed(fifo, log_bytes)
    out = tmp_path / "out.tsv"
    run = subprocess.run(
        [QUERYLOG, "replay", "--config", str(passthrough), str(fifo), "-o", str(out), "--progress"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    writer.join(timeout=10)
    assert run.returncode == 0, run.stderr[-500:]
    assert out.read_bytes() == log_bytes  # the progress bar did not consume the pipe by counting its lines


def test_a_process_substitution_of_a_gzip_archive(tmp_path: Path, passthrough: Path, log_bytes: bytes) -> None:
    archive = tmp_path / "day.tsv.gz"
    archive.write_bytes(gzip.compress(log_bytes))
    out = tmp_path / "out.tsv"
    run = subprocess.run(
        ["bash", "-c", f'"{QUERYLOG}" replay --config "{passthrough}" <(zcat "{archive}") -o "{out}"'],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-500:]
    assert out.read_bytes() == log_bytes


@pytest.mark.parametrize(
    ("flag", "says"), [("--resume", "no position to resume from"), ("--prescan", "reads the input twice")]
)
def test_what_a_pipe_cannot_do_is_a_clear_usage_error(
    tmp_path: Path, passthrough: Path, log_bytes: bytes, flag: str, says: str
) -> None:
    fifo = tmp_path / "in.fifo"
    os.mkfifo(fifo)
    cfg = passthrough
    if flag == "--prescan":  # a chain with a first pass to make
        cfg = tmp_path / "k.yaml"
        cfg.write_text((ROOT / "config" / "k-anonymity.yaml").read_text().replace(".querylog-state/", "st/"))
    writer = _feed(fifo, log_bytes)
    run = subprocess.run(
        [QUERYLOG, "replay", "--config", str(cfg), str(fifo), "-o", str(tmp_path / "out.tsv"), flag],
        capture_output=True,
        text=True,
        timeout=120,
    )
    if writer.is_alive():  # the replay refused before opening the pipe: let the writer go
        with open(fifo, "rb") as f:
            f.read()
    writer.join(timeout=10)
    assert run.returncode == 2, run.stderr[-500:]
    assert says in run.stderr


def test_a_directory_is_named_as_one(tmp_path: Path, passthrough: Path) -> None:
    run = subprocess.run(
        [QUERYLOG, "replay", "--config", str(passthrough), str(tmp_path), "-o", str(tmp_path / "o.tsv")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 2
    assert "a directory" in run.stderr
