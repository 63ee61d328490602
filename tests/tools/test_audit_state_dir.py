"""`audit` and `profiles export` take --state-dir (issue 22 item 7): each archive has its own state folder, and
`audit -c CONFIG` reads the config's state folder unless --state-dir names another."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from helpers import ROOT
from helpers.kb import kb_file

from sidecar.cli import main


def kanon_config(tmp: Path) -> Path:
    """config/k-anonymity.yaml with its state_dir in tmp (a folder no run below uses)."""
    config = tmp / "kanon.yaml"
    text = (ROOT / "config" / "k-anonymity.yaml").read_text(encoding="utf-8")
    config.write_text(re.sub(r"(?m)^state_dir:.*$", f"state_dir: {tmp / 'config-state'}", text), encoding="utf-8")
    return config


def test_audit_reads_held_events_from_the_state_dir_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A replay into --state-dir archive holds some events; `audit -c CONFIG --state-dir archive` reads that count
    (equal to replay's); without --state-dir it reads the config's own folder (no database there)."""
    from sidecar.tools.audit import report

    monkeypatch.setattr(report, "classifier_paths", lambda: lambda qs: [None] * len(qs))  # the held count only
    config = kanon_config(tmp_path)
    src, out, archive = tmp_path / "gen.tsv", tmp_path / "out.tsv", tmp_path / "archive-state"
    runner = CliRunner()
    assert runner.invoke(main, ["generate", "-n", "20", "-o", str(src)]).exit_code == 0
    res = runner.invoke(
        main, ["replay", "-c", str(config), str(src), "-o", str(out), "--seed", "1", "--state-dir", str(archive)]
    )
    assert res.exit_code == 0, res.output
    held = int(re.search(r"\bheld=(\d+)", res.output).group(1))  # type: ignore[union-attr]
    assert held > 0
    args = ["audit", "--original", str(src), "--protected", str(out), "-c", str(config), "--json"]
    res = runner.invoke(main, [*args, "--state-dir", str(archive)])
    assert res.exit_code == 0, res.output
    state = json.loads(res.output)["events"]["held_in_state"]
    assert state["held_events"] == held and state["database"] == str(archive.resolve() / "querylog.db")
    res = runner.invoke(main, args)
    assert res.exit_code == 0, res.output
    state = json.loads(res.output)["events"]["held_in_state"]
    assert state["exists"] is False and "held_events" not in state
    assert state["database"].startswith(str(tmp_path / "config-state"))


def test_audit_state_dir_needs_a_config(tmp_path: Path) -> None:
    """--state-dir alone is refused with exit 2 (the chain says what the state holds)."""
    log = tmp_path / "l.tsv"
    log.write_text("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n1\tq\tt\t\t\n", encoding="utf-8")
    res = CliRunner().invoke(
        main, ["audit", "--original", str(log), "--protected", str(log), "--state-dir", str(tmp_path)]
    )
    assert res.exit_code == 2 and "--state-dir needs --config" in res.output


@pytest.fixture
def dp_config(tmp_path: Path) -> Path:
    """config/dp.yaml as shipped, its state in tmp_path/config-state, the session's KB."""
    data = yaml.safe_load((ROOT / "config" / "dp.yaml").read_text(encoding="utf-8"))
    data["state_dir"] = str(tmp_path / "config-state")
    for item in data["filters"]:
        ((name, options),) = item.items()
        if name in ("classify", "dp_replace"):
            item[name] = {**(options or {}), "kb_path": str(kb_file()), "rebuild": False}
    path = tmp_path / "dp.yaml"
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_audit_of_a_dp_chain_reads_its_ledger_from_the_state(tmp_path: Path, dp_config: Path) -> None:
    """A dp_replace chain replayed into --state-dir archive: `audit -c CONFIG --state-dir archive` reads that
    ledger (5 events, 5 released); with the config's own folder empty, `audit -c CONFIG` says there is no state
    database there (exit 2) rather than judging a DP release by the attacks."""
    log, out, archive = tmp_path / "log.tsv", tmp_path / "out.tsv", tmp_path / "archive-state"
    log.write_text(
        "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"
        + "".join(f"{u}\tflu symptoms\t2006-03-01 00:00:0{u}\t\t\n" for u in range(1, 6)),
        encoding="utf-8",
    )
    runner = CliRunner()
    res = runner.invoke(main, ["replay", "-c", str(dp_config), str(log), "-o", str(out), "--state-dir", str(archive)])
    assert res.exit_code == 0, res.output
    args = ["audit", "--original", str(log), "--protected", str(out), "-c", str(dp_config), "--json"]
    res = runner.invoke(main, [*args, "--state-dir", str(archive)])
    assert res.exit_code == 0, res.output
    dp = json.loads(res.output)["dp"]
    assert dp["events"] == 5 and dp["outcomes"]["replaced"] == 5 and dp["user_windows_over_budget"] == 0
    res = runner.invoke(main, args)
    assert res.exit_code == 2 and "no state database" in res.output and "config-state" in res.output


def test_profiles_export_reads_the_state_dir_given(tmp_path: Path) -> None:
    """`profiles export -c CONFIG --state-dir archive` exports the profiles the run into archive built; without it
    the config's folder (never written) has nothing: exit 2."""
    config = tmp_path / "profile.yaml"
    config.write_text(
        f"state_dir: {tmp_path / 'config-state'}\nschema: {{format: tsv, header: true}}\n"
        "filters:\n  - classify: {kb_path: " + str(kb_file()) + ", rebuild: false}\n  - profile: {}\n",
        encoding="utf-8",
    )
    log, out, archive = tmp_path / "log.tsv", tmp_path / "out.tsv", tmp_path / "archive-state"
    log.write_text(
        "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n1\tflu symptoms\tt\t\t\n2\tcheap flights\tt\t\t\n",
        encoding="utf-8",
    )
    runner = CliRunner()
    res = runner.invoke(main, ["replay", "-c", str(config), str(log), "-o", str(out), "--state-dir", str(archive)])
    assert res.exit_code == 0, res.output
    csv = tmp_path / "profiles.csv"
    args = ["profiles", "export", "-c", str(config), "--format", "csv", "-o", str(csv)]
    res = runner.invoke(main, [*args, "--state-dir", str(archive)])
    assert res.exit_code == 0, res.output
    rows = csv.read_text(encoding="utf-8").splitlines()
    assert rows[0] == "user,category,count,weight" and {r.split(",")[0] for r in rows[1:]} == {"1", "2"}
    res = runner.invoke(main, args)
    assert res.exit_code == 2 and "no state folder" in res.output
