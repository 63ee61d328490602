"""The microaggregation methods by name: each clusters a log's users into groups of k..2k-1 and aggregates them.

A method is ``(log, k, rng, progress) -> Result``; ``progress`` (or None) is called with the number of users
placed so far. ``querylog microaggregate --method`` and the benchmarks choose from :data:`METHODS`.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from adapters.microaggregate.aggregate import Progress, Result, microaggregate_mdav, microaggregate_mdav_paper
from adapters.microaggregate.log import UserLog

Method = Callable[[UserLog, int, random.Random, Progress | None], Result]


def microaggregate_odp(log: UserLog, k: int, rng: random.Random, progress: Progress | None) -> Result:
    """:func:`adapters.microaggregate.odp.microaggregate_odp` (scipy and the KB load only when it runs)."""
    from adapters.microaggregate.odp import microaggregate_odp as run

    return run(log, k, rng, progress)


def microaggregate_semantic_mdav(log: UserLog, k: int, rng: random.Random, progress: Progress | None) -> Result:
    """:func:`adapters.microaggregate.semantic.microaggregate_semantic_mdav` (loaded only when it runs)."""
    from adapters.microaggregate.semantic import microaggregate_semantic_mdav as run

    return run(log, k, rng, progress)


#: Method name -> (function, one-line description for ``--help``).
METHODS: dict[str, tuple[Method, str]] = {
    "mdav": (
        microaggregate_mdav,
        "paper 003: MDAV, user distance eq. 1-4 plus a repetition term, aggregation §3.2.3 with threshold-sampled "
        "shares, the least ILR keeping SRP above 1/k at L1..L5",
    ),
    "mdav-paper": (microaggregate_mdav_paper, "paper 003 as printed: eq. 1-4, every share over all the strings"),
    "odp": (microaggregate_odp, "paper 002: category matrices L1..L5, min-count similarity, greedy clusters, Alg. 5"),
    "semantic-mdav": (
        microaggregate_semantic_mdav,
        "paper 000: MDAV over category distributions (taxonomy EMD), stratified query sampling",
    ),
}
