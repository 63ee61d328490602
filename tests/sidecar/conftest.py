"""Fixtures of the commit-group tests (``test_commit_group*.py``), which make ``first_pass_in_place`` autouse
with ``pytestmark = pytest.mark.usefixtures("first_pass_in_place")``."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.commitgroups import write_input

from sidecar import prescan


@pytest.fixture
def first_pass_in_place(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first pass before the real one, so that groups commit at fixed batches (a forked first pass holds the
    commits back until its result is in, whenever that is: the tests that fork make that moment fixed)."""
    monkeypatch.setattr(prescan, "BACKGROUND", False)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    """The generated JSONL input (:func:`helpers.commitgroups.write_input`)."""
    path = tmp_path / "in.jsonl"
    write_input(path)
    return path
