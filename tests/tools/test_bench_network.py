"""`querylog bench forward|vector|http` run end to end on a few thousand events and print their figures.

Benchmarks never assert a speed: these check that every event sent was acknowledged and reached the
downstream, and that the figures are printed.
"""

from __future__ import annotations

import re
import subprocess

import pytest
from helpers import QUERYLOG


def _bench(*args: str) -> str:
    proc = subprocess.run([QUERYLOG, "bench", *args], capture_output=True, text=True, timeout=180, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _events(out: str, label: str) -> int:
    m = re.search(rf"{label}\s*:\s*([\d,]+) events in\s+[\d.]+ s =\s+[\d,]+ events/s", out)
    assert m, out
    return int(m.group(1).replace(",", ""))


@pytest.mark.slow
@pytest.mark.parametrize(
    "args",
    [
        ["forward", "--events", "3000", "--batch", "250"],
        ["vector", "--events", "3000", "--batch", "250"],
        ["http", "--events", "3000", "--batch", "250"],
    ],
    ids=["forward", "vector", "http"],
)
def test_network_bench_delivers_every_event(args: list[str]) -> None:
    """Through the passthrough chain every event is acknowledged and received downstream; RSS is printed."""
    out = _bench(*args)
    assert "3,000 events in batches of 250" in out
    assert _events(out, "client-acknowledged") == 3000
    assert _events(out, "downstream-received") == 3000
    assert re.search(r"peak RSS: sidecar [\d.]+ MiB, client [\d.]+ MiB", out), out
    assert "client errors" not in out
