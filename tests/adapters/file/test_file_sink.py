"""The `file` sink keeps what earlier runs delivered (issue 11, defect 1)."""

from __future__ import annotations

import gzip
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from adapters.file.sink import FileSink, FileSinkConfig
from sidecar.api import BuildContext, Event
from sidecar.codecs import SchemaConfig, TsvCodec

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"


def _codec() -> TsvCodec:
    codec = TsvCodec(SchemaConfig())
    codec.accept_header(HEADER)
    return codec


def _events(codec: TsvCodec, start: int, n: int) -> list[Event]:
    lines = [f"{i}\tquery {i}\t2006-03-01 10:00:00\t\t" for i in range(start, start + n)]
    return codec.decode_many(lines, "\n", [])


def _run(path: Path, start: int, n: int, **options: object) -> None:
    codec = _codec()
    sink = FileSink(FileSinkConfig(path=str(path), **options), BuildContext(config_dir=path.parent))
    sink.start(HEADER + "\n", codec)
    sink.write(_events(codec, start, n))
    sink.close()


@pytest.mark.parametrize("name", ["out.tsv", "out.tsv.gz"])
def test_a_restarted_sink_appends_and_writes_the_header_once(tmp_path: Path, name: str) -> None:
    """Two runs into one file: every line of both is there, the header once (plain and gzip)."""
    path = tmp_path / name
    _run(path, 0, 3)
    _run(path, 3, 2)
    raw = gzip.decompress(path.read_bytes()) if name.endswith(".gz") else path.read_bytes()
    lines = raw.decode().splitlines()
    assert lines[0] == HEADER
    assert [line.split("\t")[0] for line in lines[1:]] == ["0", "1", "2", "3", "4"]


def test_an_earlier_run_cut_mid_line_does_not_glue_lines(tmp_path: Path) -> None:
    """A file that ends without a newline (a run killed mid-write) gets the next record on its own line."""
    path = tmp_path / "out.tsv"
    path.write_text(f"{HEADER}\n1\tpartial")
    _run(path, 5, 1)
    assert path.read_text().splitlines() == [HEADER, "1\tpartial", "5\tquery 5\t2006-03-01 10:00:00\t\t"]


def test_truncate_mode_starts_empty(tmp_path: Path) -> None:
    """`mode: truncate` is the explicit way to start a file afresh (what `replay -o` does)."""
    path = tmp_path / "out.tsv"
    _run(path, 0, 3)
    _run(path, 3, 1, mode="truncate")
    assert path.read_text().splitlines()[1:] == ["3\tquery 3\t2006-03-01 10:00:00\t\t"]


def test_lines_delivered_before_a_kill_survive_the_next_run(tmp_path: Path) -> None:
    """kill -9 after delivery (flush), then a new run: nothing the first run delivered is lost."""
    path = tmp_path / "out.tsv"
    script = tmp_path / "writer.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path[:0] = {sys.path!r}
            from tests_helper_writer import run
            run({str(path)!r})
            """
        )
    )
    (tmp_path / "tests_helper_writer.py").write_text(
        textwrap.dedent(
            f"""
            import sys
            from pathlib import Path
            from adapters.file.sink import FileSink, FileSinkConfig
            from sidecar.api import BuildContext
            from sidecar.codecs import SchemaConfig, TsvCodec

            def run(path):
                codec = TsvCodec(SchemaConfig())
                codec.accept_header({HEADER!r})
                sink = FileSink(FileSinkConfig(path=path, fsync=True), BuildContext(config_dir=Path(path).parent))
                sink.start({HEADER + chr(10)!r}, codec)
                lines = [f"{{i}}\\tquery {{i}}\\t\\t\\t" for i in range(100)]
                sink.write(codec.decode_many(lines, "\\n", []))
                sink.flush()
                print("delivered", flush=True)
                sys.stdin.read()  # up until killed (stdin closed by the test also ends it)
            """
        )
    )
    env = dict(os.environ, PYTHONPATH=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, str(script)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "delivered"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    _run(path, 100, 1)
    lines = path.read_text().splitlines()
    assert lines[0] == HEADER and len(lines) == 1 + 101


@pytest.mark.parametrize(("name", "first"), [("out.jsonl", '{"AnonID":"7","Query":"bus times"}'), ("out.tsv", HEADER)])
def test_events_from_a_binary_source_are_written_in_the_paths_text_format(
    tmp_path: Path, name: str, first: str
) -> None:
    """A source whose codec is not text (gRPC, forward, Vector) hands its codec to the sinks: `format: auto` then
    writes the path's text format from the schema, never the source's binary encoding."""
    from adapters.grpc.codec import ProtoCodec, QueryEvent

    proto = ProtoCodec()
    events = proto.decode_many([QueryEvent(user="7", query="bus times")], "\n", [])
    sink = FileSink(FileSinkConfig(path=str(tmp_path / name)), BuildContext(config_dir=tmp_path))
    sink.start(proto.header_for_output(), proto)
    sink.write(events)
    sink.close()
    assert (tmp_path / name).read_text(encoding="utf-8").startswith(first)


def test_two_sources_of_different_formats_each_come_out_right(tmp_path: Path) -> None:
    """A JSON-lines file, then a TSV file, into the same `file` sinks (issue 23: a record's format belongs to its
    source). `out.tsv`: the path's format, never the first source's; the TSV records written by their own codec
    (byte for byte, CRLF kept), the JSON ones converted into the same columns under the schema's header. A
    sink with no format to go by (no extension, none in the schema): each record in its own source's format."""
    from adapters.file.source import FileSource, FileSourceConfig
    from sidecar.config import load_config
    from sidecar.pipeline import Pipeline

    jsonl = ['{"AnonID": "1", "Query": "q one"}', '{"Query": "q two", "AnonID": "2", "extra": [1]}']
    tsv = ["3\tq three\t2006-03-01 10:00:00\t1\thttp://a.example\r", "4\tq four\t\t\t"]
    (tmp_path / "a.jsonl").write_text("\n".join(jsonl) + "\n")
    (tmp_path / "b.tsv").write_bytes(("\n".join([HEADER, *tsv]) + "\n").encode())
    (tmp_path / "s.yaml").write_text("state_dir: state\nsinks:\n  - file: {path: out.tsv}\n  - file: {path: out.log}\n")
    pipeline = Pipeline(load_config(tmp_path / "s.yaml"))
    for name in ("a.jsonl", "b.tsv"):
        FileSource(FileSourceConfig(path=name), pipeline.ctx).start(pipeline)
    pipeline.close()
    assert (tmp_path / "out.tsv").read_bytes().decode() == "\n".join(
        [HEADER, "1\tq one\t\t\t", "2\tq two\t\t\t", *tsv]
    ) + "\n"
    assert (tmp_path / "out.log").read_bytes().decode() == "\n".join([*jsonl, *tsv]) + "\n"
