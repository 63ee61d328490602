"""File replay: golden outputs, gzip, bad input as counted dead letters, SIGTERM/SIGINT shutdown."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import signal
import stat
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import structlog
from helpers import QUERYLOG, ROOT, SHARED_DATA, GeneratedLog, cli_env, exited, wait_until

from sidecar.config import load_config
from sidecar.drive import replay
from sidecar.tools.generate.synthetic import generate_log

GOLDEN = ROOT / "tests" / "data" / "golden"


# --- golden files -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("src", "expected"), [("aol.tsv", "aol.expected.tsv"), ("events.jsonl", "events.expected.jsonl")]
)
def test_golden_chain_output(src: str, expected: str, tmp_path: Path) -> None:
    """pseudonymize (fixed test key) + truncate_url on small TSV/JSONL inputs gives the reviewed outputs:
    same header, columns, key order, unicode, CRLF lines, missing final newline; only AnonID and ClickURL change."""
    for name in ("golden.yaml", "golden.key"):
        shutil.copy(GOLDEN / name, tmp_path / name)
    out = tmp_path / f"out-{expected}"
    summary = replay(load_config(tmp_path / "golden.yaml"), str(GOLDEN / src), str(out))
    assert out.read_bytes() == (GOLDEN / expected).read_bytes()
    assert summary.dead_lettered == 0 and summary.events_out == summary.events_in


def test_replay_cli_output_path_is_relative_to_the_working_directory(tmp_path: Path) -> None:
    """`-o out.tsv` lands in the current directory (not beside the config); passthrough is byte-identical."""
    cfg = tmp_path / "conf" / "p.yaml"
    cfg.parent.mkdir()
    cfg.write_text("state_dir: state\nfilters: []\n")
    work = tmp_path / "work"
    work.mkdir()
    run = subprocess.run(
        [QUERYLOG, "replay", "--config", str(cfg), str(GOLDEN / "aol.tsv"), "-o", "out.tsv"],
        cwd=work,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr
    assert (work / "out.tsv").read_bytes() == (GOLDEN / "aol.tsv").read_bytes()
    summary = run.stderr.strip().splitlines()[-1]
    assert summary.startswith("records in=8 events in=8 out=8 held=0 dropped=0 dead_letter=0 seconds=")


def test_shared_passthrough_config_on_the_aol_sample(tmp_path: Path) -> None:
    """The issue's check: config/passthrough.yaml on the real AOL sample is byte-identical (skips without it)."""
    sample = SHARED_DATA / "aol-sample.tsv"
    if not sample.is_file():
        pytest.skip("../shared/data is absent")
    out = tmp_path / "out.tsv"
    cfg = tmp_path / "passthrough.yaml"
    cfg.write_text((ROOT / "config" / "passthrough.yaml").read_text().replace(".querylog-state/passthrough", "st"))
    run = subprocess.run(
        [QUERYLOG, "replay", "--config", str(cfg), str(sample), "-o", str(out)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-500:]
    assert out.read_bytes() == sample.read_bytes()


# --- gzip ---------------------------------------------------------------------------------------


def _cfg(write_config: Callable[..., Path], extra: str = "") -> Path:
    return write_config(f"dead_letter_file: dead.jsonl\nfilters: []\n{extra}")


@pytest.mark.parametrize("name", ["log.tsv.gz", "log.jsonl.gz"])
def test_gzip_in_and_out_by_extension(
    name: str, tmp_path: Path, write_config: Callable[..., Path], generated_log: GeneratedLog
) -> None:
    """.gz input is decompressed, .gz output compressed; the format comes from the name under .gz."""
    if name.startswith("log.jsonl"):
        rows = [line.split("\t") for line in generated_log.text.split("\n")[1:200] if line]
        text = "".join(
            json.dumps(dict(zip(("AnonID", "Query", "QueryTime", "ItemRank", "ClickURL"), r))) + "\n" for r in rows
        )
    else:
        text = generated_log.text
    src = tmp_path / name
    src.write_bytes(gzip.compress(text.encode("utf-8")))
    out = tmp_path / f"out-{name}"
    summary = replay(load_config(_cfg(write_config)), str(src), str(out))
    assert out.read_bytes()[:2] == b"\x1f\x8b"
    assert gzip.decompress(out.read_bytes()).decode("utf-8") == text
    assert summary.dead_lettered == 0


def _dead(tmp_path: Path) -> list[dict[str, object]]:
    path = tmp_path / "state" / "dead.jsonl"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_truncated_gzip_is_a_counted_dead_letter_and_the_run_exits_0(tmp_path: Path) -> None:
    """A gzip cut short: what was read is written, `truncated_gzip` is counted, exit code 0."""
    buf = io.StringIO()
    generate_log(1500, 3, buf)  # > 1 MiB of text: the reader gets through full chunks before the cut
    text = buf.getvalue()
    blob = gzip.compress(text.encode("utf-8"))
    src = tmp_path / "cut.tsv.gz"
    src.write_bytes(blob[: len(blob) - 2000])
    cfg = tmp_path / "c.yaml"
    cfg.write_text("state_dir: state\ndead_letter_file: dead.jsonl\n")
    out = tmp_path / "out.tsv"
    run = subprocess.run(
        [QUERYLOG, "replay", "--config", str(cfg), str(src), "-o", str(out)], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    got = out.read_text(encoding="utf-8")
    assert got and text.startswith(got) and got.endswith("\n"), "a prefix of whole lines"
    assert len(got) > 1_000_000
    assert "dead_letter=1 " in run.stderr
    assert [d["reason"] for d in _dead(tmp_path)] == ["truncated_gzip"]
    events = [json.loads(line) for line in run.stderr.splitlines() if line.startswith("{")]
    assert any(e.get("event") == "record_dead_lettered" and e.get("reason") == "truncated_gzip" for e in events)


def test_corrupt_gzip_is_a_counted_dead_letter(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """Garbage after the gzip magic: counted as `corrupt_gzip`, no crash."""
    src = tmp_path / "bad.tsv.gz"
    src.write_bytes(b"\x1f\x8b\x08\x00" + b"not really deflate data" * 10)
    summary = replay(load_config(_cfg(write_config)), str(src), str(tmp_path / "o.tsv"))
    assert summary.dead_lettered == 1
    assert [d["reason"] for d in _dead(tmp_path)] == ["corrupt_gzip"]


# --- bad records --------------------------------------------------------------------------------

HEADER = b"AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"
GOOD = [b"1\tgood one\t2006-03-01 00:00:00\t\t\n", b"2\tgood two\t2006-03-01 00:00:01\t1\thttp://a.com\n"]


def test_tsv_bad_records_are_counted_and_dead_lettered(
    tmp_path: Path, write_config: Callable[..., Path], debug_structlog: None
) -> None:
    """Wrong column count, invalid UTF-8, oversized record: each counted by reason, written to the dead-letter
    file (0600) with its line number, logged once per reason without the record; good lines pass, and so does
    a line whose query is blank (a valid record: issue 11, defect 13)."""
    lines = [
        HEADER,
        GOOD[0],
        b"3\tthree columns only\t2006-03-01 00:00:00\n",  # line 3
        b"4\tbad \xff utf8\t2006-03-01 00:00:00\t\t\n",  # line 4
        b"5\t   \t2006-03-01 00:00:00\t\t\n",  # line 5: a blank query is a record
        b"6\t" + b"x" * 300 + b"\t2006-03-01 00:00:00\t\t\n",  # line 6, over limits.max_record_bytes=128
        b"7\ttoo\tmany\tcolumns\there\tnow\n",  # line 7
        GOOD[1],
    ]
    src = tmp_path / "in.tsv"
    src.write_bytes(b"".join(lines))
    out = tmp_path / "out.tsv"
    with structlog.testing.capture_logs() as logs:
        summary = replay(load_config(_cfg(write_config, "limits: {max_record_bytes: 128}\n")), str(src), str(out))
    assert out.read_bytes() == HEADER + GOOD[0] + lines[4] + GOOD[1]
    assert (summary.records_in, summary.events_in, summary.events_out, summary.dead_lettered) == (7, 3, 3, 4)
    dead = sorted(_dead(tmp_path), key=lambda d: d["line"])  # dead-letter rows are JSON objects
    assert [(d["reason"], d["line"]) for d in dead] == [
        ("wrong_column_count", 3),
        ("invalid_utf8", 4),
        ("oversized_record", 6),
        ("wrong_column_count", 7),
    ]
    assert dead[0]["record"] == "3\tthree columns only\t2006-03-01 00:00:00"
    assert "record_b64" in dead[1]
    logged = [e for e in logs if e["event"] == "record_dead_lettered"]
    assert sorted(e["reason"] for e in logged) == [
        "invalid_utf8",
        "oversized_record",
        "wrong_column_count",
    ]
    summ = next(e for e in logs if e["event"] == "dead_letters_summarized")
    assert summ == {
        "event": "dead_letters_summarized",
        "log_level": "info",
        "count_invalid_utf8": 1,
        "count_oversized_record": 1,
        "count_wrong_column_count": 2,
    }
    assert not any("three columns" in json.dumps(e, default=str) for e in logs)


def test_oversized_record_across_read_chunks(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """A 3 MiB line (longer than a read chunk) is dead-lettered; the lines around it are kept, numbered right."""
    src = tmp_path / "in.tsv"
    src.write_bytes(HEADER + GOOD[0] + b"9\t" + b"y" * (3 << 20) + b"\tt\t\t\n" + GOOD[1])
    out = tmp_path / "out.tsv"
    summary = replay(load_config(_cfg(write_config)), str(src), str(out))
    assert out.read_bytes() == HEADER + GOOD[0] + GOOD[1]
    assert summary.dead_lettered == 1
    assert [(d["reason"], d["line"]) for d in _dead(tmp_path)] == [("oversized_record", 3)]
    assert "record" not in _dead(tmp_path)[0], "an oversized record is not copied"


def test_jsonl_bad_records(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """JSON lines: not an object, invalid JSON, missing/non-string query, missing user; each counted. A blank
    query is a valid record and passes (issue 11, defect 13)."""
    good = b'{"AnonID": 1, "Query": "ok", "x": [1]}\n'
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        good
        + b"[1, 2]\n"
        + b'"just a string"\n'
        + b"{not json\n"
        + b'{"AnonID": 1, "Query": "  "}\n'
        + b'{"AnonID": 1}\n'
        + b'{"AnonID": 1, "Query": 5}\n'
        + b'{"Query": "no user"}\n'
        + good
    )
    out = tmp_path / "out.jsonl"
    summary = replay(load_config(_cfg(write_config)), str(src), str(out))
    assert out.read_bytes() == good + b'{"AnonID": 1, "Query": "  "}\n' + good
    assert [d["reason"] for d in _dead(tmp_path)] == [
        "json_not_object",
        "json_not_object",
        "invalid_json",
        "missing_query",
        "query_not_string",
        "missing_user",
    ]
    assert summary.dead_lettered == 6 and summary.events_out == 3


def test_dead_letter_file_null_counts_only(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """dead_letter_file: null counts and logs bad records but writes no file."""
    src = tmp_path / "in.tsv"
    src.write_bytes(HEADER + b"1\tbad\n" + GOOD[0])
    summary = replay(load_config(write_config("dead_letter_file: null\n")), str(src), str(tmp_path / "o.tsv"))
    assert summary.dead_lettered == 1
    assert not (tmp_path / "state" / "dead-letter.jsonl").exists()


# --- shutdown on signals ------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_during_stdin_replay_exits_0_with_complete_output(
    sig: signal.Signals, tmp_path: Path, generated_log: GeneratedLog
) -> None:
    """SIGTERM/SIGINT while replaying an endless stdin: stop reading, finish the batch, flush, exit 0.
    The output is a prefix of the input made of whole lines, and the summary says so."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("state_dir: state\nfilters: []\n")
    out = tmp_path / "out.tsv"
    proc = subprocess.Popen(
        [QUERYLOG, "replay", "--config", str(cfg), "-", "-o", str(out), "--no-progress"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    header, body = generated_log.text.split("\n", 1)
    chunk = body.encode("utf-8")
    fed = [f"{header}\n".encode()]
    stop = threading.Event()

    def feed() -> None:
        assert proc.stdin is not None
        try:
            proc.stdin.write(fed[0])
            for _ in range(2000):  # bounded: at most ~2000 copies of the generated log
                if stop.is_set():
                    break
                fed.append(chunk)  # before the write: a write cut short may still have been read
                proc.stdin.write(chunk)
        except (OSError, ValueError):  # the replay stopped reading and exited
            pass

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    # the handler is in (installed before -o is opened) and input flows: 3 copies of the log were fed;
    # then mid-stream: it wrote a whole copy out (each batch from a pipe is written as soon as it is read),
    # and the feed cannot run dry (it is ~2,000 copies long)
    wait_until(
        lambda: out.exists() and len(fed) > 3, what="3 copies of the log to be fed", timeout=120, abort=exited(proc)
    )
    wait_until(
        lambda: out.stat().st_size > len(fed[0]) + len(chunk),
        what="the replay to write a copy of the log out",
        timeout=120,
        abort=exited(proc),
    )
    proc.send_signal(sig)
    try:
        _, err = proc.communicate(timeout=60)
    finally:
        stop.set()
        proc.kill()
    feeder.join(timeout=10)
    assert proc.returncode == 0, err.decode()[-1000:]
    summary = err.decode().strip().splitlines()[-1]
    assert summary.endswith("(interrupted)")
    got = out.read_bytes()
    sent = b"".join(fed)
    assert got.endswith(b"\n") and sent.startswith(got), "whole lines, in order, nothing lost or invented"
    lines = got.count(b"\n") - 1
    assert lines > 0
    assert f" out={lines} " in summary


def test_existing_dead_letter_file_is_appended_and_made_private(
    tmp_path: Path, write_config: Callable[..., Path]
) -> None:
    """A dead-letter file left world-readable is appended to and tightened to 0600."""
    (tmp_path / "state").mkdir()
    old = tmp_path / "state" / "dead.jsonl"
    old.write_text('{"reason": "earlier"}\n')
    old.chmod(0o644)
    src = tmp_path / "in.tsv"
    src.write_bytes(HEADER + b"1\tbad\n" + GOOD[0])
    replay(load_config(_cfg(write_config)), str(src), str(tmp_path / "o.tsv"))
    assert [d["reason"] for d in _dead(tmp_path)] == ["earlier", "wrong_column_count"]


def _idle_on_input(pid: int) -> bool:
    """The process's main thread is blocked in select()/poll() (Linux: its ``wchan``), i.e. idle on its input.
    (A stop that comes while the batch before is still in hand is another case: replay() then leaves the reader
    at `if stop: break`, and the partial record it read is neither written nor dead-lettered.) True where /proc
    has no ``wchan``."""
    try:
        wchan = Path(f"/proc/{pid}/wchan").read_text(encoding="ascii", errors="replace")
    except OSError:
        return True
    return "poll" in wchan or "select" in wchan


def test_sigterm_stops_a_replay_waiting_on_an_idle_stdin(tmp_path: Path) -> None:
    """With stdin open but silent, SIGTERM still ends the run promptly: complete lines are written,
    the record cut short is counted as `partial_record_at_stop` (kept in the dead-letter file), exit 0."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("state_dir: state\ndead_letter_file: dead.jsonl\n")
    out = tmp_path / "out.tsv"
    proc = subprocess.Popen(
        [QUERYLOG, "replay", "--config", str(cfg), "-", "-o", str(out), "--no-progress"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=cli_env(),
    )
    assert proc.stdin is not None
    try:
        proc.stdin.write(HEADER + GOOD[0] + b"3\tcut sho")
        proc.stdin.flush()
        # it wrote the complete line out, and then sits in select() on stdin (the partial record read)
        wait_until(
            lambda: out.exists() and out.read_bytes() == HEADER + GOOD[0] and _idle_on_input(proc.pid),
            what="the replay to write the complete line and wait for input",
            timeout=120,
            abort=exited(proc),
        )
        assert proc.poll() is None, "still waiting for input"
        proc.send_signal(signal.SIGTERM)
        returncode = proc.wait(timeout=10)
        err = proc.stderr.read().decode() if proc.stderr else ""
    finally:
        proc.kill()
        proc.stdin.close()
    assert returncode == 0, err[-1000:]
    assert out.read_bytes() == HEADER + GOOD[0]
    assert [(d["reason"], d["line"]) for d in _dead(tmp_path)] == [("partial_record_at_stop", 3)]
    assert err.strip().splitlines()[-1].endswith("(interrupted)")


def test_a_second_replay_on_the_same_state_reports_restored_events_and_never_negative_drops(
    tmp_path: Path, write_config: Callable[..., Path]
) -> None:
    """Events held by a first run are restored by the second and counted as restored (issue 11, defect 9):
    `dropped` stays >= 0 and the summary says how many came from where."""
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(json.dumps({"AnonID": str(i % 7), "Query": f"q {i}", "cat": "Arts"}) + "\n" for i in range(23)),
        encoding="utf-8",
    )
    cfg = load_config(write_config("filters:\n  - category_buffer: {k: 5, category_field: cat}\n"))
    first = replay(cfg, str(src), str(tmp_path / "out1.jsonl"), seed=1, prescan=False)
    assert first.events_held > 0 and first.events_restored == 0
    second = replay(cfg, str(src), str(tmp_path / "out2.jsonl"), seed=1, prescan=False)
    assert second.events_restored == first.events_held
    assert second.events_dropped == 0
    assert f"restored={first.events_held} (held by an earlier run, from {cfg.state_dir})" in second.line()


def test_state_dir_and_fresh_state_keep_archives_apart(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """`--fresh-state` starts from an empty state store (nothing restored) and `--state-dir` gives a run its
    own state folder (issue 11, defect 10)."""
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(json.dumps({"AnonID": str(i % 7), "Query": f"q {i}", "cat": "Arts"}) + "\n" for i in range(23)),
        encoding="utf-8",
    )
    config = write_config("filters:\n  - category_buffer: {k: 5, category_field: cat}\n")

    def run(*extra: str) -> str:
        out = subprocess.run(
            [
                QUERYLOG,
                "replay",
                "--config",
                str(config),
                str(src),
                "-o",
                str(tmp_path / "out.jsonl"),
                "--no-prescan",
                *extra,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert out.returncode == 0, out.stderr
        return out.stderr.strip().splitlines()[-1]

    assert "restored=" not in run()
    assert "restored=" in run()  # the same state: the first run's held events come back
    assert "restored=" not in run("--fresh-state")
    assert "restored=" not in run("--state-dir", str(tmp_path / "other"))
    assert (tmp_path / "other" / "querylog.db").exists()


@pytest.mark.parametrize(
    ("damage", "words"),
    [(b"", "is empty (0 bytes)"), (b"this is not an sqlite database at all" * 100, "is not a usable state database")],
)
def test_a_damaged_state_database_is_a_clear_error_never_a_silent_reset(
    tmp_path: Path, write_config: Callable[..., Path], damage: bytes, words: str
) -> None:
    """A state database truncated to 0 bytes or overwritten is refused with one line naming the file and exit
    code 3 (no traceback, no silent reset); `--reset-state` is the operator's explicit way out (issue 11, 8)."""
    src = tmp_path / "in.tsv"
    src.write_text("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n1\tweather\t\t\t\n", encoding="utf-8")
    config = write_config("filters: []\n")
    state = tmp_path / "state"
    state.mkdir()
    (state / "querylog.db").write_bytes(damage)
    cmd = [QUERYLOG, "replay", "--config", str(config), str(src), "-o", str(tmp_path / "out.tsv")]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    assert run.returncode == 3
    assert "Traceback" not in run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert last.startswith(f"state database {state / 'querylog.db'} {words}") and "--reset-state" in last
    assert (state / "querylog.db").read_bytes() == damage  # untouched
    ok = subprocess.run([*cmd, "--reset-state"], capture_output=True, text=True, timeout=60)
    assert ok.returncode == 0, ok.stderr


def test_a_full_output_disk_names_the_output_file(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """Writing the output fails with ENOSPC (/dev/full): the error names the output, not the input, and exits 2
    without a traceback (issue 11, defect 18)."""
    if not Path("/dev/full").exists():
        pytest.skip("no /dev/full here")
    src = tmp_path / "in.tsv"
    src.write_text("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n1\tweather\t\t\t\n", encoding="utf-8")
    run = subprocess.run(
        [QUERYLOG, "replay", "--config", str(write_config("filters: []\n")), str(src), "-o", "/dev/full"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith("/dev/full: No space left on device")


def test_a_role_column_the_schema_lacks_is_a_located_config_error(
    tmp_path: Path, write_config: Callable[..., Path]
) -> None:
    """`header: false` with columns that miss a role's column: FILE:LINE: schema.roles, exit 2, no traceback."""
    src = tmp_path / "in.tsv"
    src.write_text("1\tweather\n", encoding="utf-8")
    config = write_config("schema:\n  header: false\n  columns: [a, b]\n  roles: {user: a, query: b}\nfilters: []\n")
    run = subprocess.run(
        [QUERYLOG, "replay", "--config", str(config), str(src), "-o", str(tmp_path / "out.tsv")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert run.stderr.strip().splitlines()[-1].startswith(f"{config}:")
    assert "schema.roles" in run.stderr and "time=QueryTime" in run.stderr


def test_the_summary_says_where_the_dead_letters_went(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """A run with dead letters names the dead-letter file in its summary line (issue 11, defect 19)."""
    src = tmp_path / "in.tsv"
    src.write_text("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n1\tweather\t\t\t\nbad line\n", encoding="utf-8")
    config = write_config("filters: []\n")
    run = subprocess.run(
        [QUERYLOG, "replay", "--config", str(config), str(src), "-o", str(tmp_path / "out.tsv")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert f"dead_letter_file={tmp_path / 'state' / 'dead-letter.jsonl'}" in run.stderr.strip().splitlines()[-1]


def test_replay_from_a_pipe_streams_each_batch_out(tmp_path: Path, write_config: Callable[..., Path]) -> None:
    """`replay -` behind a pipe writes what it read at once, not at EOF (issue 11, defect 17)."""
    config = write_config("filters: []\n")
    proc = subprocess.Popen(
        [QUERYLOG, "replay", "--config", str(config), "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n1\tweather\t\t\t\n")
        proc.stdin.flush()
        got: list[str] = []
        reader = threading.Thread(target=lambda: got.extend([proc.stdout.readline(), proc.stdout.readline()]))
        reader.start()
        reader.join(timeout=20)
        assert got == ["AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n", "1\tweather\t\t\t\n"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
