"""``format: access_log`` in a config file: located errors for a bad format string or role, and ``format: auto``
recognising ``combined`` lines (saying so in the log, never a value)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from helpers import QUERYLOG

from sidecar.config import ConfigError, load_config

COMBINED = (
    '203.0.113.9 - - [10/Oct/2000:13:55:36 -0700] "GET /search?q=cheap+flights HTTP/1.1" 200 512 "-" "curl/8"\n'
    '203.0.113.9 - - [10/Oct/2000:13:55:40 -0700] "GET /search?q=flu HTTP/1.1" 200 9 '
    '"http://shop.example/search?q=cheap+flights" "curl/8"\n'
)


@pytest.mark.parametrize(
    ("schema", "key", "line", "words"),
    [
        ("  format: access_log\n  log_format: '$remote_addr$status'\n", "schema.log_format", 3, "adjacent"),
        ("  format: access_log\n  apache_format: '%h %Z'\n", "schema.apache_format", 3, "%Z"),
        ("  format: access_log\n  roles: {user: cookie_sid}\n", "schema.roles.user", 3, "cookie_sid"),
        ("  format: access_log\n  roles: {query: request}\n", "schema.roles.query", 3, "VARIABLE.PARAM"),
    ],
)
def test_a_bad_schema_is_a_located_error(tmp_path: Path, schema: str, key: str, line: int, words: str) -> None:
    path = tmp_path / "q.yaml"
    path.write_text("schema:\n" + schema, encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert (err.value.key, err.value.line) == (key, line)
    assert words in err.value.problem


def test_auto_recognises_combined_lines_and_says_so(tmp_path: Path) -> None:
    log = tmp_path / "access.log"  # .log: the extension says nothing, the first line does
    log.write_text(COMBINED, encoding="utf-8")
    config = tmp_path / "q.yaml"
    config.write_text("state_dir: state\nlogging: {format: json}\nfilters: []\n", encoding="utf-8")
    run = subprocess.run(
        [QUERYLOG, "replay", "--config", str(config), str(log), "-o", str(tmp_path / "out.log")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert (tmp_path / "out.log").read_text(encoding="utf-8") == COMBINED
    events = [json.loads(x) for x in run.stderr.splitlines() if x.startswith("{")]
    detected = [e for e in events if e.get("event") == "input_format_detected"]
    assert [e["format"] for e in detected] == ["access_log"]
    assert "flights" not in run.stderr and "203.0.113.9" not in run.stderr
