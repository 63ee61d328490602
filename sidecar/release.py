"""Timed release: every few seconds buffering filters are asked to let go what their policy allows
(``max_hold``), and what they release is delivered at once, committed together with the release.

The runtime runs one per process (:meth:`sidecar.pipeline.Pipeline.start_release_timer`); no source has a
timer of its own. ``replay``/``filter`` from a pipe run it too, so releases come out while the input is idle.
"""

from __future__ import annotations

import threading

import structlog

from sidecar.api import Runtime

log = structlog.get_logger("querylog.release")


class TimedRelease:
    """A daemon thread: every ``interval`` seconds, ``runtime.release(final=False)``. A failure (a full outbox,
    a full disk) leaves the events held and is logged once per streak of failures; the next tick tries again."""

    def __init__(self, runtime: Runtime, interval: float) -> None:
        self.runtime, self.interval = runtime, interval
        self.released = 0
        self._failing = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="querylog-release", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.released += self.runtime.release(final=False)
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
