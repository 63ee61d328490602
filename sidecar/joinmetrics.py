"""The join stage's series on /metrics (:mod:`sidecar.joins`, ``format: ubi``): counts of attached events by
outcome, what is held and pending now, the queries known dropped by who dropped them. Labels are outcome names
and filter names only: never a join key, a user or a record value. No series when the schema's format joins
nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

__all__ = ["OUTCOMES", "join_families"]

#: Outcomes of attached events, each exported (0 until it happens): released after their query (joined), held
#: waiting for it (counted when they start waiting), dropped with it, dead-lettered (their query never came within
#: the hold, was not released within the pending bound, or the held line could not be read back).
OUTCOMES = (
    "released_with_query",
    "held",
    "dropped_with_query",
    "query_unknown",
    "query_not_released",
    "join_held_unreadable",
)


def join_families(s: dict[str, Any]) -> Iterator[Any]:
    """The series of ``s["joins"]`` (the runtime's stats); nothing without a join stage."""
    joins = s.get("joins") or {}
    if not joins:
        return
    counts = joins["counts"]
    events = CounterMetricFamily(
        "querylog_join_events",
        "Attached events (UBI clicks) by outcome: released_with_query (joined), held (started waiting for their "
        "query), dropped_with_query, query_unknown / query_not_released / join_held_unreadable (dead-lettered).",
        labels=["outcome"],
    )
    for outcome in OUTCOMES:
        events.add_metric([outcome], counts.get(outcome, 0))
    yield events
    yield GaugeMetricFamily("querylog_join_held", "Attached events held for their query now.", value=joins["held"])
    yield GaugeMetricFamily(
        "querylog_join_pending_queries",
        "Queries sent into the chain whose outcome (released or dropped) is not known yet.",
        value=joins["pending_queries"],
    )
    dropped = CounterMetricFamily(
        "querylog_join_queries_dropped",
        "Queries known dropped, by who dropped them: a filter's name, chain_holds_nothing (a buffering chain that "
        "holds nothing more), no_buffer (a chain without a buffer that did not release it).",
        labels=["by"],
    )
    for by, n in sorted(joins.get("queries_dropped", {}).items()):
        dropped.add_metric([by], n)
    yield dropped
    yield CounterMetricFamily(
        "querylog_join_buffer_drops_unidentified",
        "Events a buffering filter dropped without saying which: their queries stay pending until a bound.",
        value=counts.get("buffer_drops_unidentified", 0),
    )
