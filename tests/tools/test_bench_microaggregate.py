"""``querylog bench microaggregate``: prints one figure line per log, method and worker count."""

from __future__ import annotations

import io
import re

from click.testing import CliRunner

from sidecar.cli import main
from sidecar.tools.generate.synthetic import generate_log


def test_bench_microaggregate_prints_seconds_memory_and_measures_for_a_scaled_log() -> None:
    args = ["bench", "microaggregate", "--users", "40", "--lines-per-user", "30", "--method", "mdav", "--k", "3"]
    res = CliRunner().invoke(main, args)
    assert res.exit_code == 0, res.output
    line = next(x for x in res.output.splitlines() if x.startswith("generated 40 users"))
    lines = int(re.search(r"40 users, ([\d,]+) lines", line).group(1).replace(",", ""))
    expected = generate_log(40, 1, io.StringIO(), lines_per_user=30).lines  # the bench's log: seed 1, scaled
    assert lines == expected != generate_log(40, 1, io.StringIO()).lines
    assert re.search(r"run [\d.]+ s .*peak RSS [\d,]+ MiB; \d+ clusters of 3\.\.[345]", line)
    assert re.search(r"PEL [\d.]+%, ILR [\d.]+%", line)


def test_bench_microaggregate_refuses_an_unknown_method() -> None:
    res = CliRunner().invoke(main, ["bench", "microaggregate", "--users", "10", "--method", "kmeans"])
    assert res.exit_code != 0 and "unknown method" in res.output
