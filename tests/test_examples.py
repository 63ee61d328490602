"""The pipeline examples (config/examples/*/querylog.yaml) load and build as `check-config` does."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from helpers import QUERYLOG, ROOT

EXAMPLES = sorted((ROOT / "config" / "examples").glob("*/querylog.yaml"))


def test_there_is_an_example_per_setup_the_readme_names() -> None:
    assert {p.parent.name for p in EXAMPLES} == {"fluent-bit", "fluentd", "vector", "clickhouse"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_example_config_checks(path: Path) -> None:
    env = {**os.environ, "QUERYLOG_HMAC_KEY": "an-example-key-of-enough-bytes", "FORWARD_SHARED_KEY": "an-example-shared-key-0123"}
    run = subprocess.run([QUERYLOG, "check-config", str(path)], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr
