"""Helpers shared by the benchmarks."""

from __future__ import annotations

import resource
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from sidecar.tools.bench.network import Run


def peak_rss_mib(children: bool = False) -> float:
    """Peak resident set size of this process (or of its waited-for children), MiB."""
    who = resource.RUSAGE_CHILDREN if children else resource.RUSAGE_SELF
    return resource.getrusage(who).ru_maxrss / 1024.0


class Client(Protocol):
    """A benchmark client thread's work: ``run`` sends its share and counts what was acknowledged."""

    acked: int
    errors: set[str]

    def run(self) -> None: ...


def run_threads(targets: Sequence[Callable[[], object]]) -> tuple[float, float]:
    """Run each target on its own thread, all started before any is joined: when they started and when the last
    ended (``time.time()``)."""
    threads = [threading.Thread(target=target) for target in targets]
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return t0, time.time()


def run_clients(clients: Sequence[Client], out: Path, sidecar: Any, total: int, batch: int, note: str) -> Run:
    """Run every client on its own thread until all are answered; the run, counting the lines of ``out`` (the
    sidecar's file sink) as received when the last answer came."""
    from sidecar.tools.bench.network import Run

    t0, acked_at = run_threads([c.run for c in clients])
    with out.open("rb") as fh:
        received = sum(1 for _ in fh)
    errors = sorted(set().union(*(c.errors for c in clients)))
    return Run(
        sent=total,
        acked=sum(c.acked for c in clients),
        seconds_acked=acked_at - t0,
        received=received,
        seconds_received=acked_at - t0,
        batch=batch,
        sidecar_rss=sidecar.peak_rss(),
        client_rss=peak_rss_mib(),
        downstream_rss=0.0,
        note=f"{note}; client errors: {', '.join(errors)}" if errors else note,
    )
