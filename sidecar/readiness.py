"""The runtime's readiness (``Runtime.ready()``): what keeps it from taking traffic, by name, never a value.

``/readyz`` (:mod:`sidecar.metrics`) and gRPC health (:mod:`adapters.grpc.server`) both answer from it. The
knowledge base has no entry: a chain that uses one is only built once it is loaded, and nothing answers a probe
before the chain is built.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from sidecar.outboxes import backpressure

Check = Callable[[], list[str]]


def not_ready(state_db: Path, sinks: Iterable[object], draining: bool, checks: Iterable[Check]) -> list[str]:
    """``draining``; ``state_store_not_writable`` (the state folder or database: permissions, a read-only mount);
    ``outbox_full:<outbox>``; then what each of ``checks`` names. Takes no lock of the runtime's (a probe never
    waits behind a batch)."""
    reasons = ["draining"] if draining else []
    if not (os.access(state_db.parent, os.W_OK) and os.access(state_db, os.W_OK)):
        reasons.append("state_store_not_writable")
    full = backpressure(sinks)
    if full is not None:
        reasons.append(f"outbox_full:{full}")
    for check in checks:
        reasons.extend(check())
    return reasons
