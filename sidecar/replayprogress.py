"""The progress bar of a replay (tqdm on stderr): records read, and the chain's counts."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any


class ReplayProgress:
    """A tqdm bar on stderr: records read against the input's records (once counted), with the chain's out /
    held / dropped / dead-lettered counts."""

    REFRESH_SECONDS = 0.5

    def __init__(self) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=None, unit=" records", unit_scale=True, file=sys.stderr, leave=False)
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
