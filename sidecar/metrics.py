"""Prometheus metrics for ``querylog serve``: counters from :meth:`Pipeline.stats`.

Labels carry filter names, counter names and dead-letter reasons only — never a
query, a user id or a record value (those never reach ``stats()`` either).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

StatsSource = Callable[[], dict[str, Any]]


class PipelineCollector(Collector):
    """Reads the pipeline's counters at scrape time."""

    def __init__(self, stats: StatsSource) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Any]:
        s = self.stats()
        for key, help_text in (
            ("events_in", "Events decoded and given to the chain."),
            ("events_out", "Events that left the chain."),
            ("events_dropped", "Events dropped by filters."),
            ("events_dead_lettered", "Records that could not become events."),
        ):
            yield CounterMetricFamily(f"querylog_{key}", help_text, value=max(0, s[key]))
        yield GaugeMetricFamily("querylog_events_held", "Events held by buffering filters.", value=s["events_held"])
        dead = CounterMetricFamily("querylog_dead_letters", "Dead letters by reason.", labels=["reason"])
        for reason, n in sorted(s["dead_letters"].items()):
            dead.add_metric([reason], n)
        yield dead
        refused = CounterMetricFamily(
            "querylog_rpcs_refused", "RPCs refused before reaching the chain, by reason.", labels=["reason"]
        )
        for reason, n in sorted(s.get("rpcs_refused", {}).items()):
            refused.add_metric([reason], n)
        yield refused
        f_in = CounterMetricFamily("querylog_filter_events_in", "Events into a filter.", labels=["filter"])
        f_out = CounterMetricFamily("querylog_filter_events_out", "Events out of a filter.", labels=["filter"])
        f_held = GaugeMetricFamily("querylog_filter_held", "Events held by a filter.", labels=["filter"])
        f_counts = CounterMetricFamily("querylog_filter_count", "A filter's own counters.", labels=["filter", "name"])
        for f in s["filters"]:
            f_in.add_metric([f["name"]], max(0, f["events_in"]))
            f_out.add_metric([f["name"]], max(0, f["events_out"]))
            f_held.add_metric([f["name"]], f["held"])
            for name, n in sorted(f["counts"].items()):
                f_counts.add_metric([f["name"], str(name)], n)
        yield from (f_in, f_out, f_held, f_counts)
        yield _category_k(s["filters"])
        sink_stat = GaugeMetricFamily(
            "querylog_sink_stat",
            "A sink's own counters: an outbox's pending_events/pending_batches/pending_bytes, sent_events, retries...",
            labels=["sink", "index", "name"],
        )
        for i, sink in enumerate(s.get("sinks", ())):
            sink_stat.add_metric([sink["name"], str(i), "written"], sink["written"])
            for name, n in sorted(sink["counts"].items()):
                sink_stat.add_metric([sink["name"], str(i), name], n)
        yield sink_stat
        yield GaugeMetricFamily(
            "querylog_uptime_seconds", "Seconds since the pipeline was built.", value=s.get("uptime_seconds", 0.0)
        )


def _category_k(filters: list[dict[str, Any]]) -> GaugeMetricFamily:
    """``category_buffer``'s current k per category (taxonomy labels of the config, never a record value); with
    several such filters in the chain, the largest k of each category."""
    ks: dict[str, int] = {}
    for f in filters:
        if f["name"] == "category_buffer":
            for category, k in f.get("k_per_category", {}).items():
                ks[str(category)] = max(k, ks.get(str(category), k))
    gauge = GaugeMetricFamily(
        "querylog_category_buffer_k",
        "category_buffer's current k per category (bounded by max_k).",
        labels=["category"],
    )
    for category, k in sorted(ks.items()):
        gauge.add_metric([category], k)
    return gauge


def serve_metrics(listen: str, stats: StatsSource) -> tuple[Any, threading.Thread, int]:
    """Start the /metrics HTTP endpoint on ``host:port``; returns (server, thread, port)."""
    host, _, port = listen.rpartition(":")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(stats))
    server, thread = start_http_server(int(port), addr=host.strip("[]"), registry=registry)
    return server, thread, server.server_port
