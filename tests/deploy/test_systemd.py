"""deploy/systemd/querylog.service: reload by SIGHUP, a state directory, a user of its own, a locked-down
sandbox; ``systemd-analyze verify`` finds nothing to say."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
UNIT = ROOT / "deploy" / "systemd" / "querylog.service"


def service() -> dict[str, list[str]]:
    """The [Service] section: every value of each key, in order (systemd keys repeat)."""
    values: dict[str, list[str]] = {}
    section = None
    for line in UNIT.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("["):
            section = line
        elif section == "[Service]":
            key, _, value = line.partition("=")
            values.setdefault(key, []).append(value)
    return values


def test_the_unit_reloads_by_sighup_and_runs_locked_down() -> None:
    """ExecReload sends SIGHUP to the main process; StateDirectory is the config's state folder; a dynamic user;
    ProtectSystem=strict, NoNewPrivileges, PrivateTmp; no capability."""
    unit = service()
    assert unit["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert unit["StateDirectory"] == ["querylog"]
    assert "QUERYLOG_STATE_DIR=/var/lib/querylog" in unit["Environment"]
    assert unit["DynamicUser"] == ["yes"]
    assert unit["ProtectSystem"] == ["strict"]
    assert unit["NoNewPrivileges"] == ["yes"] and unit["PrivateTmp"] == ["yes"]
    assert unit["CapabilityBoundingSet"] == [""]
    (start,) = unit["ExecStart"]
    assert start.split()[1:] == ["serve", "--config", "/etc/querylog/querylog.yaml"]


def test_systemd_analyze_verify_is_clean(tmp_path: Path) -> None:
    """systemd-analyze verify says nothing (no warning either) about a copy of the unit whose querylog is this
    interpreter's (verify checks that every Exec command exists; --root does not apply to a unit file's path)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (Debian package systemd)")
    querylog = shutil.which("querylog", path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    assert querylog is not None
    unit = tmp_path / "querylog.service"
    text = UNIT.read_text(encoding="utf-8")
    binary = "/opt/querylog/bin/querylog"
    assert binary in text
    unit.write_text(text.replace(binary, querylog), encoding="utf-8")
    run = subprocess.run(
        [analyze, "verify", "--man=no", str(unit)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SYSTEMD_LOG_LEVEL": "notice"},
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
