"""SIGTERM/SIGINT as a flag that long-running commands poll (replay, serve); SIGHUP as a reload flag (serve)."""

from __future__ import annotations

import signal
import threading
from types import FrameType


class StopFlag:
    """Set by SIGTERM/SIGINT: stop reading, finish the batch in flight, flush, close."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def install(self) -> None:
        """Route SIGTERM and SIGINT to this flag (only possible from the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum: int, frame: FrameType | None) -> None:
            self.event.set()

        signal.signal(signal.SIGTERM, handler)
        signal.signal(signal.SIGINT, handler)

    def set(self) -> None:
        self.event.set()

    def __bool__(self) -> bool:
        return self.event.is_set()


class ReloadFlag:
    """Set by SIGHUP (``serve``: reload the config, reopen file sinks): the signal never ends the process."""

    def __init__(self) -> None:
        self.event = threading.Event()

    def install(self) -> None:
        """Route SIGHUP to this flag (only possible from the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return

        def handler(signum: int, frame: FrameType | None) -> None:
            self.event.set()

        signal.signal(signal.SIGHUP, handler)

    def take(self) -> bool:
        """True once per SIGHUP received since the last call (several before a call count as one)."""
        if not self.event.is_set():
            return False
        self.event.clear()
        return True
