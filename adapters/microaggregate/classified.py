"""A log's queries as flat arrays with each distinct query string's taxonomy path (for ``odp`` and ``semantic-mdav``).

Each distinct query string is classified once by the knowledge base's classifier (:mod:`knowledge.classifier`,
the way the ``classify`` filter loads it): one category path ``L1..L5`` per query (up to :data:`LEVELS` levels;
many paths are shorter). Every prefix of a path is a taxonomy *node*; node ids are dense over the nodes the log
uses, all levels together. An empty query and one the classifier cannot categorise have no path (node -1 at
every level); the methods say what they do with them, and :class:`Queries` counts them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import structlog

from adapters.microaggregate.log import FlatLog, UserLog, gather

if TYPE_CHECKING:
    from knowledge.classifier import Classifier

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.intp]

#: Taxonomy depth used (paper 002 §4.2.1 stops at L5, the deepest level the classifier gives).
LEVELS = 5

#: Distinct query strings -> their category paths (L1 first), None when uncategorisable.
Classify = Callable[[list[str]], list[tuple[str, ...] | None]]


@cache
def _classifier(kb_path: Path) -> Classifier:
    from knowledge.classifier import Classifier

    return Classifier.load(kb_path, build_if_needed=True)


def kb_classify(kb_path: Path | None = None) -> Classify:
    """The knowledge base's classifier (default: ``$QUERYLOG_KB`` or the cache; built when missing or stale),
    loaded once per process and path (a blocked run classifies block after block)."""
    from knowledge import default_kb_path  # the knowledge package loads in a third of a second: only when used

    classifier = _classifier(kb_path or default_kb_path())

    def classify(strings: list[str]) -> list[tuple[str, ...] | None]:
        out: list[tuple[str, ...] | None] = []
        for s in strings:
            result = classifier.classify_uncached(s) if s and not s.isspace() else None
            out.append(None if result is None else result.path)
        return out

    return classify


@dataclass
class Queries:
    """The queries of a log in user order (user ``u``'s are ``starts[u] : starts[u] + counts[u]``).

    ``sid`` indexes ``strings``; ``time``/``rank`` are NaN when missing, ``url`` is ``""`` when none.
    ``nodes[s, l]`` is the node of string ``s`` at level ``l`` (0-based), -1 below its path's end;
    ``node_level[c]`` is node ``c``'s level and ``node_parent[c]`` its parent node (-1 at L1).
    """

    strings: list[str]
    sid: Ints
    time: Floats
    rank: Floats
    url: list[str]
    counts: Ints
    starts: Ints
    nodes: Ints
    node_level: Ints
    node_parent: Ints
    #: Queries (events) whose string has no category, and how many distinct strings that is.
    uncategorised: int
    uncategorised_strings: int

    @property
    def users(self) -> int:
        """Number of users."""
        return len(self.counts)

    def of(self, users: Ints) -> Ints:
        """The query indexes of ``users``, concatenated in the order given."""
        return gather(self.starts, self.counts, users)[0]


def node_table(paths: list[tuple[str, ...] | None], levels: int = LEVELS) -> tuple[Ints, Ints, Ints]:
    """Dense taxonomy node ids of ``paths`` (one per distinct string): ``nodes[s, l]`` is string ``s``'s node at
    level ``l`` (0-based; -1 below its path's end, every level -1 without a path) for ``levels`` levels, then each
    node's level and parent node (-1 at L1)."""
    node_ids: dict[tuple[str, ...], int] = {}
    node_level: list[int] = []
    parents: list[int] = []
    nodes = np.full((len(paths), levels), -1, dtype=np.intp)
    for s, path in enumerate(paths):
        if not path:
            continue
        parent = -1
        for level in range(min(levels, len(path))):
            key = path[: level + 1]
            node = node_ids.get(key)
            if node is None:
                node = node_ids[key] = len(node_ids)
                node_level.append(level)
                parents.append(parent)
            nodes[s, level] = node
            parent = node
    return nodes, np.array(node_level, dtype=np.intp), np.array(parents, dtype=np.intp)


def read_queries(log: UserLog, classify: Classify) -> Queries:
    """Flatten ``log`` (:class:`~adapters.microaggregate.log.FlatLog`) and classify each distinct string once."""
    flat = FlatLog.of(log)
    strings = flat.strings
    nodes, node_level, node_parent = node_table(classify(strings))
    missing = nodes[:, 0] < 0
    return Queries(
        strings=strings,
        sid=flat.sid,
        time=flat.time,
        rank=flat.rank,
        url=flat.url,
        counts=flat.counts,
        starts=flat.starts,
        nodes=nodes,
        node_level=node_level,
        node_parent=node_parent,
        uncategorised=int(missing[flat.sid].sum()) if len(flat.sid) else 0,
        uncategorised_strings=int(missing.sum()),
    )


def prepare(log: UserLog, k: int, method: str, classify: Classify | None) -> Queries:
    """The checks and the classified queries every classifying method starts from; logs the uncategorised count.

    ``classify`` maps distinct query strings to category paths; default: the knowledge base's classifier."""
    if k < 2:
        raise ValueError(f"{method} needs k >= 2")
    if len(log.users) < k:
        raise ValueError(f"{method} needs at least k users")
    q = read_queries(log, classify or kb_classify())
    structlog.get_logger("querylog.microaggregate").info(
        "queries_uncategorised", method=method, count=q.uncategorised, distinct=q.uncategorised_strings, of=len(q.sid)
    )
    return q
