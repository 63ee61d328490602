"""A first pass made in another process (``replay`` of a file): the batches that wait for its result.

``replay --prescan`` may make the first pass in a forked child process while this one starts the real pass
(``sidecar/prescan.py``, ``BackgroundPrescan``). No release may be drawn before the archive's shared pairs are
known, so the filter keeps each batch as it came (:class:`Waiting`) until the result is in, or until
:data:`WAIT_EVENTS` events wait (then it waits for the child), and then runs them in their order: the same
arrivals, draws and releases as after a first pass made in place, only delivered later. Held back events are in
no state store: only a run that promises nothing for them until they arrived does this (a file replay; with
``--resume`` its commit groups wait for the result, :mod:`sidecar.commitgroups`).
"""

from __future__ import annotations

import struct
from typing import Protocol

import numpy as np
import numpy.typing as npt

from sidecar.api import Event

#: events kept waiting for the first pass at most; then the filter waits for it. A 625k-line archive's first
#: pass ends after about 0.2-0.3 of the real pass's events have come (about 1 KB each in memory).
WAIT_EVENTS = 250_000


class PendingPass(Protocol):
    """A first pass still running elsewhere."""

    def done(self) -> bool:
        """True once :meth:`result` will not wait."""

    def result(self) -> bytes:
        """What :func:`pack_result` made of the first pass (waits for it)."""


class Waiting:
    """The batches that came before the first pass's result, each with its arrival clock."""

    __slots__ = ("batches", "events", "limit", "pending")

    def __init__(self, pending: PendingPass, limit: int = WAIT_EVENTS) -> None:
        self.pending = pending
        self.limit = limit
        self.batches: list[tuple[list[Event], float]] = []
        self.events = 0

    def add(self, batch: list[Event], now: float) -> bool:
        """Keep ``batch``; True when the first pass's result must be taken now (it is in, or enough wait)."""
        self.batches.append((batch, now))
        self.events += len(batch)
        return self.events >= self.limit or self.pending.done()


def pack_result(read: int, shared: npt.NDArray[np.int64]) -> bytes:
    """The first pass's events read and shared pair hashes, as bytes (sent between processes)."""
    return struct.pack("<q", read) + shared.astype("<i8", copy=False).tobytes()


def unpack_result(blob: bytes) -> tuple[int, list[int]]:
    """:func:`pack_result`'s (events read, shared pair hashes)."""
    (read,) = struct.unpack_from("<q", blob)
    shared: list[int] = np.frombuffer(blob, dtype="<i8", offset=8).tolist()
    return read, shared
