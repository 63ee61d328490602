"""The progress bar of a replay (tqdm on stderr): records read, and the chain's counts (:class:`StatsSnapshot`)."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any


class StatsSnapshot:
    """The runtime's stats for the progress bar's thread, which must never wait for the runtime's lock:
    ``replay --resume`` holds it across a commit group, and the group's end waits for that thread. Read when the
    lock is free, else the last read; the driver's thread refreshes it (:meth:`take`) while it holds the lock."""

    def __init__(self, runtime: Any, every: float = 0.5) -> None:
        self.runtime = runtime
        self.every = every
        self.last: Mapping[str, Any] = {}
        self._taken = float("-inf")

    def __call__(self) -> Mapping[str, Any]:
        """The stats now when the runtime's lock is free, else the last taken (empty before any)."""
        lock = self.runtime.lock
        if lock.acquire(blocking=False):
            try:
                self.last = self.runtime.stats()
            finally:
                lock.release()
        return self.last

    def take(self) -> None:
        """From the thread that holds the runtime's lock (between two batches of a group): the stats, at most
        once every ``every`` seconds."""
        now = time.monotonic()
        if now - self._taken >= self.every:
            self._taken = now
            self.last = self.runtime.stats()


class ReplayProgress:
    """A tqdm bar on stderr: records read against the input's records (once counted), with the chain's out /
    held / dropped / dead-lettered counts."""

    REFRESH_SECONDS = 0.5

    def __init__(self) -> None:
        from tqdm import tqdm

        class Bar(tqdm):  # type: ignore[type-arg]
            """No monitor thread: tqdm's outlives the bar, and a process of more than one thread makes its first
            pass in place instead of forked (:func:`sidecar.prescan.prescan`: a later replay in this process)."""

            monitor_interval = 0

        self.bar = Bar(total=None, unit=" records", unit_scale=True, file=sys.stderr, leave=False)
        self._last = 0.0

    def update(self, done: int, total: int | None, stats: Callable[[], Mapping[str, Any]]) -> None:
        """Move the bar to ``done`` records (of ``total``); ``stats`` is read at most twice a second."""
        now = time.monotonic()
        if now - self._last < self.REFRESH_SECONDS:
            return
        self._last = now
        if total is not None and self.bar.total is None:
            self.bar.total = total
        s = stats()
        shown = {
            "out": "events_out",
            "held": "events_held",
            "dropped": "events_dropped",
            "dead": "events_dead_lettered",
        }
        self.bar.set_postfix({k: s.get(v, 0) for k, v in shown.items()}, refresh=False)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        self.bar.close()
