"""`replay --workers N`: the same chain per partition, merged by input position (Dask's local schedulers)."""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import ROOT

from adapters.file.scale.partition import DEFAULT_KEY, owner
from adapters.file.scale.replay import scaled_replay
from sidecar.cli import main
from sidecar.config import load_config
from sidecar.drive import replay

GOLDEN = ROOT / "tests" / "data" / "golden"
PASSTHROUGH = "state_dir: state\nfilters: []\n"
HIPAA = "state_dir: state\ndead_letter_file: dead.jsonl\nfilters:\n  - hipaa_scrub: {emptied: keep}\n"
Config = Callable[[str], Path]


def _one_process(cfg: Path, src: Path, out: Path, state: Path) -> bytes:
    loaded = load_config(cfg)
    import dataclasses

    loaded = dataclasses.replace(loaded, sidecar=dataclasses.replace(loaded.sidecar, state_dir=str(state)))
    replay(loaded, str(src), str(out))
    return out.read_bytes()


@pytest.mark.parametrize(("scheduler", "workers"), [("synchronous", 3), ("threads", 2), ("processes", 2)])
def test_hipaa_chain_output_is_byte_identical_to_one_process(
    tmp_path: Path, log_file: Path, scheduler: str, workers: int, config: Config
) -> None:
    """hipaa_scrub (no randomness, no buffer) over N partitions: the merged log equals the one-process
    replay byte for byte, and the counts add up."""
    cfg = config(HIPAA)
    want = _one_process(cfg, log_file, tmp_path / "one.tsv", tmp_path / "one-state")
    out = tmp_path / "many.tsv"
    s = scaled_replay(str(cfg), str(log_file), str(out), workers=workers, scheduler=scheduler)
    assert out.read_bytes() == want
    assert s.records_in == s.events_out == want.count(b"\n") - 1
    assert len(s.parts) == workers and all(r.records_in > 0 for r in s.parts)
    if scheduler == "processes":  # each partition in its own worker process, none in this one
        assert len({r.pid for r in s.parts}) == workers and os.getpid() not in {r.pid for r in s.parts}
    for p in range(workers):
        assert (tmp_path / "state" / "partitions" / f"{p:04d}-of-{workers:04d}" / "querylog.db").exists()


@pytest.mark.parametrize(
    ("src", "expected"), [("aol.tsv", "aol.expected.tsv"), ("events.jsonl", "events.expected.jsonl")]
)
def test_golden_crlf_no_final_newline_and_gzip(tmp_path: Path, src: str, expected: str) -> None:
    """The golden chain (keyed pseudonymize + truncate_url) over 2 and 3 partitions on the golden inputs (TSV
    with CRLF lines and no final newline; JSON lines), plain and gzip in and out: the reviewed output, byte for
    byte."""
    for name in ("golden.yaml", "golden.key"):
        shutil.copy(GOLDEN / name, tmp_path / name)
    want = (GOLDEN / expected).read_bytes()
    out = tmp_path / f"out-{expected}"
    scaled_replay(str(tmp_path / "golden.yaml"), str(GOLDEN / src), str(out), workers=2, scheduler="threads")
    assert out.read_bytes() == want
    gz_in = tmp_path / f"{src}.gz"
    gz_in.write_bytes(gzip.compress((GOLDEN / src).read_bytes()))
    gz_out = tmp_path / f"out-{expected}.gz"
    scaled_replay(
        str(tmp_path / "golden.yaml"), str(gz_in), str(gz_out), workers=3, scheduler="synchronous", fresh_state=True
    )
    assert gzip.decompress(gz_out.read_bytes()) == want


def test_a_big_file_is_split_in_chunks_and_merged_in_order(
    tmp_path: Path, log_text: str, monkeypatch: pytest.MonkeyPatch, config: Config
) -> None:
    """A plain file cut into many byte ranges (chunks end mid-line): every record once, in input order."""
    import adapters.file.scale.inputs as inputs

    monkeypatch.setattr(inputs, "MIN_CHUNK_BYTES", 4096)
    monkeypatch.setattr(inputs, "MAX_CHUNK_BYTES", 50_000)
    src = tmp_path / "in.tsv"
    src.write_text(log_text, encoding="utf-8")
    out = tmp_path / "out.tsv"
    scaled_replay(str(config(PASSTHROUGH)), str(src), str(out), workers=2, scheduler="synchronous")
    assert len(inputs.plan([str(src)], 2)) > 5
    assert out.read_text(encoding="utf-8") == log_text


