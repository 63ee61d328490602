"""Cancelled RPCs are counted, and logged at most once per interval with the count (2,000 abandoned streams are
not 2,000 log lines)."""

from __future__ import annotations

import threading
from collections import Counter
from types import SimpleNamespace
from typing import Any

import structlog

from adapters.grpc.service import CANCELLED_LOG_SECONDS, QueryLogService


class Host:
    """Test stand-in for the server host: counts only."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def count(self, name: str) -> None:
        self.counts[name] += 1


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _service() -> tuple[QueryLogService, Host, Clock]:
    host, clock = Host(), Clock()
    runtime = SimpleNamespace(lock=threading.RLock(), filters=[])  # only the cancellation log is used
    service = QueryLogService(runtime, host, 65536)  # stand-ins
    service.cancelled_log.clock = clock
    return service, host, clock


def _cancel_lines(logs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == "rpc_cancelled"]


def test_two_thousand_cancelled_rpcs_make_two_log_lines_and_every_one_is_counted() -> None:
    """2,000 cancellations within one interval: the first is logged, the rest are counted; the first cancellation
    after the interval logs how many there were since the last line (by method)."""
    service, host, clock = _service()
    with structlog.testing.capture_logs() as logs:
        for i in range(2000):
            service._cancelled("Filter" if i % 2 else "Ingest")
        lines_within = len(_cancel_lines(logs))
        clock.now += CANCELLED_LOG_SECONDS
        service._cancelled("Filter")
    lines = _cancel_lines(logs)
    assert host.counts["rpcs_cancelled"] == 2001
    assert lines_within == 1
    assert len(lines) == 2
    assert lines[0]["count"] == 1
    assert lines[1]["count"] == 2000 and lines[1]["by_method"] == {"Filter": 1001, "Ingest": 999}
