"""Blocked microaggregation: users cut into blocks by a cheap rule, any method run per block, results merged.

**The blocking rule.** Users are ordered by (1) their number of queries, then (2) their most frequent query word
(alphabetically; ties in input order), and cut in that order into consecutive blocks. A block is closed once it
holds at least k users and either ``block_size`` users or ``block_size`` times the log's mean queries per user
(so a block of heavy users is smaller: the cost of MDAV grows with the square of a block's queries). A last
block of fewer than k users is merged into the one before it; if that makes more than ``block_size`` users, the
two are split in halves (both >= k, since ``block_size >= 2k``). A log of at most ``block_size`` users is one
block: exactly the unblocked method.

Why this key: eq. 4 of paper 003 gives the difference in query counts half the user distance, and §3.2.2 says
why it matters (aggregating users of very different sizes loses most); MDAV inside a block then does the rest.
The word breaks the many ties among users of equal size towards a shared topic. The key is linear to compute.

**What blocking changes**: a cluster never spans two blocks, so it can be less tight than unblocked MDAV would
make it (more information loss); each cluster still has k..2k-1 users and identical released query multisets.
**What it does not change**: the distance (every block is normalised with the whole log's
:class:`~adapters.microaggregate.log.Bounds`), the aggregation, and, given ``seed``, the result: block ``i``
draws from ``Random("querylog-microaggregate:<seed>:<i>")`` whichever worker runs it, so one worker, two, or a
remote cluster give the same output (``mdav`` also needs the same knowledge base everywhere: its release is chosen
with the classifier's categories). Without a seed every block draws from the OS CSPRNG.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from adapters.microaggregate import distance
from adapters.microaggregate.aggregate import Aggregate, Ints, Progress, Result
from adapters.microaggregate.log import Bounds, FlatLog, UserLog
from adapters.microaggregate.methods import METHODS
from sidecar.api import Event

#: Default ``--block-size``: 1,000 users, the size paper 003 evaluates MDAV on (about 10 s for a generated block).
DEFAULT_BLOCK_SIZE = 1000


def block_rng(seed: int | None, index: int) -> random.Random:
    """Block ``index``'s random source: seeded from ``seed`` and the index, or the OS CSPRNG."""
    return random.SystemRandom() if seed is None else random.Random(f"querylog-microaggregate:{seed}:{index}")


def user_order(flat: FlatLog) -> Ints:
    """Users by (number of queries, most frequent query word, input position)."""
    words = [s.lower().split() for s in flat.strings]
    top: list[str] = []
    for start, count in zip(flat.starts.tolist(), flat.counts.tolist()):
        tally = Counter(w for s in flat.sid[start : start + count].tolist() for w in words[s])
        top.append(min(tally.items(), key=lambda item: (-item[1], item[0]))[0] if tally else "")
    ranked = sorted(range(len(top)), key=lambda u: (int(flat.counts[u]), top[u], u))
    return np.array(ranked, dtype=np.intp)


def cut_blocks(order: Ints, counts: Ints, k: int, block_size: int) -> list[Ints]:
    """Consecutive blocks of ``order`` under the rule of the module docstring (``counts``: queries per user)."""
    if k < 2:
        raise ValueError("k must be at least 2")
    if block_size < 2 * k:
        raise ValueError(f"the block size must be at least 2k = {2 * k}")
    if len(order) < k:
        raise ValueError(f"{len(order)} user(s), fewer than k={k}: k-anonymity is impossible")
    budget = block_size * float(counts.sum()) / len(counts)
    blocks: list[list[int]] = [[]]
    queries = 0
    for u in order.tolist():
        current = blocks[-1]
        if len(current) >= k and (len(current) >= block_size or queries >= budget):
            blocks.append(current := [])
            queries = 0
        current.append(u)
        queries += int(counts[u])
    if len(blocks) > 1 and len(blocks[-1]) < k:
        merged = blocks[-2] + blocks.pop()
        blocks[-1] = merged
        if len(merged) > block_size:
            half = len(merged) // 2
            blocks[-1:] = [merged[:half], merged[half:]]
    return [np.array(b, dtype=np.intp) for b in blocks]


def sub_log(log: UserLog, users: Ints, bounds: Bounds) -> UserLog:
    """The users ``users`` of ``log`` as a log of their own, normalised with the whole log's ``bounds``."""
    return UserLog(
        log.codec, [log.users[u] for u in users.tolist()], [log.events[u] for u in users.tolist()], 0, bounds
    )