def test_a_folder_of_daily_files_and_a_glob(tmp_path: Path, log_text: str, config: Config) -> None:
    """A folder (name order, gzip or plain) and a glob give the concatenation, with the header once."""
    lines = log_text.splitlines(keepends=True)
    header, body = lines[0], lines[1:]
    days = tmp_path / "days"
    days.mkdir()
    third = len(body) // 3
    parts = [body[:third], body[third : 2 * third], body[2 * third :]]
    for i, part in enumerate(parts):
        data = (header + "".join(part)).encode("utf-8")
        if i == 1:
            (days / f"2006-03-0{i + 1}.tsv.gz").write_bytes(gzip.compress(data))
        else:
            (days / f"2006-03-0{i + 1}.tsv").write_bytes(data)
    cfg = config(PASSTHROUGH)
    out = tmp_path / "out.tsv"
    s = scaled_replay(str(cfg), str(days), str(out), workers=2, scheduler="threads")
    assert out.read_text(encoding="utf-8") == log_text
    assert s.records_in == len(body)
    out2 = tmp_path / "out2.tsv"
    scaled_replay(str(cfg), str(days / "*.tsv"), str(out2), workers=2, scheduler="threads", fresh_state=True)
    assert out2.read_text(encoding="utf-8") == header + "".join(parts[0] + parts[2])


def test_split_writes_one_file_per_partition_each_user_in_one(
    tmp_path: Path, log_text: str, log_file: Path, config: Config
) -> None:
    """--split: N files with the header each; together they hold every record once, and each user's records
    are all in the file of owner(user), in input order."""
    out = tmp_path / "out.tsv"
    s = scaled_replay(str(config(PASSTHROUGH)), str(log_file), str(out), workers=3, scheduler="synchronous", split=True)
    header, *body = log_text.splitlines(keepends=True)
    assert [Path(o).name for o in s.outputs] == [f"out.part-{p:04d}-of-0003.tsv" for p in range(3)]
    seen: list[str] = []
    for p, name in enumerate(s.outputs):
        got = Path(name).read_text(encoding="utf-8").splitlines(keepends=True)
        assert got[0] == header
        assert all(owner(line.split("\t", 1)[0], 3, DEFAULT_KEY) == p for line in got[1:])
        assert got[1:] == [line for line in body if line in set(got[1:])]
        seen += got[1:]
    assert sorted(seen) == sorted(body)


def test_bad_records_are_dead_lettered_once_with_their_line(tmp_path: Path, config: Config) -> None:
    """Bad lines are dead-lettered by the split (file, line, reason) into the base state folder's file and
    counted once; good lines come out as from one process."""
    src = tmp_path / "in.tsv"
    src.write_bytes(
        b"AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"
        b"1\tgood\t2006-03-01 00:00:00\t\t\n"
        b"2\tthree columns\t2006-03-01 00:00:00\n"
        b"3\tbad \xff utf8\t2006-03-01 00:00:00\t\t\n"
        b"4\tgood too\t2006-03-01 00:00:01\t\t\n"
    )
    cfg = config(HIPAA)
    out = tmp_path / "out.tsv"
    s = scaled_replay(str(cfg), str(src), str(out), workers=2, scheduler="synchronous")
    assert out.read_bytes() == _one_process(cfg, src, tmp_path / "one.tsv", tmp_path / "one-state")
    assert (s.records_in, s.dead_lettered) == (2, 2)
    dead = [json.loads(x) for x in (tmp_path / "state" / "dead.jsonl").read_text().splitlines()]
    assert sorted((d["reason"], d["line"]) for d in dead) == [("invalid_utf8", 4), ("wrong_column_count", 3)]


def test_workers_1_without_a_scheduler_imports_no_dask(tmp_path: Path, log_file: Path, config: Config) -> None:
    """One worker and no scheduler is the one-process replay: Dask never imported (a fresh interpreter)."""
    cfg = config(PASSTHROUGH)
    code = (
        "import sys\n"
        "from sidecar.cli import main\n"
        "try:\n"
        f"    main(['replay', '-c', {str(cfg)!r}, {str(log_file)!r}, '-o', {str(tmp_path / 'o.tsv')!r},"
        " '--workers', '1'])\n"
        "except SystemExit as e:\n"
        "    assert not e.code, e.code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
    assert (tmp_path / "o.tsv").read_bytes() == log_file.read_bytes()


def test_cli_workers_and_split(
    tmp_path: Path, log_file: Path, capsys: pytest.CaptureFixture[str], config: Config
) -> None:
    """The CLI: --workers 2 --scheduler threads writes the log and a summary line; usage errors exit 2."""
    cfg = config(PASSTHROUGH)
    out = tmp_path / "o.tsv"
    with pytest.raises(SystemExit) as ok:
        main(["replay", "-c", str(cfg), str(log_file), "-o", str(out), "--workers", "2", "--scheduler", "threads"])
    assert ok.value.code in (0, None)
    assert out.read_bytes() == log_file.read_bytes()
    assert "partitions=2 scheduler=threads" in capsys.readouterr().err
    for argv, needle in (
        (["--workers", "2"], "-o OUTPUT"),
        (["-o", str(out), "--split"], "--split needs"),
        (["-o", str(out), "--workers", "2", "--scheduler", "threads", "--resume", "--fresh-state"], "contradict"),
    ):
        with pytest.raises(SystemExit) as bad:
            main(["replay", "-c", str(cfg), str(log_file), *argv])
        assert bad.value.code == 2
        assert needle in capsys.readouterr().err
