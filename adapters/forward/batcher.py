"""The forward source's batches: what every connection has waiting at a moment goes to ``runtime.receive`` in
one batch (one transaction), on the shared host's worker, one batch at a time; each connection acks its chunks
once the batch its entries went in with returned.

The worker takes the next batch itself as soon as one returned (it does not wait for the event loop to hand it
over): the loop reads and parses on meanwhile, and what arrives while a batch runs joins the next one."""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from dataclasses import dataclass

from adapters.forward.codec import ForwardCodec
from adapters.forward.protocol import Entry
from sidecar.api import Receipt, RecordBatch, Runtime
from sidecar.serving import ServerHost

ORIGIN = "forward"


@dataclass
class Job:
    """One connection's entries (and bad entries by reason) waiting for a batch."""

    entries: list[Entry]
    bad: list[str]
    future: asyncio.Future[Receipt]


class Batcher:
    """Merges what every connection has waiting into one ``runtime.receive`` (on the host's worker), one at a time."""

    def __init__(self, host: ServerHost, runtime: Runtime, codec: ForwardCodec, max_events: int) -> None:
        self.host = host
        self.runtime = runtime
        self.codec = codec
        self.max_events = max_events
        self.batches = 0
        #: Stop taking jobs (the source is stopping: what has not started is never acknowledged).
        self.closed = False
        self._waiting: deque[Job] = deque()
        self._lock = threading.Lock()  # guards _waiting and _busy between the loop and the worker
        self._busy = False
        self._drains: set[asyncio.Future[None]] = set()

    async def submit(self, entries: list[Entry], bad: list[str]) -> Receipt:
        """The receipt of the batch these entries went in with (raises what ``receive`` raised)."""
        loop = asyncio.get_running_loop()
        job = Job(entries, bad, loop.create_future())
        with self._lock:
            self._waiting.append(job)
            start, self._busy = not self._busy, True
        if start:
            drain = asyncio.ensure_future(self.host.run_in_worker(self._drain, loop))
            self._drains.add(drain)
            drain.add_done_callback(self._drains.discard)
        return await job.future

    def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the worker: batches until nothing waits; each job's result is set on the loop."""
        while True:
            with self._lock:
                if not self._waiting or self.closed:
                    self._busy = False
                    return
                jobs = [self._waiting.popleft()]
                n = len(jobs[0].entries)
                while self._waiting and n < self.max_events:
                    jobs.append(self._waiting.popleft())
                    n += len(jobs[-1].entries)
            try:
                receipt: Receipt | Exception = self._receive(jobs)
            except Exception as exc:
                receipt = exc
            try:
                loop.call_soon_threadsafe(_settle, jobs, receipt)
            except RuntimeError:  # the loop is closed: the source stopped, no connection is left to answer
                return

    def _receive(self, jobs: list[Job]) -> Receipt:
        dead = self.runtime.dead_letters
        for job in jobs:
            for reason in job.bad:
                dead.add(reason, ORIGIN, None, None)
        records = [e for job in jobs for e in job.entries] if len(jobs) > 1 else jobs[0].entries
        self.batches += 1
        if records:
            return self.runtime.receive(RecordBatch(records, self.codec, ORIGIN))
        dead.flush()
        return Receipt()


def _settle(jobs: list[Job], result: Receipt | Exception) -> None:
    for job in jobs:
        if job.future.done():  # the connection was cut meanwhile (stop)
            continue
        if isinstance(result, Exception):
            job.future.set_exception(result)
        else:
            job.future.set_result(result)
