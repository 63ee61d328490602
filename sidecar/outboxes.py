"""The outboxes of a runtime: the factory behind :meth:`~sidecar.api.BuildContext.outbox`, and
:func:`backpressure`, the name of a full one (behind ``Runtime.backpressure()``)."""

from __future__ import annotations

import random
from collections.abc import Iterable

from sidecar.api import OutboxOptions, StateStoreLike
from sidecar.outbox import Outbox, safe_name


class OutboxFactory:
    """What :meth:`~sidecar.api.BuildContext.outbox` calls: outboxes in ``state``; it keeps each one it made
    (``made``), so :func:`backpressure` covers them all."""

    def __init__(self, state: StateStoreLike, rng: random.Random) -> None:
        self.state = state
        self.rng = rng
        self.made: list[Outbox] = []

    def __call__(self, name: str, options: OutboxOptions) -> Outbox:
        outbox = Outbox(
            self.state,
            safe_name(name),
            max_bytes=options.outbox_max_bytes,
            max_batches=options.outbox_max_batches,
            retry_initial_seconds=options.retry_initial_seconds,
            retry_max_seconds=options.retry_max_seconds,
            rng=self.rng,
        )
        self.made.append(outbox)
        return outbox


outbox_factory = OutboxFactory  # the runtime's name for it


def backpressure(sinks: Iterable[object]) -> str | None:
    """The name of a full outbox of ``sinks`` (made through their build context, or a sink's own ``outbox``), else
    None. While it returns a name, the runtime refuses batches and sources stop reading (and acknowledging)."""
    factories: dict[int, OutboxFactory] = {}
    for sink in sinks:
        outbox = getattr(sink, "outbox", None)
        if isinstance(outbox, Outbox) and outbox.full():
            return outbox.name
        factory = getattr(getattr(sink, "ctx", None), "outboxes", None)
        if isinstance(factory, OutboxFactory):
            factories[id(factory)] = factory
    for factory in factories.values():
        for outbox in factory.made:
            if outbox.full():
                return outbox.name
    return None
