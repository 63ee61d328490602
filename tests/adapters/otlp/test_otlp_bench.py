"""`querylog bench otlp` end to end on a few thousand records: both clients (the SDK's exporter, and the light
client keeping requests in flight) have every record acknowledged and in the file, and the CPU lines are printed.
Benchmarks never assert a speed."""

from __future__ import annotations

import re
import subprocess

import pytest
from helpers import QUERYLOG


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_bench_otlp_runs_both_clients_and_prints_their_cpu(protocol: str) -> None:
    args = [QUERYLOG, "bench", "otlp", "--events", "3000", "--batch", "250", "--protocol", protocol]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = proc.stdout
    titles = re.findall(r"otlp \w+ \((sdk|encoded) client\) -> passthrough -> file", out)
    assert titles == ["sdk", "encoded"], out
    acked = re.findall(r"client-acknowledged :\s+([\d,]+) events", out)
    received = re.findall(r"downstream-received :\s+([\d,]+) events", out)
    assert acked == received == ["3,000", "3,000"], out
    cpu = re.findall(r"CPU: sidecar [\d.]+ s = [\d.]+ us/event .*client [\d.]+ s = [\d.]+ us/event; load average", out)
    assert len(cpu) == 2, out
    assert "client errors" not in out
    assert re.search(r"otlp fast path \(adapters/otlp/scan.py\): (compiled|not compiled)", out), out
