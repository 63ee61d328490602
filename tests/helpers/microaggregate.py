"""Small logs and the k-anonymity invariant, shared by the microaggregation method tests."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from adapters.microaggregate.aggregate import Result, output_events
from adapters.microaggregate.log import UserLog, read_log

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"


def toy_log(rows: list[tuple[str, str]], folder: Path) -> UserLog:
    """A TSV log of (user, query) rows, one second apart, a click on every other row."""
    lines = [HEADER]
    for i, (user, query) in enumerate(rows):
        url = f"http://www.site{i % 3}.com" if i % 2 else ""
        lines.append(f"{user}\t{query}\t2006-03-01 10:{i // 60 % 60:02d}:{i % 60:02d}\t{'1' if url else ''}\t{url}")
    path = folder / "log.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return read_log(str(path))


def released_rows(log: UserLog, result: Result) -> dict[str, Counter[tuple[str, ...]]]:
    """Each user's encoded output rows (everything but the user id), as a multiset."""
    out: dict[str, Counter[tuple[str, ...]]] = {}
    for event in output_events(log, result):
        user, *rest = log.codec.encode(event).split("\t")
        out.setdefault(user, Counter())[tuple(rest)] += 1
    return out


def released(log: UserLog, result: Result) -> dict[str, Counter[str]]:
    """Each user's released query strings, from the encoded output lines."""
    out: dict[str, Counter[str]] = {}
    for user, rows in released_rows(log, result).items():
        for row, n in rows.items():
            out.setdefault(user, Counter())[row[0]] += n
    return out


def assert_k_anonymous(log: UserLog, result: Result, k: int, whole_rows: bool = False) -> None:
    """Clusters of k..2k-1 covering every user once; identical multisets inside a cluster (of whole output rows
    with ``whole_rows``, else of query strings, which must be real query strings of the cluster); nobody vanishes."""
    members = np.concatenate(result.clusters)
    assert sorted(members.tolist()) == list(range(len(log.users)))
    rows: dict[str, Counter[Any]] = dict(released_rows(log, result) if whole_rows else released(log, result))
    assert set(rows) == {str(u) for u in log.users}
    for cluster in result.clusters:
        assert k <= len(cluster) <= 2 * k - 1
        sets = [rows[str(log.users[u])] for u in cluster.tolist()]
        assert all(s == sets[0] for s in sets) and sum(sets[0].values()) >= 1
        if not whole_rows:
            cluster_strings = {str(e.query) for u in cluster.tolist() for e in log.events[u]}
            assert set(sets[0]) <= cluster_strings  # real query strings of the cluster only
