"""The forward source's batches: what every connection has waiting at a moment goes to ``runtime.receive`` in
one batch (one transaction), on the shared host's worker, one batch at a time; each connection acks its chunks
once the batch its entries went in with returned.

The batcher occupies the host's one worker for as long as the source runs: it waits on a queue and takes the
next batch the moment one returned, without a round trip through the event loop (measured with ``querylog
bench forward``: starting each batch from the loop merged later and cost about 12% of the throughput). The loop
reads and parses on meanwhile; what arrives while a batch runs joins the next one."""

from __future__ import annotations

import asyncio
import queue
from dataclasses import dataclass
from typing import Any

from adapters.forward.protocol import Entry
from sidecar.api import Codec, Receipt, RecordBatch, Runtime
from sidecar.serving import ServerHost

ORIGIN = "forward"
#: A bad entry to dead-letter: its reason, and a line of counts to keep in the dead-letter file (never a value).
Bad = tuple[str, str | None]


@dataclass
class Job:
    """One connection's entries (and bad entries by reason) waiting for a batch."""

    entries: list[Entry]
    bad: list[Bad]
    future: asyncio.Future[Receipt]


class Batcher:
    """Merges what every connection has waiting into one ``runtime.receive`` (on the host's worker), one at a time."""

    def __init__(self, host: ServerHost, runtime: Runtime, codec: Codec, max_events: int) -> None:
        """``codec``: the forward codec (entries), or the schema's codec that reads JSON objects itself
        (``json_records``, ``format: ubi``): it is given each entry's map."""
        self.host = host
        self.runtime = runtime
        self.codec = codec
        self.maps = bool(getattr(codec, "json_records", False))
        self.max_events = max_events
        self.batches = 0
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._running: asyncio.Future[None] | None = None

    def start(self) -> None:
        """On the loop: occupy the host's worker with the batching loop."""
        self._running = asyncio.ensure_future(self.host.run_in_worker(self._run, asyncio.get_running_loop()))

    def close(self) -> None:
        """No batch starts after the one running now (what was not taken is never acknowledged)."""
        self._queue.put(None)

    async def submit(self, entries: list[Entry], bad: list[Bad]) -> Receipt:
        """The receipt of the batch these entries went in with (raises what ``receive`` raised)."""
        job = Job(entries, bad, asyncio.get_running_loop().create_future())
        self._queue.put(job)
        return await job.future

    def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        """On the worker: one batch after another until :meth:`close`; each job's result is set on the loop."""
        while True:
            job = self._queue.get()
            if job is None:
                return
            jobs = [job]
            n = len(job.entries)
            closing = False
            while n < self.max_events:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    closing = True
                    break
                jobs.append(more)
                n += len(more.entries)
            try:
                receipt: Receipt | Exception = self._receive(jobs)
            except Exception as exc:
                receipt = exc
            try:
                loop.call_soon_threadsafe(_settle, jobs, receipt)
            except RuntimeError:  # the loop is closed: the source stopped, no connection is left to answer
                return
            if closing:
                return

    def _receive(self, jobs: list[Job]) -> Receipt:
        dead = self.runtime.dead_letters
        for job in jobs:
            for reason, note in job.bad:
                dead.add(reason, ORIGIN, None, note)
        records: list[Any] = [e for job in jobs for e in job.entries] if len(jobs) > 1 else jobs[0].entries
        if self.maps:
            records = [e.record for e in records]
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
