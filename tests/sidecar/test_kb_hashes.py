"""`kb build` and `kb info` name their hashes for what they are, and the same hash has the same name in both."""

from __future__ import annotations

import hashlib
import json
import re

import pytest
from click.testing import CliRunner
from helpers.kb import kb_file

from knowledge import build as kb_build
from sidecar.cli import main


def test_build_and_info_agree_on_the_file_sha256(monkeypatch: pytest.MonkeyPatch) -> None:
    """`kb info` gives the file's sha256 (what `sha256sum` prints) as file_sha256 and the checksum in the KB's
    header as payload_sha256; `kb build` and `kb build --if-missing` print the file's under the name file sha256."""
    path = kb_file()
    data = path.read_bytes()
    file_sha = hashlib.sha256(data).hexdigest()
    monkeypatch.setattr(
        kb_build,
        "build",
        lambda p, categories=None: kb_build.BuildReport(p, 0.1, len(data), file_sha, {"concepts": 1}),
    )
    runner = CliRunner()
    info = runner.invoke(main, ["kb", "info", "--kb", str(path)])
    assert info.exit_code == 0, info.output
    shown = json.loads(info.output)
    assert shown["file_sha256"] == file_sha
    assert shown["payload_sha256"] == hashlib.sha256(data[37:]).hexdigest() != file_sha
    assert "sha256" not in shown  # no bare name that could mean either
    built = runner.invoke(main, ["kb", "build", "--kb", str(path)])
    current = runner.invoke(main, ["kb", "build", "--if-missing", "--kb", str(path)])
    for result in (built, current):
        assert result.exit_code == 0, result.output
        (prefix,) = re.findall(r"file sha256 ([0-9a-f]{16})", result.output)
        assert file_sha.startswith(prefix)
