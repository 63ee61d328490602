"""Prometheus /metrics endpoint of `querylog serve`: counts and reasons, never values."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from helpers.grpc_sidecar import sidecar, write_config

from adapters.grpc.stubs.querylog.v1.querylog_pb2 import EventBatch, QueryEvent
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub


def test_metrics_endpoint_counts_without_values(tmp_path: Path) -> None:
    """After one batch with a bad event (an oversized one) and an empty query (a valid event), /metrics shows
    the counts and the reason, and no query or user id."""
    cfg = write_config(
        tmp_path,
        "limits: {max_record_bytes: 1024}\n"
        "server:\n  metrics_listen: 127.0.0.1:0\nfilters:\n  - drop:\n      rules: [{role: query, equals: ['-']}]\n",
    )
    with sidecar(cfg) as run:
        batch = EventBatch(
            events=[
                QueryEvent(user="u-secret-1", query="secret query one", time="t"),
                QueryEvent(user="u-secret-2", query="-", time="t"),
                QueryEvent(user="u-secret-3", query="", time="t"),
                QueryEvent(user="u-secret-4", query="secret query " + "x" * 2000, time="t"),
            ]
        )
        list(QueryLogFilterStub(run.chan).Filter(iter([batch])))
        port = run.server.metrics_port
        assert port
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert "querylog_events_in_total 3.0" in body
    assert "querylog_events_out_total 2.0" in body
    assert 'querylog_filter_count_total{filter="drop",name="dropped_rule_0"} 1.0' in body
    assert 'querylog_dead_letters_total{reason="oversized_record"} 1.0' in body
    assert "empty_query" not in body  # an empty query is no dead letter
    for secret in ("u-secret", "secret query"):
        assert secret not in body
