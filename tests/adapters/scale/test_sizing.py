"""`replay --workers N` on an input too small for N partitions: a `small_partitions` warning (issue 28 item 8)."""

from __future__ import annotations

import gzip
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog

from adapters.file.scale import sizing
from adapters.file.scale.replay import scaled_replay
from adapters.file.scale.sizing import SMALL_PARTITION_BYTES, small_partitions

PASSTHROUGH = "state_dir: state\nfilters: []\n"


def test_small_input_is_flagged_with_the_partitions_it_would_fill(tmp_path: Path) -> None:
    f = tmp_path / "a.tsv"
    f.write_bytes(b"x" * 100)
    assert small_partitions([str(f)], 1) is None  # one process: nothing to warn about
    small = small_partitions([str(f)], 2)
    assert small is not None and small.partitions == 2 and small.input_bytes == 100 and small.suggested == 1


def test_large_input_is_not_flagged_and_gzip_counts_at_its_ratio(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sizing, "SMALL_PARTITION_BYTES", 1000)
    plain = tmp_path / "a.tsv"
    plain.write_bytes(b"q\n" * 1000)  # 2,000 bytes: two partitions of 1,000
    assert sizing.small_partitions([str(plain)], 2) is None
    small = sizing.small_partitions([str(plain)], 3)
    assert small is not None and small.suggested == 2
    packed = tmp_path / "b.tsv.gz"
    packed.write_bytes(gzip.compress(b"q\n" * 1000))
    size = packed.stat().st_size
    assert sizing.input_bytes([str(packed)]) == size * sizing.GZIP_RATIO


def test_scaled_replay_warns_without_values(
    tmp_path: Path, log_file: Path, log_text: str, config: Callable[[str], Path]
) -> None:
    """The warning names the partitions, the input size, a partition count it fills and why held events grow;
    no record value is in it. The run itself is unchanged (every record out)."""
    assert log_file.stat().st_size < SMALL_PARTITION_BYTES
    cfg = config(PASSTHROUGH)
    with structlog.testing.capture_logs() as logs:
        s = scaled_replay(str(cfg), str(log_file), str(tmp_path / "out.tsv"), workers=2, scheduler="synchronous")
    assert s.events_out == s.records_in > 0
    (warning,) = [e for e in logs if e["event"] == "small_partitions"]
    assert warning["log_level"] == "warning"
    assert warning["partitions"] == 2 and warning["suggested_workers"] == 1
    assert "held" in warning["why"] and "k users" in warning["why"]
    text = repr(warning)
    for line in log_text.splitlines()[1:50]:
        user, query = line.split("\t")[:2]
        assert query not in text or len(query) < 4  # a short common word may appear in the explanation
        assert f"'{user}'" not in text


def test_one_worker_does_not_warn(tmp_path: Path, log_file: Path, config: Callable[[str], Path]) -> None:
    cfg = config(PASSTHROUGH)
    with structlog.testing.capture_logs() as logs:
        scaled_replay(str(cfg), str(log_file), str(tmp_path / "out.tsv"), workers=1, scheduler="synchronous")
    assert not [e for e in logs if e["event"] == "small_partitions"]
