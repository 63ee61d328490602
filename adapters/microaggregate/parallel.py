"""Blocks on Dask (issue 15): a ``distributed`` LocalCluster of N single-threaded processes, or a scheduler.

Imported only when a run asks for more than one worker or gives a scheduler address: one process is the
embedded default and never imports Dask. Each block is one task
(:func:`~adapters.microaggregate.blocks.run_packed_block`) whose block (its users' roles as plain columns) is
scattered to the cluster first, with k, the method name, the seed and the block index as arguments; tasks are
submitted largest block first so the longest one does not start last.
Which worker runs which block does not change the result (each block's random source depends only on the seed
and the block's index). A worker that dies is replaced and its task retried by the scheduler (``distributed``'s
own rule, up to its ``allowed-failures``); a task that fails raises here. Workers of a given scheduler are the
operator's: ``docs/MICROAGGREGATION.md`` says which of their settings matter.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from adapters.microaggregate.aggregate import Progress, Result
from adapters.microaggregate.blocks import PackedBlock, run_packed_block


def run_on_dask(
    blocks: Sequence[PackedBlock],
    k: int,
    method: str,
    seed: int | None,
    workers: int,
    scheduler: str | None,
    progress: Progress | None = None,
) -> list[Result]:
    """Every block's result, in block order; ``progress`` gets the users of the blocks done so far."""
    from distributed import Client, LocalCluster, as_completed

    cluster: Any = None
    if scheduler:
        client: Any = Client(scheduler)  # type: ignore[no-untyped-call]  # distributed has no annotations here
    else:
        import dask

        # distributed's default MALLOC_TRIM_THRESHOLD_=65536 turns every 16 MiB working block into fresh pages
        # (glibc then mmaps and unmaps it each time): +50% CPU here. The workers keep the rest of the defaults.
        environ = dict(dask.config.get("distributed.nanny.pre-spawn-environ"))
        environ.pop("MALLOC_TRIM_THRESHOLD_", None)
        with dask.config.set({"distributed.nanny.pre-spawn-environ": environ}):
            cluster = LocalCluster(  # type: ignore[no-untyped-call]
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=":0"
            )
        client = Client(cluster)  # type: ignore[no-untyped-call]
    try:
        order = sorted(range(len(blocks)), key=lambda i: -len(blocks[i].roles[0]))
        data = client.scatter([blocks[i] for i in order])
        run = uuid.uuid4().hex  # task keys unique on a shared scheduler
        futures = {}
        for i, block in zip(order, data):
            futures[i] = client.submit(run_packed_block, block, k, method, seed, i, key=f"microaggregate-{run}-{i}")
        sizes = {futures[i].key: len(blocks[i].log.users) for i in futures}
        done = 0
        for future in as_completed(list(futures.values())):  # type: ignore[no-untyped-call]
            done += sizes[future.key]
            if progress is not None:
                progress(done)
        return [futures[i].result() for i in range(len(blocks))]
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
