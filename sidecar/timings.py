"""The runtime's latency timings: fixed-bucket histograms, one observation per batch and stage (never per event).

:class:`Histogram` counts observations per bucket (Prometheus ``le`` buckets: a value lands in the first bucket
whose bound is >= it) with their sum. :class:`Timings` keeps the runtime's per source (labelled by the source's
component name, :func:`source_kind`, never by a value of the batch) and per sink; the chain keeps one per filter
(:meth:`sidecar.chain.Chain.timers`). ``Pipeline.stats()["latency"]`` reports them and :mod:`sidecar.metrics`
serves them.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections.abc import Sequence
from functools import cache
from importlib.metadata import entry_points
from time import perf_counter
from typing import Any

from sidecar.api import SOURCES, Event, Sink

#: Seconds a batch spends in a stage: 0.5 ms to 30 s.
SECONDS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: Events in one batch: 1 to 100 000.
EVENTS = (1.0, 5.0, 10.0, 50.0, 100.0, 500.0, 1000.0, 5000.0, 10_000.0, 50_000.0, 100_000.0)


class Histogram:
    """Counts per bucket and their sum; thread-safe (one short lock per observation)."""

    __slots__ = ("_counts", "_lock", "_sum", "bounds")

    def __init__(self, bounds: tuple[float, ...] = SECONDS) -> None:
        self.bounds = bounds
        self._counts = [0] * (len(bounds) + 1)  # the last one: above every bound (+Inf)
        self._sum = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        i = bisect_left(self.bounds, value)
        with self._lock:
            self._counts[i] += 1
            self._sum += value

    def snapshot(self) -> dict[str, Any]:
        """``{"buckets": [(upper bound, cumulative count)...], "sum": s, "count": n}``; the last bound is +Inf."""
        with self._lock:
            counts, total = list(self._counts), self._sum
        cumulative = 0
        buckets: list[tuple[float, int]] = []
        for bound, n in zip((*self.bounds, float("inf")), counts, strict=True):
            cumulative += n
            buckets.append((bound, cumulative))
        return {"buckets": buckets, "sum": total, "count": cumulative}


@cache
def _source_names() -> frozenset[str]:
    return frozenset(ep.name for ep in entry_points(group=SOURCES))


def source_kind(origin: str) -> str:
    """The component name of the source behind a batch's ``origin``: its part before ``:`` when that names a
    registered source (``grpc:Filter`` -> ``grpc``, ``http``), else ``file`` (the file source's origin is the path
    it reads: a value, never a label)."""
    prefix = origin.partition(":")[0]
    return prefix if prefix in _source_names() else "file"


class Timings:
    """The runtime's per-batch timings: per source kind, the seconds a batch spends in ``Runtime.receive`` or
    ``transform`` and its events; per sink (by position), the seconds of its ``write`` and ``flush``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.source_seconds: dict[str, Histogram] = {}
        self.source_events: dict[str, Histogram] = {}
        self.sink_seconds: list[Histogram] = []

    def source(self, origin: str, seconds: float, events: int) -> None:
        """One batch of ``origin`` (:attr:`RecordBatch.origin`) took ``seconds`` and carried ``events``."""
        kind = source_kind(origin)
        hist = self.source_seconds.get(kind)
        if hist is None:
            with self._lock:
                self.source_events.setdefault(kind, Histogram(EVENTS))  # first: a kind in source_seconds has both
                hist = self.source_seconds.setdefault(kind, Histogram(SECONDS))
        hist.observe(seconds)
        self.source_events[kind].observe(events)

    def write_flush(self, sinks: Sequence[Sink[Any]], events: list[Event]) -> None:
        """Write ``events`` to every sink and flush it (the caller holds the runtime's lock), timing each sink."""
        while len(self.sink_seconds) < len(sinks):  # a driver or a test may add sinks to a built runtime
            self.sink_seconds.append(Histogram(SECONDS))
        batch = list(events)
        t0 = perf_counter()
        for sink, hist in zip(sinks, self.sink_seconds):
            sink.write(batch)
            sink.flush()
            t1 = perf_counter()
            hist.observe(t1 - t0)
            t0 = t1

    def snapshot(self, filters: Sequence[Histogram], sinks: int) -> dict[str, Any]:
        """What ``Pipeline.stats()`` reports under ``latency``: ``sources`` and ``events`` by kind (sorted),
        ``filters`` by position in the chain, ``sinks`` by position (``sinks`` of them)."""
        with self._lock:
            kinds = sorted(self.source_seconds)
        timed = [h.snapshot() for h in self.sink_seconds[:sinks]]
        empty = Histogram(SECONDS).snapshot()
        return {
            "sources": {k: self.source_seconds[k].snapshot() for k in kinds},
            "events": {k: self.source_events[k].snapshot() for k in kinds},
            "filters": [h.snapshot() for h in filters],
            "sinks": timed + [empty] * (sinks - len(timed)),
        }
