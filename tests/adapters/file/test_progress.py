"""The replay progress bar counts records against the input's record count, gzip included (issue 11 defect 19)."""

from __future__ import annotations

import gzip
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import QUERYLOG

from adapters.file.progress import LineCount, count_lines
from adapters.file.source import FileSource, FileSourceConfig
from sidecar.api import BuildContext
from sidecar.drive import ReplayProgress

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"


def _log(n: int, *, last_newline: bool = True) -> bytes:
    body = "".join(f"{i}\tq{i}\t2006-03-01 00:00:00\t\t\n" for i in range(n))
    text = HEADER + body
    return (text if last_newline else text[:-1]).encode()


@pytest.mark.parametrize("last_newline", [True, False])
def test_count_lines_reads_plain_and_gzip_files(tmp_path: Path, last_newline: bool) -> None:
    plain, packed = tmp_path / "a.tsv", tmp_path / "a.tsv.gz"
    plain.write_bytes(_log(2500, last_newline=last_newline))
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert count_lines(str(plain)) == count_lines(str(packed)) == 2501
    (tmp_path / "empty.tsv").write_bytes(b"")
    assert count_lines(str(tmp_path / "empty.tsv")) == 0


def test_a_truncated_gzip_has_no_total(tmp_path: Path) -> None:
    packed = tmp_path / "a.tsv.gz"
    packed.write_bytes(gzip.compress(_log(5000))[:-40])
    assert count_lines(str(packed)) is None


def test_the_bar_counts_records_with_a_total_for_gzip_and_shows_the_chain_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    packed = tmp_path / "a.tsv.gz"
    packed.write_bytes(gzip.compress(_log(3000)))
    count = LineCount(str(packed), lambda: False)  # what FileSource.progress() starts in the background
    bar = ReplayProgress()
    bar.REFRESH_SECONDS = 0.0
    assert count.done.wait(10) and count.total is not None
    stats = {"events_out": 1200, "events_held": 300, "events_dropped": 7, "events_dead_lettered": 2}
    bar.update(1500, count.total - 1, lambda: stats)  # 1501 lines read, the header one of them
    assert bar.bar.total == 3000 and bar.bar.n == 1500
    shown = str(bar.bar)
    assert "1.50k/3.00k" in shown and "records/s" in shown
    assert "out=1200, held=300, dropped=7, dead=2" in shown
    bar.close()


def test_the_file_source_reports_records_read_without_the_header(tmp_path: Path) -> None:
    """FileSource.progress(): records read (the header not counted), and the input's records once counted."""
    plain = tmp_path / "a.tsv"
    plain.write_bytes(_log(2500))
    source = FileSource(FileSourceConfig(path=str(plain)), BuildContext(config_dir=tmp_path))
    read, _ = source.progress()  # the first call starts the count
    assert read == 0
    assert source._count is not None and source._count.done.wait(10)
    assert source.progress()[1] == 2501  # the header is known once the source read it


def test_replay_with_progress_on_gzip_runs_to_the_same_output(
    tmp_path: Path, write_config: Callable[..., Path]
) -> None:
    packed = tmp_path / "a.tsv.gz"
    packed.write_bytes(gzip.compress(_log(3000)))
    config = write_config("limits: {batch_size: 100}\nfilters: []\n")
    out = tmp_path / "out.tsv"
    run = subprocess.run(
        [QUERYLOG, "replay", "--progress", "--config", str(config), str(packed), "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert out.read_bytes() == gzip.decompress(packed.read_bytes())
    assert "records" in run.stderr and "B/s" not in run.stderr
