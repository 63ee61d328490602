"""The one way a test waits: :func:`wait_until` a condition holds (never a fixed sleep).

The deadline is generous on purpose: it only matters when the condition never holds, so a slow or loaded machine
passes as long as the condition holds at all; a fast one does not wait a moment longer than needed. What the test
waited for is named in the failure, and ``abort`` fails at once when waiting longer cannot help (the process that
should make the condition true has exited).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: Seconds a wait may take before it fails; generous, since it only counts when the condition never holds.
TIMEOUT = 60.0


class WaitTimeout(AssertionError):
    """The condition did not hold before the deadline (or ``abort`` gave up); the message says what was awaited."""


def wait_until(
    predicate: Callable[[], T],
    *,
    what: str,
    timeout: float = TIMEOUT,
    interval: float = 0.01,
    abort: Callable[[], str | None] | None = None,
) -> T:
    """Call ``predicate`` until it returns something truthy, and return that.

    ``what`` names the condition for the failure message ("the output to pass 2,000 bytes"). ``interval``: seconds
    between two calls (the condition is polled, so a fault window a test aims at stays open by construction, never
    by timing). ``abort``: called after each false result; a string it returns fails the wait at once with that
    reason (see :func:`exited`). Raises :class:`WaitTimeout` after ``timeout`` seconds without the condition."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if abort is not None:
            reason = abort()
            if reason is not None:
                raise WaitTimeout(f"gave up waiting for {what}: {reason}")
        if time.monotonic() >= deadline:
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def exited(proc: subprocess.Popen[bytes] | subprocess.Popen[str]) -> Callable[[], str | None]:
    """An ``abort`` for :func:`wait_until`: the process exited (with its status), else None."""

    def check() -> str | None:
        code = proc.poll()
        return None if code is None else f"the process exited with status {code}"

    return check