@dataclass
class PackedBlock:
    """A block's users as plain columns (the roles a method reads), cheap to pickle to another process."""

    log: UserLog  # codec, users and bounds; no events
    counts: list[int]
    roles: tuple[list[Any], list[Any], list[Any], list[Any]]  # query, time, rank, url

    @classmethod
    def of(cls, log: UserLog, users: Ints, bounds: Bounds) -> PackedBlock:
        """Pack the users ``users`` of ``log``."""
        block = sub_log(log, users, bounds)
        events = [e for group in block.events for e in group]
        roles = ([e.query for e in events], [e.time for e in events], [e.rank for e in events], [e.url for e in events])
        shell = UserLog(block.codec, block.users, [], 0, bounds)
        return cls(shell, [len(g) for g in block.events], roles)

    def unpack(self) -> UserLog:
        """The block as a log (events rebuilt from the roles)."""
        rows = iter(zip(*self.roles))
        events = [[Event(user, *next(rows)) for _ in range(n)] for user, n in zip(self.log.users, self.counts)]
        return UserLog(self.log.codec, self.log.users, events, 0, self.log.bounds)


def merge_results(blocks: Sequence[Ints], results: Sequence[Result]) -> Result:
    """One result over the whole log: block-local user indexes mapped back, strings re-indexed. The merged
    aggregates' ``dom`` stay block-local domain ids (only the blocks' own distance used them)."""
    strings: dict[str, int] = {}
    clusters: list[Ints] = []
    aggregates: list[Aggregate] = []
    for users, result in zip(blocks, results):
        remap = [strings.setdefault(s, len(strings)) for s in result.strings]
        for members, agg in zip(result.clusters, result.aggregates):
            clusters.append(users[members])
            aggregates.append(Aggregate([remap[s] for s in agg.sid], agg.time, agg.rank, agg.dom, agg.url))
    return Result(clusters, aggregates, list(strings), len(blocks), sum(r.floor_unmet for r in results))


def run_packed_block(block: PackedBlock, k: int, method: str, seed: int | None, index: int) -> Result:
    """:func:`run_block` on a packed block in a Dask worker process (string distances on one thread)."""
    return run_block(block.unpack(), k, method, seed, index, threads=1)


def run_block(
    block: UserLog,
    k: int,
    method: str,
    seed: int | None,
    index: int,
    threads: int = -1,
    progress: Progress | None = None,
) -> Result:
    """One block with ``method`` (also a Dask task: everything it needs comes as arguments). ``threads``: the
    string-distance threads of this process (-1: all cores)."""
    distance.THREADS = threads
    return METHODS[method][0](block, k, block_rng(seed, index), progress)


def run_blocked(
    log: UserLog,
    k: int,
    method: str,
    seed: int | None,
    block_size: int = DEFAULT_BLOCK_SIZE,
    workers: int = 1,
    scheduler: str | None = None,
    progress: Progress | None = None,
) -> Result:
    """Microaggregate ``log`` with ``method`` (a name in :data:`METHODS`) block by block; in parallel on Dask
    with ``workers > 1`` (a local cluster of that many processes; not for a single block) or a ``scheduler``
    address. With one worker and no scheduler nothing of Dask is imported. Raises ValueError for k < 2, fewer
    than k users, or a block size under 2k."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; known: {', '.join(METHODS)}")
    flat = FlatLog.of(log)
    bounds = log.bounds or flat.bounds()
    blocks = cut_blocks(user_order(flat), flat.counts, k, block_size)
    if scheduler or (workers > 1 and len(blocks) > 1):  # one block: nothing to run in parallel
        from adapters.microaggregate.parallel import run_on_dask

        packed = [PackedBlock.of(log, users, bounds) for users in blocks]
        return merge_results(blocks, run_on_dask(packed, k, method, seed, workers, scheduler, progress))
    results = []
    placed = 0
    for index, users in enumerate(blocks):

        def report(n: int, offset: int = placed) -> None:
            if progress is not None:
                progress(offset + n)

        results.append(run_block(sub_log(log, users, bounds), k, method, seed, index, progress=report))
        placed += len(users)
        report(0, placed)
    return merge_results(blocks, results)
