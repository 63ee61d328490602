"""The chain runner: events pass through filters in order, batch by batch."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from sidecar.api import Event, Filter


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

    def _run(self, batch: list[Event], start: int) -> list[Event]:
        for f in self.filters[start:]:
            if not batch:
                break
            self.per_filter_in[f.NAME] += len(batch)
            batch = f.process(batch)
            self.per_filter_out[f.NAME] += len(batch)
        return batch

    def process(self, batch: list[Event]) -> list[Event]:
        """Run one batch through every filter; returns what leaves the chain now."""
        with self.lock:
            self.events_in += len(batch)
            out = self._run(batch, 0)
            self.events_out += len(out)
            return out

    def flush(self, final: bool) -> list[Event]:
        """Ask each filter to release what it may; released events run through the rest."""
        with self.lock:
            released: list[Event] = []
            for f in self.filters:
                if released:
                    self.per_filter_in[f.NAME] += len(released)
                    released = f.process(released)
                    self.per_filter_out[f.NAME] += len(released)
                more = f.flush(final)
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
