"""A named pipe a test feeds by hand, so that a process reading it cannot finish before the test acts.

The kill tests used to wait for a run to be "mid-way" (its output growing) and then SIGKILL it; on a fast machine
the run could end between two polls, and the test then failed (or, worse, passed having killed nothing). Fed
through :class:`FifoFeed`, the reader never sees the end of its input until the test closes the pipe: it is
still running when the test's condition holds, however fast the machine, so the window is wide by construction.
A reader that ends anyway (a crash) is reported at once with its exit status, not after a timeout.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Callable
from pathlib import Path

from helpers.waiting import WaitTimeout, wait_until


class FifoFeed:
    """``path`` as a FIFO; :meth:`until` writes ``data`` into it (all of it but the last ``hold_back`` bytes)
    while waiting for a condition, and :meth:`close` ends the input (the reader then sees EOF, or EPIPE is
    ignored when it is gone). Only the test writes: the reader opens ``path`` like a file."""

    def __init__(self, path: Path, data: bytes, hold_back: int = 1) -> None:
        if not 0 < hold_back <= len(data):
            raise ValueError(f"hold_back must be in 1..{len(data)}, got {hold_back}")
        self.path = path
        os.mkfifo(path)
        self.data = memoryview(data)
        self.limit = len(data) - hold_back
        self.sent = 0
        self.fd: int | None = None

    def _open(self) -> bool:
        """Open the write end once a reader has the pipe open (never blocks)."""
        if self.fd is None:
            try:
                self.fd = os.open(self.path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as exc:
                if exc.errno != errno.ENXIO:  # ENXIO: no reader yet
                    raise
        return self.fd is not None

    def pump(self) -> None:
        """Write what the pipe takes now, up to the held-back tail (never blocks)."""
        while self._open() and self.sent < self.limit:
            assert self.fd is not None
            try:
                n = os.write(self.fd, self.data[self.sent : self.limit])
            except BlockingIOError:
                return
            except BrokenPipeError:  # the reader is gone (the caller sees it exit)
                return
            self.sent += n

    def until(
        self, cond: Callable[[], bool], proc: subprocess.Popen[bytes] | subprocess.Popen[str], timeout: float = 120.0
    ) -> None:
        """Feed the pipe until ``cond()`` holds; fail at once if ``proc`` ends first (it cannot have run out of
        input: the tail is held back), or after ``timeout`` seconds without ``cond``."""

        def fed() -> bool:
            self.pump()
            return cond()

        def ended() -> str | None:
            code = proc.poll()
            return None if code is None else f"the reader exited ({code})"

        try:
            wait_until(fed, what="the condition while feeding the pipe", timeout=timeout, interval=0.001, abort=ended)
        except WaitTimeout as exc:
            raise WaitTimeout(f"{exc}; fed {self.sent} bytes") from None

    def close(self) -> None:
        """Close the write end and remove the FIFO (its path is free for the real file)."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None
        self.path.unlink(missing_ok=True)
