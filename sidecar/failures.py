"""What a source tells its client when a batch could not be made durable: an outcome and a message that says
what failed (the output file, the state database, an outbox) and what to do, never a value and never a server
path; the server's own log line gets :attr:`Failure.detail`, which names the file.

* ``busy``: a sink's outbox is full (backpressure) — try again later (gRPC RESOURCE_EXHAUSTED, HTTP 503).
* ``unavailable``: the state database or an output cannot be written now (a full disk...) or a sink needs an
  operator (a table that does not match) — try again once fixed (gRPC UNAVAILABLE, HTTP 503).
* ``internal``: anything else, a bug: only the exception's type is named (gRPC INTERNAL, HTTP 500).
"""

from __future__ import annotations

import errno
from dataclasses import dataclass, field
from typing import Literal

from sidecar.api import SinkError
from sidecar.outbox import OutboxFull
from sidecar.state import StateError

_AGAIN = "nothing of this batch was acknowledged"


@dataclass(frozen=True)
class Failure:
    kind: Literal["busy", "unavailable", "internal"]
    #: for the client: no value, no server path
    message: str
    #: for the server's own log: the message with the file it is about (no value either)
    detail: str = field(default="")

    def __post_init__(self) -> None:
        if not self.detail:
            object.__setattr__(self, "detail", self.message)


def describe_failure(exc: BaseException) -> Failure:
    """The client-facing outcome of a batch that failed with ``exc`` (safe to log: no values)."""
    if isinstance(exc, OutboxFull):
        return Failure("busy", str(exc))
    if isinstance(exc, StateError):
        if exc.disk_full:
            told = f"state database: the file system is full ({_AGAIN}: send again once space is freed)"
        else:
            told = f"state database cannot be used now ({_AGAIN}; the server's log says why and what to do)"
        return Failure("unavailable", told, str(exc))
    if isinstance(exc, SinkError):
        return Failure("unavailable", str(exc))
    if isinstance(exc, OSError) and exc.filename is not None:
        what = exc.strerror or type(exc).__name__
        full = exc.errno in (errno.ENOSPC, errno.EDQUOT)
        advice = f" (free space, then send again: {_AGAIN})" if full else ""
        return Failure("unavailable", f"output file: {what}{advice}", f"output {exc.filename}: {what}{advice}")
    return Failure("internal", f"internal error ({type(exc).__name__})")
