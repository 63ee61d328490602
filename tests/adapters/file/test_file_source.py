"""The `file` source: its options as a file (testdata/file_source*.yaml), and a file read through a runtime."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers.configs import report_invalid_lines

from adapters.file.source import FileSource, FileSourceConfig
from sidecar.config import build_config, load_config, load_yaml
from sidecar.pipeline import Pipeline

TESTDATA = Path(__file__).with_name("testdata")
HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"


def load_source_options(path: Path, text: str | None = None) -> object:
    """The file source's config from a YAML mapping of its options (located errors, like the loader's)."""
    doc = load_yaml(path, text)
    return build_config(FileSource.Config, doc.data, doc, "")


def test_source_options_file_loads() -> None:
    """testdata/file_source.yaml gives exactly the options it writes, none at its default."""
    config = load_source_options(TESTDATA / "file_source.yaml")
    assert config == FileSource.Config(path="in.tsv", format="tsv", batch_size=2, max_record_bytes=64, resume=True)


def test_invalid_source_options_are_reported_at_their_lines() -> None:
    """Every line of testdata/file_source_invalid.yaml marked `# invalid` is a ConfigError `FILE:LINE: KEY: problem`
    at that line, naming its key."""
    reported = report_invalid_lines(TESTDATA / "file_source_invalid.yaml", load_source_options)
    assert sorted(err.key for err in reported.values()) == [
        "batch_size",
        "encoding",
        "format",
        "max_record_bytes",
        "resume",
    ]


def test_file_source_reads_batches_into_the_runtime(tmp_path: Path) -> None:
    """FileSource built from testdata/file_source.yaml (path relative to the config folder) delivers the file in
    batches of 2 through a passthrough pipeline: the sink's output is the input without the one record longer than
    max_record_bytes (64), which is dead-lettered as oversized_record; the source counts the 5 records delivered."""
    rows = [f"{i}\tquery {i}\t2006-03-01 00:00:0{i}\t\t" for i in range(5)]
    long_row = "9\t" + "x" * 80 + "\t2006-03-01 00:00:09\t\t"
    (tmp_path / "in.tsv").write_text("\n".join([HEADER, rows[0], rows[1], long_row, *rows[2:]]) + "\n")
    (tmp_path / "sidecar.yaml").write_text("state_dir: state\nsinks:\n  - file: {path: out.tsv}\n")
    shutil.copy(TESTDATA / "file_source.yaml", tmp_path / "file_source.yaml")
    pipeline = Pipeline(load_config(tmp_path / "sidecar.yaml"))
    source = FileSource(load_source_options(tmp_path / "file_source.yaml"), pipeline.ctx)
    source.start(pipeline)
    pipeline.close()
    assert source.records == 5  # records delivered: neither the header nor the dead letter
    assert (tmp_path / "out.tsv").read_text() == "\n".join([HEADER, *rows]) + "\n"
    dead = pipeline.config.dead_letter_path
    assert dead is not None
    assert [json.loads(line)["reason"] for line in dead.read_text().splitlines()] == ["oversized_record"]


def _resuming(tmp_path: Path, **sink: object) -> tuple[Pipeline, FileSource]:
    """A pipeline whose one sink is a `file` sink with `mode: resume`, and a resuming file source of in.tsv."""
    options = ", ".join(f"{k}: {v}" for k, v in {"path": "out.tsv", "mode": "resume", **sink}.items())
    (tmp_path / "sidecar.yaml").write_text(f"state_dir: state\nsinks:\n  - file: {{{options}}}\n")
    pipeline = Pipeline(load_config(tmp_path / "sidecar.yaml"))
    return pipeline, FileSource(FileSourceConfig(path="in.tsv", batch_size=2, resume=True), pipeline.ctx)


def test_a_resuming_source_and_sink_continue_where_the_last_commit_left(tmp_path: Path) -> None:
    """`resume: true` (source) and `mode: resume` (sink): the position and the output's size are committed with
    each batch. A rerun on a grown input delivers only the new records, after cutting the output back to the
    last commit (bytes written after it — a batch a crash cut short — go); a rerun with nothing new changes
    nothing."""
    rows = [f"{i}\tquery {i}\t2006-03-01 00:00:0{i}\t\t" for i in range(7)]
    (tmp_path / "in.tsv").write_text("\n".join([HEADER, *rows[:5]]) + "\n")
    pipeline, source = _resuming(tmp_path)
    source.start(pipeline)
    pipeline.close()
    out = tmp_path / "out.tsv"
    assert out.read_text() == "\n".join([HEADER, *rows[:5]]) + "\n"
    with out.open("a") as f:
        f.write("torn, never committed")
    (tmp_path / "in.tsv").write_text("\n".join([HEADER, *rows]) + "\n")
    pipeline, source = _resuming(tmp_path)
    assert pipeline.checkpoint(source.key) == "6"  # the header and five records
    source.start(pipeline)
    pipeline.close()
    assert source.records == 2
    assert out.read_text() == "\n".join([HEADER, *rows]) + "\n"
    pipeline, source = _resuming(tmp_path)
    source.start(pipeline)
    pipeline.close()
    assert source.records == 0 and out.read_text() == "\n".join([HEADER, *rows]) + "\n"


def test_a_resuming_sink_cuts_back_when_it_starts_even_if_nothing_is_delivered(tmp_path: Path) -> None:
    """`mode: resume`: bytes after the last committed size (a batch killed before its commit: in `serve`, events
    a buffer released and still holds) go when the runtime is built, not at its first delivery, so a run that
    delivers nothing (a restart that only drains and stops) does not leave them delivered as well as held."""
    rows = [f"{i}\tquery {i}\t2006-03-01 00:00:0{i}\t\t" for i in range(3)]
    (tmp_path / "in.tsv").write_text("\n".join([HEADER, *rows]) + "\n")
    pipeline, source = _resuming(tmp_path)
    source.start(pipeline)
    pipeline.close()
    out = tmp_path / "out.tsv"
    committed = out.read_text()
    with out.open("a") as f:
        f.write("9\treleased, never committed\t2006-03-01 00:00:09\t\t\n")
    pipeline, _ = _resuming(tmp_path)
    assert out.read_text() == committed
    pipeline.close()
    assert out.read_text() == committed


def test_resume_is_refused_where_there_is_no_position(tmp_path: Path) -> None:
    """stdin has no position (the source); a .gz file or stdout cannot be cut back (the sink)."""
    from adapters.file.sink import FileSink, FileSinkConfig
    from sidecar.api import BuildContext, ConfigValueError

    ctx = BuildContext(config_dir=tmp_path)
    with pytest.raises(ConfigValueError, match="stdin has no position"):
        FileSource(FileSourceConfig(path="-", resume=True), ctx)
    for path in ("out.tsv.gz", "-"):
        with pytest.raises(ConfigValueError, match="plain file"):
            FileSink(FileSinkConfig(path=path, mode="resume"), ctx)
