"""A cluster's released queries as an ``Aggregate`` (for ``odp`` and ``semantic-mdav``).

The methods choose which query strings the cluster releases, and how often; the other fields follow
``mdav``'s §3.2.3 rule (paper 003), because papers 002 and 000 only speak of query strings: each chosen string
gets the arithmetic mean time and rank of that string's queries in the cluster (NaN when none has one) and their
clicked URLs generalised to the right-most common domain part (the scheme kept when all share it).
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from adapters.microaggregate.aggregate import Aggregate, common_suffix
from adapters.microaggregate.classified import Floats, Ints, Queries
from adapters.microaggregate.distance import host_labels


class Representatives:
    """Builds cluster aggregates over one log's :class:`Queries`."""

    def __init__(self, queries: Queries) -> None:
        self.q = queries
        self.labels = [host_labels(u) if u else () for u in queries.url]
        self.domain_ids: dict[tuple[str, ...], int] = {}

    def build(self, members: Ints, chosen: Counter[int]) -> Aggregate:
        """The aggregate releasing ``chosen[s]`` copies of string ``s`` (strings of ``members``' queries)."""
        q = self.q
        index = q.of(members)
        keys = np.array(sorted(s for s, n in chosen.items() if n > 0), dtype=np.intp)
        index = index[np.isin(q.sid[index], keys)]
        group = np.searchsorted(keys, q.sid[index])
        if len(np.unique(group)) != len(keys):
            raise ValueError("a chosen query string is not among the cluster's queries")
        time = _group_mean(group, q.time[index], len(keys))
        rank = _group_mean(group, q.rank[index], len(keys))
        agg = Aggregate([], [], [], [], [])
        clicked = np.array([bool(q.url[i]) for i in index.tolist()], dtype=bool)
        by_group: dict[int, list[int]] = {}  # the queries with a clicked URL, per chosen string
        for i, g in zip(index[clicked].tolist(), group[clicked].tolist()):
            by_group.setdefault(g, []).append(i)
        for g, s in enumerate(keys.tolist()):
            dom, url = -1, ""
            if g in by_group:
                labels = common_suffix([self.labels[i] for i in by_group[g] if self.labels[i]])
                dom = self.domain_ids.setdefault(labels, len(self.domain_ids)) if labels else -1
                url = ".".join(reversed(labels))
                schemes = {q.url[i].split("://", 1)[0] if "://" in q.url[i] else "" for i in by_group[g]}
                if url and len(schemes) == 1 and (scheme := schemes.pop()):
                    url = f"{scheme}://{url}"
            n = chosen[s]
            agg.sid.extend([s] * n)
            agg.time.extend([float(time[g])] * n)
            agg.rank.extend([float(rank[g])] * n)
            agg.dom.extend([dom] * n)
            agg.url.extend([url] * n)
        return agg


def _group_mean(group: Ints, values: Floats, groups: int) -> Floats:
    """The mean of the non-NaN ``values`` of each group (NaN for a group with none)."""
    ok = ~np.isnan(values)
    total = np.bincount(group[ok], weights=values[ok], minlength=groups)
    count = np.bincount(group[ok], minlength=groups)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean: Floats = np.where(count > 0, total / np.maximum(count, 1), np.nan)
    return mean
