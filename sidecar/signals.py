"""SIGTERM/SIGINT as a flag that long-running commands poll (replay, serve); SIGHUP as a reload flag (serve)."""

from __future__ import annotations

import signal
import threading
from types import FrameType


class _SignalFlag:
    """An event set by the signals of :attr:`SIGNALS`, once :meth:`install` routed them here."""

    SIGNALS: tuple[signal.Signals, ...] = ()

    def __init__(self) -> None:
        self.event = threading.Event()

    def install(self) -> None:
        """Route the signals to this flag (only possible from the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum: int, frame: FrameType | None) -> None:
            self.event.set()

        for sig in self.SIGNALS:
            signal.signal(sig, handler)


class StopFlag(_SignalFlag):
    """Set by SIGTERM/SIGINT: stop reading, finish the batch in flight, flush, close."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def set(self) -> None:
        self.event.set()

    def __bool__(self) -> bool:
        return self.event.is_set()


class ReloadFlag(_SignalFlag):
    """Set by SIGHUP (``serve``: reload the config, reopen file sinks): the signal never ends the process."""

    SIGNALS = (signal.SIGHUP,)

    def take(self) -> bool:
        """True once per SIGHUP received since the last call (several before a call count as one)."""
        if not self.event.is_set():
            return False
        self.event.clear()
        return True
