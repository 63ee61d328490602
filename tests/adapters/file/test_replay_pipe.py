"""``querylog replay`` on a named pipe or a process substitution (``<(zcat a.gz)``): read once, as it comes,
like stdin; what needs to read the input twice or to seek in it says so; a stop loses nothing already read."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import QUERYLOG, ROOT

from sidecar.api import RecordBatch
from sidecar.config import load_config
from sidecar.drive import replay
from sidecar.pipeline import Pipeline
from sidecar.signals import StopFlag
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
        try:
            with open(path, "wb") as f:  # blocks until the reader opens the pipe
                f.write(data)
        except BrokenPipeError:  # the reader refused and left (the usage-error tests)
            pass

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


def test_a_stop_mid_batch_on_a_pipe_writes_what_was_read_and_dead_letters_the_cut_record(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM (the stop flag) while the first of a chunk's batches is in the chain: the chunk's other lines were
    already read from the pipe, so they go out too, and the record cut short is in the dead-letter file; the
    pipe is still open (the writer did not finish)."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("state_dir: st\ndead_letter_file: dead.jsonl\nlimits: {batch_size: 10}\nfilters: []\n")
    lines = [f"u{i}\tquery {i}\t2006-03-01 00:00:{i % 60:02d}\t\t" for i in range(95)]
    data = ("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n" + "\n".join(lines) + "\nu95\tcut sh").encode()
    read_end, write_end = os.pipe()
    os.write(write_end, data)  # all in one chunk; the write end stays open: no EOF
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(os.fdopen(read_end, "rb")))
    stop = StopFlag()
    receive = Pipeline.receive

    def receive_then_stop(self: Pipeline, batch: RecordBatch) -> Any:
        stop.set()  # the signal lands while this batch is in the chain
        return receive(self, batch)

    monkeypatch.setattr(Pipeline, "receive", receive_then_stop)
    out = tmp_path / "out.tsv"
    try:
        summary = replay(load_config(cfg), "-", str(out), stop=stop)
    finally:
        os.close(write_end)
    assert summary.interrupted
    assert out.read_text().splitlines()[1:] == lines
    dead = [json.loads(x) for x in (tmp_path / "st" / "dead.jsonl").read_text().splitlines()]
    assert [d["reason"] for d in dead] == ["partial_record_at_stop"]
