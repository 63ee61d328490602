"""What a source tells its client when a batch could not be made durable: an outcome and a message that names
the file or outbox and what to do, never a value.

* ``busy``: a sink's outbox is full (backpressure) — try again later (gRPC RESOURCE_EXHAUSTED, HTTP 503).
* ``unavailable``: the state database or an output cannot be written now (a full disk...) or a sink needs an
  operator (a table that does not match) — try again once fixed (gRPC UNAVAILABLE, HTTP 503).
* ``internal``: anything else, a bug: only the exception's type is named (gRPC INTERNAL, HTTP 500).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Literal

from sidecar.api import SinkError
from sidecar.outbox import OutboxFull
from sidecar.state import StateError


@dataclass(frozen=True)
class Failure:
    kind: Literal["busy", "unavailable", "internal"]
    message: str


def describe_failure(exc: BaseException) -> Failure:
    """The client-facing outcome of a batch that failed with ``exc`` (safe to log: no values)."""
    if isinstance(exc, OutboxFull):
        return Failure("busy", str(exc))
    if isinstance(exc, StateError | SinkError):
        return Failure("unavailable", str(exc))
    if isinstance(exc, OSError) and exc.filename is not None:
        what = exc.strerror or type(exc).__name__
        advice = " (free space, then send again: nothing of this batch was acknowledged)"
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        return Failure("unavailable", f"output {exc.filename}: {what}{advice if full else ''}")
    return Failure("internal", f"internal error ({type(exc).__name__})")
