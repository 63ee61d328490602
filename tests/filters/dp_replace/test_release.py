"""config/dp.yaml end to end (check-config, replay with its first pass), the audit's DP section, the utility
evaluation (paper 004 Figures 2-4) and the benchmark command, on generated logs."""

from __future__ import annotations

import json
import signal
import subprocess
from fractions import Fraction
from pathlib import Path

import pytest
import structlog
import yaml
from click.testing import CliRunner
from helpers import QUERYLOG, ROOT, GeneratedLog, exited, wait_until
from helpers.kb import kb_file

from sidecar.cli import main


@pytest.fixture
def dp_config(tmp_path: Path) -> Path:
    """config/dp.yaml as shipped, with its state in tmp_path and the session's KB."""
    data = yaml.safe_load((ROOT / "config" / "dp.yaml").read_text(encoding="utf-8"))
    data["state_dir"] = str(tmp_path / "state")
    for item in data["filters"]:
        ((name, options),) = item.items()
        if name in ("classify", "dp_replace"):
            item[name] = {**(options or {}), "kb_path": str(kb_file()), "rebuild": False}
    path = tmp_path / "dp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_shipped_config_checks() -> None:
    """`querylog check-config config/dp.yaml` passes: scrub -> classify -> dp_replace, nothing written."""
    state = ROOT / "config" / ".querylog-state" / "dp"
    existed = state.exists()
    res = CliRunner().invoke(main, ["check-config", str(ROOT / "config" / "dp.yaml")])
    assert res.exit_code == 0, res.output
    assert "hipaa_scrub -> classify -> dp_replace" in res.output
    assert state.exists() == existed


def test_replay_then_audit(tmp_path: Path, dp_config: Path, generated_log: GeneratedLog) -> None:
    """Replaying a generated AOL log with config/dp.yaml (first pass on by default) releases every user within
    epsilon = 1 exactly (the ledger), keeps the header and columns, empties every clicked URL; the audit reads the
    ledger: shares of replaced / suppressed / dropped add up to the events, nobody over budget, JSON and HTML."""
    out = tmp_path / "out.tsv"
    res = CliRunner().invoke(main, ["replay", "-c", str(dp_config), str(generated_log.path), "-o", str(out)])
    assert res.exit_code == 0, res.output
    lines = out.read_text(encoding="utf-8").split("\n")
    assert lines[0] == generated_log.text.split("\n", 1)[0]
    rows = [line.split("\t") for line in lines[1:] if line]
    assert rows and all(len(r) == 5 and r[4] == "" for r in rows)
    page = tmp_path / "audit.html"
    res = CliRunner().invoke(
        main,
        [
            "audit",
            "--original",
            str(generated_log.path),
            "--protected",
            str(out),
            "--dp-state",
            str(tmp_path / "state"),
            "--json",
            "--html",
            str(page),
        ],
    )
    assert res.exit_code == 0, res.output
    dp = json.loads(res.output)["dp"]
    assert dp["epsilon"] == 1.0 and dp["budget"] == "batch"
    assert dp["user_windows_over_budget"] == 0 and dp["epsilon_spent_per_user"]["max"] == 1.0
    assert sum(dp["outcomes"].values()) == dp["events"] == len(generated_log.text.strip().split("\n")) - 1
    assert dp["outcomes"]["replaced"] == len(rows)
    assert dp["outcomes"]["suppressed"] == 0 and dp["outcomes"]["unprotected"] == 0
    text = page.read_text(encoding="utf-8")
    assert "Epsilon spent per user (dp_replace ledger)" in text  # the DP plot's caption (dp.plot)
    assert "Suppressed (budget spent)" in text and "Dropped (no concept)" in text  # dp.html_facts


def test_replaying_the_same_users_again_releases_nothing(tmp_path: Path, dp_config: Path) -> None:
    """The ledger survives the process: a second replay of the same users into the same state finds their budget
    spent, and everything with a concept is suppressed (counted in the ledger)."""
    log = tmp_path / "log.tsv"
    log.write_text(
        "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"
        + "".join(f"{u}\tflu symptoms\t2006-03-01 00:00:0{u}\t\t\n" for u in range(1, 6)),
        encoding="utf-8",
    )
    for run in (1, 2):
        out = tmp_path / f"out{run}.tsv"
        empty_ok = ["--allow-empty"] if run == 2 else []  # the second run releases nothing (else exit 5)
        res = CliRunner().invoke(main, ["replay", "-c", str(dp_config), str(log), "-o", str(out), *empty_ok])
        assert res.exit_code == 0, res.output
        released = out.read_text(encoding="utf-8").strip().split("\n")[1:]
        assert len(released) == (5 if run == 1 else 0)
    from sidecar.tools.audit.dp import dp_summary

    dp = dp_summary(tmp_path / "state")
    assert dp["outcomes"]["suppressed"] == 5 and dp["user_windows_over_budget"] == 0


def test_evaluation_reproduces_the_shape_of_figures_2_to_4(tmp_path: Path) -> None:
    """`querylog eval dp` on a generated log: D(q)=P gives JSD exactly 0 for SQC1, SQC2 and NSQC and not for
    HBDP; in Setting A with a large per-concept epsilon the semantic criteria beat NSQC and HBDP is the worst;
    the table, JSON, HTML and plots are written."""
    from sidecar.tools.generate.synthetic import generate_log

    log = tmp_path / "gen.tsv"
    with log.open("w", encoding="utf-8") as fh:
        generate_log(300, 3, fh)
    out = tmp_path / "eval"
    res = CliRunner().invoke(
        main,
        [
            *("eval", "dp", str(log), "--runs", "1", "--budget", "query", "--settings", "A,C"),
            *("--epsilons", "1,10", "--out", str(out), "--kb", str(kb_file())),
        ],
    )
    assert res.exit_code == 0, res.output
    result = json.loads((out / "dp-eval.json").read_text(encoding="utf-8"))
    for fig in result["tables"]["query"].values():
        for method in ("SQC1", "SQC2", "NSQC"):
            assert fig["D=P"][method] == [0.0, 0.0]
        assert min(fig["D=P"]["HBDP"]) > 0.1
    a = result["tables"]["query"]["A"]["D>P"]
    assert a["SQC2"][1] < a["NSQC"][1] and a["SQC1"][1] < a["NSQC"][1]
    assert a["HBDP"][1] > max(a["SQC1"][1], a["SQC2"][1], a["NSQC"][1])
    assert (out / "dp-eval-query.png").stat().st_size > 1000 and "Figure 2" in res.output


def test_bench_dp_prints_rates(tmp_path: Path) -> None:
    """`querylog bench dp` runs on a small stream and prints queries/s and the domain size (no values)."""
    args = ["bench", "dp", "--queries", "2000", "--users", "50", "--repeat", "1", "--kb", str(kb_file())]
    old = structlog.get_config()
    try:
        res = CliRunner().invoke(main, args)
    finally:
        structlog.configure(**old)  # the bench sets the process's log level to warning: later tests capture info
    assert res.exit_code == 0, res.output
    assert "82,115 concepts" in res.output and "queries" in res.output and "/s" in res.output


def _stream_config(tmp_path: Path, batch: int = 1000) -> Path:
    """dp_replace alone, stream budget (epsilon 1, 3 concepts per user, one window forever), state in tmp_path."""
    cfg = {
        "state_dir": str(tmp_path / "state"),
        "schema": {"format": "auto", "header": True},
        "limits": {"batch_size": batch},
        "filters": [
            {
                "dp_replace": {
                    "epsilon": 1.0,
                    "budget": "stream",
                    "max_queries": 3,
                    "window_seconds": None,
                    "kb_path": str(kb_file()),
                    "rebuild": False,
                }
            }
        ],
    }
    path = tmp_path / "dp-stream.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    return path


def _ledger_totals(state: Path) -> tuple[int, int, Fraction]:
    """(user-windows over epsilon, concepts charged, largest spending) from dp_ledger.db."""
    import sqlite3

    from filters.dp_replace.budget import LEDGER_FILE, read_ledger

    with sqlite3.connect(state / LEDGER_FILE) as conn:
        _, rows = read_ledger(conn)
    return sum(1 for r in rows if r[2] > 1), sum(r[3] for r in rows), max(r[2] for r in rows)


def test_budget_survives_a_process_restart(tmp_path: Path) -> None:
    """Two `querylog replay` processes on one state: the second finds what the first spent (user 1 has one
    concept left of 3, user 2 none) and releases only that; the ledger never exceeds epsilon."""
    cfg = _stream_config(tmp_path)
    head = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"
    first = (
        head
        + "1\tdogs\t2006-03-01 00:00:01\t\t\n1\tcats\t2006-03-01 00:00:02\t\t\n"
        + "".join(f"2\tflu\t2006-03-01 00:00:0{i}\t\t\n" for i in range(3, 6))
    )
    second = head + "".join(f"{u}\tdogs\t2006-03-01 00:01:0{i}\t\t\n" for i, u in enumerate("1122"))
    released = []
    for n, text in enumerate((first, second)):
        log, out = tmp_path / f"in{n}.tsv", tmp_path / f"out{n}.tsv"
        log.write_text(text, encoding="utf-8")
        proc = subprocess.run([QUERYLOG, "replay", "-c", str(cfg), str(log), "-o", str(out), "--no-progress"])
        assert proc.returncode == 0
        released.append([line.split("\t")[0] for line in out.read_text(encoding="utf-8").splitlines()[1:]])
    assert released == [["1", "1", "2", "2", "2"], ["1"]]
    over, charged, top = _ledger_totals(tmp_path / "state")
    assert over == 0 and charged == 6 and top == 1


def test_kill_9_never_lets_a_user_overspend(tmp_path: Path) -> None:
    """`querylog replay --resume` killed with SIGKILL in the middle of a generated log, then run again to the end:
    every user's spending stays within epsilon (exact), and the concepts charged cover at least every released
    record (charged before release: a kill can waste budget, never release unpaid draws).

    The log (800 users, about 18,000 lines) keeps the run going for about 1.8 s here after its output passes
    2,000 bytes and the output is polled every 2 ms: a machine several times faster still leaves a window
    hundreds of polls wide, and a run that ends first fails the test at once. (`replay` refuses a FIFO as its
    input, so the window cannot be held open by a pipe the test feeds.)"""
    from sidecar.tools.generate.synthetic import generate_log

    cfg = _stream_config(tmp_path, batch=50)
    log, out = tmp_path / "in.tsv", tmp_path / "out.tsv"
    with log.open("w", encoding="utf-8") as fh:
        generate_log(800, 7, fh)
    cmd = [QUERYLOG, "replay", "-c", str(cfg), str(log), "-o", str(out), "--resume", "--no-progress"]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(
            lambda: out.exists() and out.stat().st_size > 2000,
            what="the replay to write 2,000 bytes",
            timeout=120,
            interval=0.002,
            abort=exited(proc),
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the replay ended before the kill landed"
    assert subprocess.run(cmd, stdout=subprocess.DEVNULL, timeout=300).returncode == 0
    rows = out.read_text(encoding="utf-8").splitlines()[1:]
    over, charged, top = _ledger_totals(tmp_path / "state")
    assert over == 0 and top <= 1
    assert charged >= len(rows) > 100
