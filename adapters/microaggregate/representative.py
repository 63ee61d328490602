"""A cluster's released queries as an ``Aggregate`` (for ``odp`` and ``semantic-mdav``).

The methods choose which query strings the cluster releases, and how often; the other fields follow
``mdav``'s §3.2.3 rule (paper 003), because papers 002 and 000 only speak of query strings: each chosen string
gets the arithmetic mean time and rank of that string's queries in the cluster (NaN when none has one) and their
clicked URLs generalised to the right-most common domain part (the scheme kept when all share it).
"""

from __future__ import annotations

import math
from collections import Counter

import numpy as np

from adapters.microaggregate.aggregate import Aggregate, common_suffix
from adapters.microaggregate.classified import Ints, Queries
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
        index = index[np.argsort(q.sid[index], kind="stable")]
        bounds = [*np.searchsorted(q.sid[index], keys, side="left").tolist(), len(index)]
        agg = Aggregate([], [], [], [], [])
        for g, s in enumerate(keys.tolist()):
            qs = index[bounds[g] : bounds[g + 1]]
            if not len(qs):
                raise ValueError("a chosen query string is not among the cluster's queries")
            times, ranks = q.time[qs], q.rank[qs]
            time = float(np.nanmean(times)) if np.any(~np.isnan(times)) else math.nan
            rank = float(np.nanmean(ranks)) if np.any(~np.isnan(ranks)) else math.nan
            labels = common_suffix([self.labels[i] for i in qs.tolist() if self.labels[i]])
            dom = self.domain_ids.setdefault(labels, len(self.domain_ids)) if labels else -1
            url = ".".join(reversed(labels))
            schemes = {u.split("://", 1)[0] if "://" in u else "" for u in (q.url[i] for i in qs.tolist()) if u}
            if url and len(schemes) == 1 and (scheme := schemes.pop()):
                url = f"{scheme}://{url}"
            n = chosen[s]
            agg.sid.extend([s] * n)
            agg.time.extend([time] * n)
            agg.rank.extend([rank] * n)
            agg.dom.extend([dom] * n)
            agg.url.extend([url] * n)
        return agg
