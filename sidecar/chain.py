"""The chain runner: events pass through filters in order, batch by batch."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from time import perf_counter
from typing import Any

from sidecar.api import Event, Filter
from sidecar.timings import Histogram

Trace = Callable[[Filter[Any], list[Event], list[Event]], None]
"""Told after each step of a filter what entered it and what left it (a ``flush`` step: nothing entered); the
join stage (:mod:`sidecar.joins`) learns from it which queries a filter dropped."""


class Chain:
    """Filters in order. Thread-safe: one batch at a time goes through the chain."""

    def __init__(self, filters: list[Filter[Any]]) -> None:
        self.filters = filters
        self.lock = threading.Lock()
        self.events_in = 0
        self.events_out = 0
        self.per_filter_in: Counter[str] = Counter()
        self.per_filter_out: Counter[str] = Counter()
        #: events the filters held when the chain was built (restored from the state store by an earlier run)
        self.restored = sum(f.held() for f in filters)
        #: seconds each filter's ``process`` took per batch, by position in the chain
        self.seconds = [Histogram() for _ in filters]

    def _run(self, batch: list[Event], start: int, trace: Trace | None = None) -> list[Event]:
        for f, seconds in zip(self.filters[start:], self.timers()[start:]):
            if not batch:
                break
            batch = self._process(f, seconds, batch, trace)
        return batch

    def timers(self) -> list[Histogram]:
        """:attr:`seconds`, one per filter (a test helper may add filters to a built chain)."""
        while len(self.seconds) < len(self.filters):
            self.seconds.append(Histogram())
        return self.seconds

    def _process(self, f: Filter[Any], seconds: Histogram, batch: list[Event], trace: Trace | None) -> list[Event]:
        """One filter's ``process`` of one batch, counted and timed (and traced)."""
        self.per_filter_in[f.NAME] += len(batch)
        t0 = perf_counter()
        out = f.process(batch)
        seconds.observe(perf_counter() - t0)
        self.per_filter_out[f.NAME] += len(out)
        if trace is not None:
            trace(f, batch, out)
        return out

    def process(self, batch: list[Event], trace: Trace | None = None) -> list[Event]:
        """Run one batch through every filter; returns what leaves the chain now."""
        with self.lock:
            self.events_in += len(batch)
            out = self._run(batch, 0, trace)
            self.events_out += len(out)
            return out

    def flush(self, final: bool, trace: Trace | None = None) -> list[Event]:
        """Ask each filter to release what it may; released events run through the rest."""
        with self.lock:
            released: list[Event] = []
            for f, seconds in zip(self.filters, self.timers()):
                if released:
                    released = self._process(f, seconds, released, trace)
                more = f.flush(final)
                if trace is not None:
                    trace(f, [], more)
                if more:
                    self.per_filter_out[f.NAME] += len(more)
                    released.extend(more)
            self.events_out += len(released)
            return released

    def held(self) -> int:
        return sum(f.held() for f in self.filters)

    def dropped(self) -> int:
        """Events that came in (or were restored) and neither left nor are held: dropped by a filter."""
        return self.events_in + self.restored - self.events_out - self.held()

    def stats(self) -> dict[str, Any]:
        return {
            "events_in": self.events_in,
            "events_out": self.events_out,
            "events_held": self.held(),
            "events_dropped": self.dropped(),
            "events_restored": self.restored,
            "filters": [
                {
                    "name": f.NAME,
                    "events_in": self.per_filter_in[f.NAME],
                    "events_out": self.per_filter_out[f.NAME],
                    "held": f.held(),
                    "counts": dict(f.counts),
                    **f.stats(),
                }
                for f in self.filters
            ],
        }

    def close(self) -> None:
        for f in self.filters:
            f.close()
