"""The live audit's series on /metrics (:mod:`sidecar.liveaudit`), and the privacy state the filters report.

Labels are side (``in``/``out``), identifier type, state names, taxonomy categories of the config, filter names
and counter names: never a query, a user id or a hash. ``querylog_category_buffer_k`` itself is
:mod:`sidecar.metrics`'s (one series per category, not repeated here).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

#: A filter counter that says an event was withheld (dropped or suppressed), by its name's first word
WITHHELD_PREFIXES = ("dropped", "suppressed")


def live_audit_families(s: dict[str, Any], filter_labels: list[str]) -> Iterator[Any]:
    """Every series of the live audit (none when it is off) and of the filters' privacy state."""
    audit = s.get("live_audit") or {}
    filters = s["filters"]
    if audit:
        yield from _audit(audit, _reference_k(filters, audit["k"]))
    yield from _category(filters)
    yield from _dp(filters, filter_labels)
    yield _withheld(filters, filter_labels)


def _reference_k(filters: list[dict[str, Any]], configured: int) -> int:
    """The k behind the linkage reference: the smallest current k of a category_buffer, else the configured k."""
    ks = [k for f in filters if f["name"] == "category_buffer" for k in f.get("k_per_category", {}).values()]
    return min(ks) if ks else configured


def _audit(a: dict[str, Any], k: int) -> Iterator[Any]:
    events = CounterMetricFamily(
        "querylog_live_audit_events",
        "Events the live audit looked at, by side (in: input, out: released).",
        labels=["side"],
    )
    for side in ("in", "out"):
        events.add_metric([side], a["events"][side])
    yield events
    yield CounterMetricFamily(
        "querylog_live_audit_recreated_pairs",
        "Released events whose (user, query) the same user sent within the window (0 for a buffering chain).",
        value=a["recreated_pairs"],
    )
    yield GaugeMetricFamily(
        "querylog_live_audit_window_pairs", "Input (user, query) pairs the window holds now.", value=a["window_pairs"]
    )
    scanned = CounterMetricFamily(
        "querylog_live_audit_scanned_queries", "Queries the identifier detector scanned, by side.", labels=["side"]
    )
    found = CounterMetricFamily(
        "querylog_live_audit_identifiers",
        "Identifiers the detector found in scanned queries, by side and type (out should stay 0).",
        labels=["side", "type"],
    )
    for side in ("in", "out"):
        scanned.add_metric([side], a["scanned"][side])
        for kind, n in sorted(a["identifiers"][side].items()):
            found.add_metric([side, kind], n)
    yield from (scanned, found)
    link = a["linkage"]
    yield GaugeMetricFamily(
        "querylog_live_audit_linkage_ratio",
        "Share of assessed sampled users whose released queries link back to them (one released id dominates).",
        value=link["share"],
    )
    yield GaugeMetricFamily(
        "querylog_live_audit_linkage_chance_ratio",
        "1/k: the linkage a k-anonymous release allows (k: category_buffer's smallest current k, else live_audit.k).",
        value=1.0 / k,
    )
    users = GaugeMetricFamily(
        "querylog_live_audit_linkage_users",
        "Users of the linkage sample: sampled, assessed (enough queries released), linked; seen (distinct users).",
        labels=["state"],
    )
    for state in ("sampled", "assessed", "linked"):
        users.add_metric([state], link[state])
    users.add_metric(["seen"], link["users_seen"])
    yield users
    yield CounterMetricFamily(
        "querylog_live_audit_cpu_seconds",
        "CPU seconds the live audit spent (bounded by cpu_share).",
        value=a["seconds"],
    )


def _category(filters: list[dict[str, Any]]) -> Iterator[GaugeMetricFamily]:
    """category_buffer's held events and k cap per category (the largest of each when several filters run)."""
    held: dict[str, int] = {}
    cap: dict[str, int] = {}
    for f in filters:
        if f["name"] == "category_buffer":
            for category, n in f.get("held_per_category", {}).items():
                held[str(category)] = held.get(str(category), 0) + n
            for category, k in f.get("max_k_per_category", {}).items():
                cap[str(category)] = max(k, cap.get(str(category), k))
    held_family = GaugeMetricFamily(
        "querylog_category_buffer_held", "category_buffer's held events per category.", labels=["category"]
    )
    cap_family = GaugeMetricFamily(
        "querylog_category_buffer_max_k", "category_buffer's cap on k per category (max_k).", labels=["category"]
    )
    for category, n in sorted(held.items()):
        held_family.add_metric([category], n)
    for category, k in sorted(cap.items()):
        cap_family.add_metric([category], k)
    yield from (held_family, cap_family)


def _dp(filters: list[dict[str, Any]], labels: list[str]) -> Iterator[GaugeMetricFamily]:
    """dp_replace's ledger in the current window: users, users at their budget (estimated), epsilon-spent
    quantiles, the budget itself."""
    users = GaugeMetricFamily(
        "querylog_dp_users", "Users in dp_replace's ledger for the current window.", labels=["filter"]
    )
    full = GaugeMetricFamily(
        "querylog_dp_users_at_budget",
        "Users who cannot spend another concept in the current window (estimated from a sample of the ledger).",
        labels=["filter"],
    )
    spent = GaugeMetricFamily(
        "querylog_dp_epsilon_spent",
        "Epsilon spent per user in the current window, quantiles.",
        labels=["filter", "quantile"],
    )
    budget = GaugeMetricFamily("querylog_dp_epsilon_budget", "Epsilon per user and window.", labels=["filter"])
    for f, label in zip(filters, labels):
        ledger = f.get("ledger")
        if f["name"] != "dp_replace" or ledger is None:
            continue
        budget.add_metric([label], float(f["epsilon"]))
        users.add_metric([label], ledger.get("users", 0))
        full.add_metric([label], ledger.get("users_at_budget", 0))
        for q, v in ledger.get("spent_quantiles", {}).items():
            spent.add_metric([label, q], v)
    yield from (users, full, spent, budget)


def _withheld(filters: list[dict[str, Any]], labels: Iterable[str]) -> CounterMetricFamily:
    """Queries a filter dropped or suppressed, by filter and reason (its counters named ``dropped_*`` or
    ``suppressed_*``)."""
    family = CounterMetricFamily(
        "querylog_queries_withheld",
        "Queries dropped or suppressed by a filter, by reason.",
        labels=["filter", "reason"],
    )
    for f, label in zip(filters, labels):
        for name, n in sorted(f["counts"].items()):
            if str(name).startswith(WITHHELD_PREFIXES):
                family.add_metric([label, str(name)], n)
    return family
