"""`querylog filter --confirm` (:mod:`sidecar.confirm`): rsyslog omprog's confirmation protocol.

Driven as rsyslog drives it: one message, then wait for its answer line. What must hold: ``OK`` first once ready;
each ``OK`` only once the record is in the output file (or the dead-letter file) — read right after the answer;
a failing sink answers ``ERROR <reason>`` (rsyslog keeps and resends the message) and the run goes on; an
oversized line is dead-lettered without being held whole; a config that would write to stdout is refused.
The real rsyslogd with kill -9: tests/faults/test_rsyslog.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from helpers import QUERYLOG
from helpers.planted_log import SCRUB, log_line
from hypothesis import given, settings
from hypothesis import strategies as st

from sidecar.config import load_config
from sidecar.confirm import ConfirmSummary, Lines, confirm
from sidecar.signals import StopFlag


@dataclass
class Driver:
    """An in-process run of :func:`confirm` on two pipes, driven one message at a time."""

    to_sidecar: int
    from_sidecar: Iterator[bytes]
    out: Path
    dead: Path
    thread: threading.Thread
    result: list[ConfirmSummary]

    def send(self, line: bytes) -> bytes:
        os.write(self.to_sidecar, line)
        return next(self.from_sidecar)

    def close(self) -> ConfirmSummary:
        os.close(self.to_sidecar)
        self.thread.join(30)
        assert not self.thread.is_alive()
        return self.result[0]


def _config(tmp_path: Path, out: str, fmt: str = "tsv") -> Path:
    body = {
        "state_dir": str(tmp_path / "state"),
        "dead_letter_file": str(tmp_path / "dead.jsonl"),
        "schema": {"format": fmt, "header": False},
        "limits": {"max_record_bytes": 1024},
        "filters": [SCRUB],
        "sinks": [{"file": {"path": out}}],
    }
    path = tmp_path / "querylog.yaml"
    path.write_text(yaml.safe_dump(body), encoding="utf-8")
    return path


@pytest.fixture
def driver(tmp_path: Path) -> Iterator[Driver]:
    out = tmp_path / "out.tsv"
    config = load_config(_config(tmp_path, str(out)))
    stdin_r, stdin_w = os.pipe()
    stdout_r, stdout_w = os.pipe()
    result: list[ConfirmSummary] = []

    def run() -> None:
        try:
            result.append(confirm(config, StopFlag(), 0.05, stdin=stdin_r, stdout=stdout_w))
        finally:
            os.close(stdout_w)
            os.close(stdin_r)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    reader = os.fdopen(stdout_r, "rb")
    drv = Driver(stdin_w, iter(reader.readline, b""), out, tmp_path / "dead.jsonl", thread, result)
    yield drv
    reader.close()


def _dead(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def test_ok_only_once_the_record_is_written(driver: Driver) -> None:
    assert next(driver.from_sidecar) == b"OK\n"  # ready
    for seq in range(3):
        assert driver.send(log_line(seq).encode()) == b"OK\n"
        rows = driver.out.read_text(encoding="utf-8").splitlines()
        assert len(rows) == seq + 1 and rows[-1].startswith(f"{seq}\t") and "[PHONE]" in rows[-1]
    summary = driver.close()
    assert (summary.messages, summary.confirmed, summary.events_out) == (3, 3, 3)


def test_bad_lines_are_confirmed_once_dead_lettered(driver: Driver) -> None:
    """Sending a bad record again cannot help: it is dead-lettered (the file written) and then confirmed."""
    assert next(driver.from_sidecar) == b"OK\n"
    assert driver.send(b"only two\tcolumns\n") == b"OK\n"
    assert [d["reason"] for d in _dead(driver.dead)] == ["wrong_column_count"]
    assert driver.send(b"\xff\xfe\t\t\t\t\n") == b"OK\n"
    assert driver.send(b"x" * 5000 + b"\n") == b"OK\n"  # over max_record_bytes: never held whole
    reasons = [d["reason"] for d in _dead(driver.dead)]
    assert reasons == ["wrong_column_count", "invalid_utf8", "oversized_record"]
    assert driver.send(b"AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n") == b"OK\n"  # the header: skipped
    assert driver.send(log_line(7).encode()) == b"OK\n"
    summary = driver.close()
    assert summary.header_lines == 1 and summary.events_out == 1 and summary.dead_lettered == 3
    assert driver.out.read_text(encoding="utf-8").startswith("7\t")


def test_a_failing_sink_answers_an_error_and_the_run_goes_on(tmp_path: Path) -> None:
    """/dev/full refuses every write: ERROR unavailable per message (rsyslog keeps it), no OK, no traceback."""
    config = _config(tmp_path, "/dev/full")
    proc = subprocess.Popen(
        [QUERYLOG, "filter", "--confirm", "-c", str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    assert proc.stdout.readline() == b"OK\n"
    for seq in range(2):
        proc.stdin.write(log_line(seq).encode())
        proc.stdin.flush()
        assert proc.stdout.readline() == b"ERROR unavailable\n"
    proc.stdin.close()
    err = proc.stderr.read().decode() if proc.stderr is not None else ""
    assert proc.wait(30) == 1  # what the sink still holds cannot be written at the end either: said, exit 1
    assert err.count("confirm_receive_failed") == 2 and "/dev/full: No space left on device" in err
    assert "555-" not in err and "patient" not in err and "Traceback" not in err  # no value in the logs


@pytest.mark.parametrize(
    ("sinks", "message"),
    [([], "configure sinks"), ([{"file": {"path": "-"}}], "a file sink cannot write to -")],
    ids=["no-sinks", "stdout-sink"],
)
def test_stdout_is_for_confirmations_only(tmp_path: Path, sinks: list[object], message: str) -> None:
    config = tmp_path / "querylog.yaml"
    config.write_text(yaml.safe_dump({"state_dir": "state", "sinks": sinks}), encoding="utf-8")
    proc = subprocess.run(
        [QUERYLOG, "filter", "--confirm", "-c", str(config)], input=b"", capture_output=True, timeout=60
    )
    assert proc.returncode == 2 and proc.stdout == b""
    assert message in proc.stderr.decode()


def test_a_pipe_of_many_lines_is_read_ahead_one_ok_each(tmp_path: Path) -> None:
    """Without waiting for answers (a shell pipe), lines are taken in batches: still one OK per line, in order."""
    out = tmp_path / "out.tsv"
    config = _config(tmp_path, str(out))
    data = "".join(log_line(seq) for seq in range(500)).encode()
    proc = subprocess.run(
        [QUERYLOG, "filter", "--confirm", "-c", str(config)], input=data, capture_output=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr[-500:]
    assert proc.stdout == b"OK\n" * 501
    assert [int(r.split("\t", 1)[0]) for r in out.read_text(encoding="utf-8").splitlines()] == list(range(500))


_chunks = st.lists(st.binary(max_size=40), max_size=30)


@settings(max_examples=300, deadline=None)
@given(_chunks, st.integers(1, 30))
def test_lines_splits_any_chunking_like_one_read(chunks: list[bytes], limit: int) -> None:
    """However the bytes arrive, the lines are those of the whole input; a line over ``limit`` is None."""
    lines = Lines(limit)
    got: list[bytes | None] = []
    for chunk in chunks:
        got += lines.feed(chunk)
    got += lines.rest()
    whole = b"".join(chunks)
    pieces = whole.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    assert got == [p if len(p) <= limit else None for p in pieces]
