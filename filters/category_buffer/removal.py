"""``category_buffer``'s removal policies (``max_k_policy``, ``max_held``, ``max_hold``) and the suppressions it
names to a join stage (``report_suppressed``/``take_suppressed``): mixed into
:class:`~filters.category_buffer.filter.CategoryBufferFilter`, whose state they change."""

from __future__ import annotations

import math
from collections import Counter
from types import ModuleType
from typing import TYPE_CHECKING, ClassVar

import structlog

from filters.category_buffer.buckets import ROOT, Bucket, parent_name, take_all, take_oldest
from filters.category_buffer.config import CategoryBufferConfig
from filters.category_buffer.store import Journal
from sidecar.api import BuildContext, Event

if TYPE_CHECKING:
    from filters.category_buffer.core import Buffer

log = structlog.get_logger("querylog.category_buffer")
NAME = "category_buffer"


class RemovalPolicies:
    """What suppresses or merges held events; the filter's arrivals and releases are in the filter itself."""

    CORE: ClassVar[ModuleType]  # the filter's core module (.core, compiled or its source)
    config: CategoryBufferConfig
    ctx: BuildContext
    counts: Counter[str]
    buckets: dict[str, Bucket]
    journal: Journal
    _held: int
    core: Buffer  # the filter's core (its suppressed list: events kept once a join stage asked)

    if TYPE_CHECKING:  # the filter's own

        def _bucket(self, name: str) -> Bucket: ...
        def _release(self, bucket: Bucket, out: list[Event]) -> None: ...

    def report_suppressed(self) -> None:
        if self.core.suppressed is None:
            self.core.suppressed = []

    def take_suppressed(self) -> list[Event]:
        taken = self.core.suppressed or []
        if self.core.suppressed is not None:
            self.core.suppressed = []
        return taken

    def _drop_oldest(self, bucket: Bucket, count: int, reason: str) -> None:
        """Suppress the ``count`` oldest held queries of a bucket with as many of its oldest user slots."""
        count = min(count, len(bucket.queries))
        if count <= 0:
            return
        self.core.suppress(take_oldest(bucket, count))
        self._held -= count
        self.counts[reason] += count

    def _at_max_k(self, bucket: Bucket) -> None:
        """``max_k_policy: hold`` for a bucket at max_k with no valid pair: count it, and try again once it grew
        by delta. (``suppress`` the core does itself: :meth:`.core.Buffer.suppress_most_held`.)"""
        bucket.retry_at = max(len(bucket.queries) + 1, math.ceil(len(bucket.queries) * self.config.delta))
        self.counts["held_at_max_k"] += 1

    def _overflow(self) -> None:
        """``max_held``: suppress the oldest events of the largest bucket."""
        excess = self._held - self.config.max_held
        if excess <= 0:
            return
        largest = max(self.buckets.values(), key=lambda b: len(b.queries))
        self._drop_oldest(largest, max(excess, len(largest.queries) // 100), "suppressed_overflow")
        log.warning("events_suppressed", filter=NAME, reason="max_held", held=self._held)

    def _apply_max_hold(self, out: list[Event]) -> None:
        """``max_hold``: suppress events held too long, or merge their overdue bucket into its parent."""
        policy = self.config.max_hold
        if policy == "hold":
            return
        cutoff = self.ctx.clock() - self.config.max_hold_seconds
        for bucket in list(self.buckets.values()):
            if not bucket.queries:
                continue
            if policy == "suppress":
                overdue = sum(1 for h in bucket.queries if h.arrived < cutoff)
                if overdue:
                    self._drop_oldest(bucket, overdue, "suppressed_max_hold")
                    log.info("events_suppressed", filter=NAME, reason="max_hold", count=overdue)
            elif bucket.name != ROOT and min(h.arrived for h in bucket.queries) < cutoff:
                self._merge(bucket, out)

    def _merge(self, bucket: Bucket, out: list[Event]) -> None:
        """Move every held half of an overdue bucket into its parent bucket, then release from the parent."""
        parent = self._bucket(parent_name(bucket.name))
        queries, users = take_all(bucket)
        parent.open = None  # its valid pairs are no longer known: draws find them
        for h in queries:
            parent.add_query(h)
            self.journal.rows.moved(h)
        for h in users:
            parent.add_user(h)
            self.journal.rows.moved(h)
        self.counts["merged"] += len(queries)
        log.info("bucket_merged", filter=NAME, count=len(queries))
        self._release(parent, out)
