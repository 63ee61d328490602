"""`querylog microaggregate` logs as every other command does: JSON lines to a stderr that is not a terminal."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from helpers import QUERYLOG
from helpers.microaggregate import HEADER


def test_microaggregate_logs_json_to_a_non_terminal(tmp_path: Path) -> None:
    """The odp method logs its uncategorised count: on a piped stderr that line is one JSON object, like the
    logs of serve or replay (not the console format meant for a terminal)."""
    src = tmp_path / "log.tsv"
    rows = [f"{u}\t{q}\t2006-03-01 10:00:0{i}\t\t" for i, (u, q) in enumerate([("1", "weather"), ("2", "football")])]
    rows += [f"{u}\t{q}\t2006-03-01 10:00:0{i + 2}\t\t" for i, (u, q) in enumerate([("3", "zzqx"), ("4", "hotels")])]
    src.write_text("\n".join([HEADER, *rows]) + "\n", encoding="utf-8")
    result = subprocess.run(
        [QUERYLOG, "microaggregate", str(src), "-k", "2", "--method", "odp", "--seed", "1", "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    logged = [line for line in result.stderr.splitlines() if "queries_uncategorised" in line]
    assert logged, result.stderr
    for line in logged:
        event = json.loads(line)
        assert event["event"] == "queries_uncategorised" and "timestamp" in event
