"""Timed release: every few seconds buffering filters are asked to let go what their policy allows
(``max_hold``), and what they release is delivered at once, committed together with the release.

``serve`` runs one for its sinks (sources such as forward, Vector and HTTP have no timer of their own);
``replay``/``filter`` from a pipe run one for their output, so releases come out while the input is idle.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import structlog

from sidecar.api import Runtime, Sink

log = structlog.get_logger("querylog.release")


class TimedRelease:
    """A daemon thread: every ``interval`` seconds, ``runtime.flush(final=False)`` into ``sinks`` (default: the
    runtime's), inside ``runtime.transaction()``. A failure (a full outbox, a full disk) leaves the events held
    and is logged once per streak of failures; the next tick tries again."""

    def __init__(self, runtime: Runtime, interval: float, sinks: Sequence[Sink[Any]] | None = None) -> None:
        self.runtime, self.interval = runtime, interval
        self.sinks = runtime.sinks if sinks is None else sinks
        self.released = 0
        self._failing = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="querylog-release", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                with self.runtime.transaction():  # the release commits only with its delivery
                    out = self.runtime.flush(final=False)
                    if out:
                        for sink in self.sinks:
                            sink.write(out)
                            sink.flush()
                self.released += len(out)
                self._failing = False
            except Exception as exc:
                if not self._failing:
                    log.error("timed_release_failed", error=type(exc).__name__)
                self._failing = True

    def stop(self) -> None:
        """Stop the timer (waits for a release in progress)."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
