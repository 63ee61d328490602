"""Shared fixtures: temporary configs, a test HMAC key, a generated log (helpers live in ``helpers``)."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import structlog
from helpers import TEST_KEY, TEST_KEY_ENV, GeneratedLog

from sidecar.tools.generate.synthetic import generate_log


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


@pytest.fixture
def debug_structlog() -> Iterator[None]:
    """structlog at debug level for one test (capture_logs keeps the configured level filter)."""
    import logging

    old = structlog.get_config()
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG))
    yield
    structlog.configure(**old)


@pytest.fixture(scope="session")
def generated_log(tmp_path_factory: pytest.TempPathFactory) -> GeneratedLog:
    """A generated AOL-format log of 400 users with planted identifiers (seed 7)."""
    buf = io.StringIO()
    stats = generate_log(400, 7, buf)
    path = tmp_path_factory.mktemp("generated") / "log.tsv"
    path.write_text(buf.getvalue(), encoding="utf-8")
    return GeneratedLog(path, buf.getvalue(), stats)
