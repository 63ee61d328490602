"""Shared by the scale tests: a generated log and configs with their state in a temporary folder."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path

import pytest

from sidecar.tools.generate.synthetic import generate_log


@pytest.fixture(scope="session")
def log_text() -> str:
    """A generated AOL-format log, 200 users (about 10,000 lines), seed 11."""
    buf = io.StringIO()
    generate_log(200, 11, buf)
    return buf.getvalue()


@pytest.fixture
def log_file(tmp_path: Path, log_text: str) -> Path:
    path = tmp_path / "in.tsv"
    path.write_text(log_text, encoding="utf-8")
    return path


@pytest.fixture
def config(tmp_path: Path) -> Callable[[str], Path]:
    """Writes a config (YAML body) to tmp_path/c.yaml; ``state_dir: state`` puts its state in tmp_path/state."""

    def write(body: str) -> Path:
        path = tmp_path / "c.yaml"
        path.write_text(body, encoding="utf-8")
        return path

    return write
