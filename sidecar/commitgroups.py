"""``replay --resume``'s commits in groups of batches: the source's position, the output's size and the filters'
state committed together every :data:`GROUP_BATCHES` batches instead of with every batch.

A resumable replay promises one thing: after a crash (even kill -9) the same command continues exactly where the
last commit left it (the output cut back to the size committed, the input read on from the position committed, the
held events as committed). That needs the three committed *together*, not each batch: a group of batches is one
transaction of the state store (:meth:`.Pipeline.transaction`: a batch's own block joins the open one), and the
filters that defer their state writes (``defer_commits``) write it (``commit_deferred``) just before the group
commits. A crash inside a group loses that group's work only (it is done again on resume: at most
:data:`GROUP_BATCHES` batches); what was written to the output past the committed size is cut away, and dead letters
of those batches may be written twice. The input file is the source of truth, so nothing read is lost. While the
first pass runs in a child process (``BackgroundPrescan``) the buffer keeps the batches that came meanwhile in
memory, so the open group does not commit before that pass's result is in and those batches have arrived.

Measured on a 625k-line real-query archive through the k-anonymity chain: the per-batch commits (the buffer's held
rows packed and written, the transaction's commit) were about 30% of a ``--resume`` replay's samples.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol, cast

from sidecar.api import Backpressure, DeadLetterSink, Receipt, RecordBatch
from sidecar.outbox import OutboxFull
from sidecar.pipeline import Pipeline

#: batches per commit of a resumable replay (a crash redoes at most these)
GROUP_BATCHES = 50


class GroupRefused(RuntimeError):
    """A sink refused a batch once it ran, inside a commit group: the group was rolled back, the replay ends."""

    def __init__(self, sink: str, reason: str) -> None:
        super().__init__(
            f"sink {sink} refused a batch inside a commit group ({reason}) after it ran: the group was rolled back "
            "(rerun with --resume to continue from the last commit)"
        )
        self.sink, self.reason = sink, reason


class DeferringFilter(Protocol):
    """A filter whose state writes may wait for the driver's commit (``category_buffer``)."""

    def defer_commits(self, batches: int) -> None: ...
    def commit_deferred(self) -> None: ...


def deferring(pipeline: Pipeline) -> list[DeferringFilter]:
    """The chain's filters that can defer their state writes to a group's commit."""
    found = [f for f in pipeline.filters if hasattr(f, "defer_commits") and hasattr(f, "commit_deferred")]
    return [cast(DeferringFilter, f) for f in found]


class CommitGroups:
    """What a resuming file source drives instead of the pipeline itself: :meth:`receive` runs each batch in the
    group's transaction and commits every ``batches`` batches; :meth:`commit` ends the last group (call it when the
    source returned; :meth:`roll_back` when it raised). The source's other calls go to the pipeline."""

    def __init__(
        self,
        pipeline: Pipeline,
        waiting: Callable[[], bool] | None = None,
        batches: int | None = None,
        after_batch: Callable[[], None] | None = None,
    ) -> None:
        self.pipeline = pipeline
        #: called after each batch, in the group (the progress bar's stats: :class:`.StatsSnapshot`)
        self.after_batch = after_batch
        #: True while batches wait in memory for a first pass made elsewhere (:class:`.BackgroundPrescan`): they are
        #: in no state store yet, so no group commits until its result is in
        self.waiting = waiting
        self.batches = max(1, batches if batches is not None else GROUP_BATCHES)
        self.filters = deferring(pipeline)
        for f in self.filters:
            f.defer_commits(self.batches)
        #: sinks that fsync at the group's commit instead of at each flush (the file sink in ``mode: resume``)
        self.sinks: list[Any] = [s for s in pipeline.sinks if hasattr(s, "sync_later")]
        for s in self.sinks:
            s.sync_later = True
        self._open: AbstractContextManager[None] | None = None
        self._count = 0
        #: groups committed
        self.commits = 0

    @property
    def dead_letters(self) -> DeadLetterSink:
        return self.pipeline.dead_letters

    def checkpoint(self, key: str) -> str | None:
        return self.pipeline.checkpoint(key)

    def backpressure(self) -> str | None:
        return self.pipeline.backpressure()

    def receive(self, batch: RecordBatch) -> Receipt:
        """The pipeline's ``receive`` inside the open group (opened first when none is); the group commits after
        its last batch.

        A full sink (:meth:`backpressure`) refuses the batch before anything of it ran (:class:`Backpressure`:
        the source offers it again) and the group stays open with its batches. :class:`Backpressure` once the
        batch ran cannot be retried alone (the group's earlier batches would be rolled back with it): the group
        rolls back and :class:`GroupRefused` ends the replay (a rerun continues from the last commit)."""
        full = self.pipeline.backpressure()
        if full is not None:  # what a transaction of its own checks first (a batch's own block joins the group)
            raise OutboxFull(full, "full")
        if self._open is None:
            block = self.pipeline.transaction(check_outbox=False)  # checked above
            block.__enter__()
            self._open, self._count = block, 0
        try:
            receipt = self.pipeline.receive(batch)
        except Backpressure as exc:
            self.roll_back(exc)
            raise GroupRefused(exc.sink, exc.reason) from exc
        except BaseException as exc:
            self.roll_back(exc)
            raise
        self._count += 1
        if self.after_batch is not None:
            self.after_batch()
        if self._count >= self.batches and not (self.waiting is not None and self.waiting()):
            self.commit()
        return receipt

    def commit(self) -> None:
        """Write what the filters deferred and commit the open group (nothing when none is open)."""
        block = self._open
        if block is None:
            return
        try:
            for f in self.filters:
                f.commit_deferred()
            for s in self.sinks:  # the output as durable as the size its flushes recorded, before that commits
                s.sync()
        except BaseException as exc:
            self.roll_back(exc)
            raise
        self._open = None
        block.__exit__(None, None, None)
        self.commits += 1

    def roll_back(self, exc: BaseException) -> None:
        """Roll the open group back because of ``exc`` (its batches are read again on resume); raises instead
        what names the state database when that is what failed (:meth:`.Pipeline.transaction`)."""
        block, self._open = self._open, None
        if block is not None:
            block.__exit__(type(exc), exc, exc.__traceback__)
