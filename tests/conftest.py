"""Shared fixtures: temporary configs, a test HMAC key, a generated log."""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from sidecar.generate import GenerateStats, generate_log

ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = ROOT / ".." / "shared" / "data"
QUERYLOG = str(Path(sys.executable).with_name("querylog"))
TEST_KEY_ENV = "QUERYLOG_TEST_HMAC_KEY"
TEST_KEY = "test-key-not-secret-0123456789abcdef"


@pytest.fixture
def hmac_key(monkeypatch: pytest.MonkeyPatch) -> str:
    """Sets the test HMAC key in the environment; returns the variable's name."""
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    return TEST_KEY_ENV


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[str], Path]:
    """Write a config file (YAML body) in tmp_path with its state in tmp_path/state."""
    counter = [0]

    def write(body: str, name: str | None = None) -> Path:
        counter[0] += 1
        path = tmp_path / (name or f"config{counter[0]}.yaml")
        text = body if "state_dir:" in body else f"state_dir: state\n{body}"
        path.write_text(text, encoding="utf-8")
        return path

    return write


@dataclass(frozen=True)
class GeneratedLog:
    path: Path
    text: str
    stats: GenerateStats


@pytest.fixture(scope="session")
def generated_log(tmp_path_factory: pytest.TempPathFactory) -> GeneratedLog:
    """A generated AOL-format log of 400 users with planted identifiers (seed 7)."""
    buf = io.StringIO()
    stats = generate_log(400, 7, buf)
    path = tmp_path_factory.mktemp("generated") / "log.tsv"
    path.write_text(buf.getvalue(), encoding="utf-8")
    return GeneratedLog(path, buf.getvalue(), stats)


def cli_env(**extra: str) -> dict[str, str]:
    """Environment for a `querylog` subprocess."""
    env = dict(os.environ)
    env.update(extra)
    return env
