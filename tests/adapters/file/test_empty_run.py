"""Runs that release nothing say why and exit 5 (issue 24 item 18); stdin is sniffed (item 19)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from helpers import QUERYLOG

HEAD = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"


def _config(tmp_path: Path, filters: str = "filters: []\n") -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(f"state_dir: {tmp_path / 'state'}\n{filters}", encoding="utf-8")
    return path


def _run(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([QUERYLOG, *args], input=stdin, capture_output=True, text=True, timeout=300)


class TestEmptyRun:
    def test_every_record_dead_lettered_exits_5_with_reasons_and_cause(self, tmp_path: Path) -> None:
        """JSON lines with other key names under the default roles: the summary counts dead letters by reason,
        one line names the likeliest cause (the schema's roles), exit 5; --allow-empty exits 0."""
        log = tmp_path / "in.jsonl"
        log.write_text("".join(f'{{"uid": "{i}", "text": "q{i}"}}\n' for i in range(20)), encoding="utf-8")
        config = _config(tmp_path)
        run = _run("replay", "-c", str(config), str(log), "-o", str(tmp_path / "out.jsonl"), "--no-progress")
        assert run.returncode == 5, run.stderr[-2000:]
        summary = next(line for line in run.stderr.splitlines() if line.startswith("records in="))
        assert "dead_letter=20 " in summary and "dead_letter_by: missing_" in summary
        last = run.stderr.strip().splitlines()[-1]
        assert last.startswith("replay: nothing released: every record was dead-lettered (20")
        assert "schema.roles" in last and "uid" not in last and "q1" not in last
        again = _run(
            "replay", "-c", str(config), str(log), "-o", str(tmp_path / "out.jsonl"), "--no-progress", "--allow-empty"
        )
        assert again.returncode == 0, again.stderr[-2000:]

    def test_every_event_dropped_names_the_filter_and_reason(self, tmp_path: Path) -> None:
        """A drop rule that matches everything: the summary says `dropped=3` and
        `dropped_by: drop.dropped_rule_0=3`, exit 5."""
        log = tmp_path / "in.tsv"
        log.write_text(HEAD + "".join(f"{u}\tq\t\t\t\n" for u in range(3)), encoding="utf-8")
        config = _config(tmp_path, "filters:\n  - drop:\n      rules:\n        - {role: query, equals: [q]}\n")
        run = _run("replay", "-c", str(config), str(log), "-o", str(tmp_path / "out.tsv"), "--no-progress")
        assert run.returncode == 5, run.stderr[-2000:]
        assert "dropped=3 " in run.stderr and "dropped_by: drop.dropped_rule_0=3" in run.stderr
        assert "every event was dropped (3, mostly drop.dropped_rule_0)" in run.stderr.strip().splitlines()[-1]

    def test_a_run_that_releases_something_exits_0(self, tmp_path: Path) -> None:
        log = tmp_path / "in.tsv"
        log.write_text(HEAD + "1\tq\t\t\t\n", encoding="utf-8")
        run = _run("replay", "-c", str(_config(tmp_path)), str(log), "-o", str(tmp_path / "out.tsv"), "--no-progress")
        assert run.returncode == 0, run.stderr[-2000:]

    def test_filter_of_nothing_but_bad_lines_exits_5(self, tmp_path: Path) -> None:
        run = _run("filter", "-c", str(_config(tmp_path)), stdin='{"uid": "1"}\n{"uid": "2"}\n')
        assert run.returncode == 5, run.stderr[-2000:]
        assert run.stdout == ""


class TestStdinFormat:
    def test_filter_reads_json_lines_from_stdin_under_format_auto(self, tmp_path: Path) -> None:
        """A first line starting with `{` (after whitespace) is JSON lines: delivered byte for byte."""
        text = '  {"AnonID": "1", "Query": "dogs", "QueryTime": "", "ItemRank": null, "ClickURL": null}\n'
        text += '{"AnonID": "2", "Query": "cats", "QueryTime": "", "ItemRank": 1, "ClickURL": "x"}\n'
        run = _run("filter", "-c", str(_config(tmp_path)), stdin=text)
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout == text

    def test_replay_dash_reads_tsv_from_stdin_as_before(self, tmp_path: Path) -> None:
        text = HEAD + "1\tdogs\t\t\t\n"
        run = _run("replay", "-c", str(_config(tmp_path)), "-", "-o", "-", stdin=text)
        assert run.returncode == 0, run.stderr[-2000:]
        assert run.stdout == text

    def test_a_schema_error_says_which_format_was_assumed(self, tmp_path: Path) -> None:
        run = _run("filter", "-c", str(_config(tmp_path)), stdin="a\tb\n1\tx\n")
        assert run.returncode != 0
        assert "format tsv assumed from the first record" in run.stderr
