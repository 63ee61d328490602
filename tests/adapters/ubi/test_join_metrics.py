"""The join stage's counts on /metrics (scraped over HTTP from ``serve_metrics``): events joined, held, dropped
with their query, dead-lettered after the hold; queries dropped by filter name. Counts only: no query id, user or
query text on the page, and ``promtool check metrics`` finds nothing to say."""

from __future__ import annotations

import json
import shutil
import subprocess
import urllib.request
from pathlib import Path

import pytest
from helpers.ubipipe import EVENTS, QUERIES, feed, write_config
from prometheus_client.parser import text_string_to_metric_families

from sidecar.config import load_config
from sidecar.joins import JoinBounds, Joins
from sidecar.metrics import serve_metrics
from sidecar.pipeline import Pipeline

PROMTOOL = shutil.which("promtool")


def scrape(p: Pipeline) -> str:
    server, _, port = serve_metrics("127.0.0.1:0", p.stats)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
            return str(answer.read().decode())
    finally:
        server.shutdown()
        server.server_close()


def samples(page: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(page)
        for s in family.samples
    }


def test_join_counts_on_metrics_without_values(tmp_path: Path) -> None:
    p = Pipeline(load_config(write_config(tmp_path, "  - drop: {rules: [{role: query, matches: charger}]}\n")))
    try:
        assert isinstance(p.joins, Joins)
        now = [1_000_000.0]
        p.joins.clock = lambda: now[0]
        feed(p, [*QUERIES, *EVENTS, EVENTS[2]])  # EVENTS[2] is the charger's click; EVENTS[4]'s query never comes
        before = samples(scrape(p))
        now[0] += JoinBounds().hold_seconds + 1
        p.release(False)
        page = scrape(p)
    finally:
        p.close()
    got = samples(page)
    events = "querylog_join_events_total"
    assert before[(events, (("outcome", "held"),))] == 1  # the click of a query that never comes
    assert before[("querylog_join_held", ())] == 1
    assert got[(events, (("outcome", "released_with_query"),))] == 3
    assert got[(events, (("outcome", "dropped_with_query"),))] == 2
    assert got[(events, (("outcome", "query_unknown"),))] == 1
    assert got[(events, (("outcome", "query_not_released"),))] == 0
    assert got[("querylog_join_held", ())] == 0 and got[("querylog_join_pending_queries", ())] == 0
    assert got[("querylog_join_queries_dropped_total", (("by", "drop"),))] == 1
    for line in [*QUERIES, *EVENTS]:
        record = json.loads(line)
        for value in (record.get("query_id"), record.get("client_id"), record.get("user_query")):
            assert not value or value not in page
    if PROMTOOL is not None:
        run = subprocess.run([PROMTOOL, "check", "metrics"], input=page, capture_output=True, text=True)
        assert run.returncode == 0, run.stdout + run.stderr


def test_no_join_series_without_a_join_stage(tmp_path: Path) -> None:
    path = tmp_path / "q.yaml"
    path.write_text("state_dir: state\nfilters: []\nsinks: []\n", encoding="utf-8")
    p = Pipeline(load_config(path))
    try:
        assert "querylog_join" not in scrape(p)
    finally:
        p.close()


@pytest.mark.skipif(PROMTOOL is None, reason="promtool (Debian prometheus) is not installed")
def test_promtool_is_here() -> None:
    """The check above ran promtool (it is installed here: Debian prometheus)."""
    assert PROMTOOL is not None
