"""No log line ever quotes a query, a user id or a record value (issue 2, item 10).

A generated log with planted identifiers (names, phones, emails, SSNs, addresses,
ZIP codes, dates of birth), plus bad records that carry planted values, is
replayed through a chain of every registered filter that can run with default
options (pseudonymize with a key from the environment, drop with a rule). Every
captured structlog event, every stdlib log record and the stderr of a
`querylog replay` subprocess must be free of those values.
"""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
from pathlib import Path

import pytest
import structlog
import yaml
from helpers import (
    QUERYLOG,
    TEST_KEY,
    TEST_KEY_ENV,
    GeneratedLog,
    cli_env,
    default_filter_entries,
    find_leaks,
    leak_needles,
)

from sidecar.config import load_config
from sidecar.drive import replay

BAD_REASONS = {"wrong_column_count", "invalid_utf8", "oversized_record"}


def _bad_input(log: GeneratedLog, dest: Path) -> bytes:
    """The generated log with bad records (each quoting planted values) spliced in after line 50, and a
    record with a blank query (valid: it runs through every filter, which must not log its values)."""
    planted = log.stats.planted_values
    lines = log.text.encode("utf-8").split(b"\n")
    uid = lines[1].split(b"\t")[0]
    p0, p1 = planted[0].encode(), planted[1].encode()
    bad = [
        uid + b"\t" + p0 + b"\t2006-03-01 10:00:00",  # wrong column count
        uid + b"\t" + p1 + b" \xff\xfe\t2006-03-01 10:00:00\t\t",  # invalid UTF-8
        uid + b"\t \t2006-03-01 10:00:00\t1\thttp://www." + p0.replace(b" ", b"") + b".com",  # blank query: valid
        uid + b"\t" + p1 + b" " + b"x" * 3000 + b"\t2006-03-01 10:00:00\t\t",  # oversized (limit 1024)
    ]
    data = b"\n".join(lines[:50] + bad + lines[50:])
    dest.write_bytes(data)
    return data


def _chain_config(tmp: Path, log_level: str = "debug") -> Path:
    entries, skipped = default_filter_entries()
    names = [next(iter(e)) for e in entries]
    assert {"pseudonymize", "truncate_url", "drop"} <= set(names), skipped
    # pseudonymize runs last so every other filter sees (and must not log) the raw user ids
    entries.sort(key=lambda e: next(iter(e)) == "pseudonymize")
    cfg = {
        "state_dir": str(tmp / "state"),
        "dead_letter_file": "dead.jsonl",
        "limits": {"max_record_bytes": 1024},
        "logging": {"level": log_level, "format": "json"},
        "filters": entries,
    }
    path = tmp / "chain.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def test_in_process_replay_logs_no_values(
    generated_log: GeneratedLog,
    tmp_path: Path,
    hmac_key: str,
    debug_structlog: None,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """structlog events and stdlib log records of a full replay hold counts, names and reasons only."""
    src = tmp_path / "in.tsv"
    _bad_input(generated_log, src)
    cfg = load_config(_chain_config(tmp_path))
    caplog.set_level(logging.DEBUG)
    with structlog.testing.capture_logs() as events:
        summary = replay(cfg, str(src), str(tmp_path / "out.tsv"), seed=1)
    assert summary.records_in == generated_log.stats.lines + len(BAD_REASONS) + 1  # + the blank-query record
    assert summary.dead_lettered == len(BAD_REASONS)
    assert events, "the replay logs something"
    needles = leak_needles(generated_log.text, generated_log.stats.planted_values)
    assert find_leaks(events, needles) == []
    records = [{"msg": r.getMessage(), "args": [str(a) for a in (r.args or ())]} for r in caplog.records]
    assert find_leaks(records, needles) == []
    # dead letters are logged by reason, once per reason, without the record
    dead = [e for e in events if e.get("event") == "record_dead_lettered"]
    assert {e["reason"] for e in dead} == BAD_REASONS
    # ... while the dead-letter file (mode 0600) keeps the records for the operator
    dl = tmp_path / "state" / "dead.jsonl"
    assert stat.S_IMODE(dl.stat().st_mode) == 0o600
    entries = [json.loads(line) for line in dl.read_text(encoding="utf-8").splitlines()]
    assert {e["reason"] for e in entries} == BAD_REASONS
    # the protected output holds no raw user id and no planted value carried by a dropped or bad record
    out = (tmp_path / "out.tsv").read_text(encoding="utf-8")
    out_users = {line.split("\t")[0] for line in out.split("\n")[1:] if line}
    assert not out_users & {line.split("\t")[0] for line in generated_log.text.split("\n")[1:] if line}


def test_replay_subprocess_stderr_has_no_values(generated_log: GeneratedLog, tmp_path: Path) -> None:
    """`querylog replay` at debug level: every stderr line (JSON logs and the summary) is value-free."""
    src = tmp_path / "in.tsv"
    _bad_input(generated_log, src)
    cfg = _chain_config(tmp_path)
    env = cli_env(**{TEST_KEY_ENV: TEST_KEY})
    run = subprocess.run(
        [QUERYLOG, "replay", "--config", str(cfg), str(src), "-o", str(tmp_path / "out.tsv"), "--seed", "1"],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    needles = leak_needles(generated_log.text, generated_log.stats.planted_values)
    json_events, plain = [], []
    for line in run.stderr.splitlines():
        if line.startswith("{"):
            json_events.append(json.loads(line))
        elif line.strip():
            plain.append(line)
    assert json_events, "structlog writes JSON lines when stderr is not a terminal"
    assert {e["reason"] for e in json_events if e.get("event") == "record_dead_lettered"} == BAD_REASONS
    assert find_leaks(json_events, needles) == []
    # the summary line is made of counts: check it for every value that is not a plain number
    exact, substrings, _ = needles
    assert len(plain) == 1 and plain[0].startswith("records in=")
    words = set(plain[0].replace("=", " ").split())
    assert not {w for w in words if not w.replace(",", "").replace(".", "").isdigit()} & exact
    assert not [s for s in substrings if s in plain[0]]


def test_config_errors_do_not_quote_secrets(tmp_path: Path) -> None:
    """A missing key names the variable, never a value; check-config exits 2."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"state_dir: {tmp_path / 's'}\nfilters:\n  - pseudonymize: {{key_env: QUERYLOG_UNSET_VAR}}\n")
    env = {k: v for k, v in os.environ.items() if k != "QUERYLOG_UNSET_VAR"}
    run = subprocess.run([QUERYLOG, "check-config", str(cfg)], capture_output=True, text=True, env=env)
    assert run.returncode == 2
    assert run.stderr.strip() == (
        f"{cfg}:3: filters[0].pseudonymize.key_env: environment variable QUERYLOG_UNSET_VAR is not set or empty "
        "(HMAC key)"
    )
