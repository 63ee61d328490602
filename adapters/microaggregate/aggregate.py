"""MDAV over paper 003's users and the cluster aggregation of §3.2.3.

The aggregation ``C`` of a group of users is a list of queries of length ``round(mean queries per user)``: each
user contributes in proportion to their number of queries (largest remainders), and within a user the query
strings keep their frequencies (largest remainders again, ties broken by the random source). Each chosen query
string gets the arithmetic mean time and rank of that string's queries in the group and their clicked URL
generalised to the right-most common domain part. The same aggregation is MDAV's average record.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
import numpy.typing as npt

from adapters.microaggregate.distance import LogSpace, QuerySet, host_labels
from adapters.microaggregate.log import AOL_TIME, UserLog, parse_rank, parse_time
from adapters.microaggregate.mdav import mdav
from sidecar.api import Event

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.intp]
#: Called with the number of users placed in clusters so far (for a progress bar).
Progress = Callable[[int], None]


def apportion(total: int, weights: Sequence[float], rng: random.Random) -> list[int]:
    """Split ``total`` in proportion to ``weights`` by largest remainders (ties in random order)."""
    whole = sum(weights)
    shares = [total * w / whole for w in weights]
    out = [math.floor(s) for s in shares]
    keys = [(-(s - f), rng.random()) for s, f in zip(shares, out)]
    for i in sorted(range(len(weights)), key=keys.__getitem__)[: total - sum(out)]:
        out[i] += 1
    return out


def common_suffix(domains: list[tuple[str, ...]]) -> tuple[str, ...]:
    """The right-most labels all ``domains`` share (label tuples, right-most first)."""
    if not domains:
        return ()
    first = domains[0]
    size = min(len(d) for d in domains)
    n = 0
    while n < size and all(d[n] == first[n] for d in domains):
        n += 1
    return first[:n]


@dataclass
class Aggregate:
    """A cluster's representative queries: string id, raw mean time and rank (NaN: none), domain id (-1: none)
    and the generalised URL text (the scheme kept when all the URLs share it)."""

    sid: list[int]
    time: list[float]
    rank: list[float]
    dom: list[int]
    url: list[str]


class UserSpace:
    """The users of a log as MDAV records: paper 003's distance, §3.2.3's average record."""

    def __init__(self, log: UserLog, rng: random.Random) -> None:
        self.rng = rng
        string_ids: dict[str, int] = {}
        domain_ids: dict[tuple[str, ...], int] = {}
        sid: list[int] = []
        times: list[float] = []
        ranks: list[float] = []
        doms: list[int] = []
        self.urls: list[str] = []
        counts: list[int] = []
        for group in log.events:
            counts.append(len(group))
            for event in group:
                sid.append(string_ids.setdefault(str(event.query), len(string_ids)))
                times.append(parse_time(event.time))
                ranks.append(parse_rank(event.rank))
                self.urls.append("" if event.url is None else str(event.url))
                labels = host_labels(str(event.url)) if event.url not in (None, "") else ()
                for cut in range(1, len(labels) + 1):  # every suffix: the generalised URLs are domains too
                    domain_ids.setdefault(labels[:cut], len(domain_ids))
                doms.append(domain_ids[labels] if labels else -1)
        self.strings = list(string_ids)
        self.domains = list(domain_ids)
        self.domain_ids = domain_ids
        self.space = LogSpace(self.strings, self.domains)
        self.sid = np.array(sid, dtype=np.intp)
        self.time = np.array(times, dtype=np.float64)
        self.rank = np.array(ranks, dtype=np.float64)
        self.dom = np.array(doms, dtype=np.intp)
        self.counts = np.array(counts, dtype=np.intp)
        self.starts = np.concatenate([[0], np.cumsum(self.counts)[:-1]]).astype(np.intp)
        self.bounds = [
            (float(np.nanmin(v)), float(np.nanmax(v))) if np.any(~np.isnan(v)) else (0.0, 0.0)
            for v in (self.time, self.rank)
        ]
        self.count_bounds = (float(self.counts.min()), float(self.counts.max()))

    # --- normalisation ---

    @staticmethod
    def _norm(values: Floats, bounds: tuple[float, float]) -> Floats:
        low, high = bounds
        return (values - low) / (high - low) if high > low else np.where(np.isnan(values), np.nan, 0.0)

    def _norm_count(self, counts: Floats) -> Floats:
        return self._norm(counts, self.count_bounds)

    def _query_set(self, index: Ints) -> QuerySet:
        return QuerySet(
            self.sid[index],
            self._norm(self.time[index], self.bounds[0]),
            self._norm(self.rank[index], self.bounds[1]),
            self.dom[index],
        )

    def _queries_of(self, users: Ints) -> tuple[Ints, Ints]:
        """The query indexes of ``users`` concatenated, and where each user's start in them."""
        counts = self.counts[users]
        offsets = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.intp)
        index = np.repeat(self.starts[users] - offsets, counts) + np.arange(int(counts.sum()), dtype=np.intp)
        return index, offsets

    # --- the Space protocol of mdav ---

    def to_record(self, record: int, members: Ints) -> Floats:
        a = self._query_set(np.arange(self.starts[record], self.starts[record] + self.counts[record], dtype=np.intp))
        count = self._norm_count(np.array([float(self.counts[record])]))[0]
        return self._distances(a, float(count), members)

    def to_average(self, members: Ints) -> Floats:
        agg = self.aggregate(members)
        a = QuerySet(
            np.array(agg.sid, dtype=np.intp),
            self._norm(np.array(agg.time, dtype=np.float64), self.bounds[0]),
            self._norm(np.array(agg.rank, dtype=np.float64), self.bounds[1]),
            np.array(agg.dom, dtype=np.intp),
        )
        count = self._norm_count(np.array([float(len(agg.sid))]))[0]
        return self._distances(a, float(count), members)

    def _distances(self, a: QuerySet, count: float, members: Ints) -> Floats:
        out = np.empty(len(members), dtype=np.float64)
        step = max(1, (1 << 21) // max(1, len(a.sid) * max(1, int(self.counts.mean()))))
        for lo in range(0, len(members), step):
            block = members[lo : lo + step]
            index, offsets = self._queries_of(block)
            counts = self._norm_count(self.counts[block].astype(np.float64))
            out[lo : lo + step] = self.space.user_distances(a, count, self._query_set(index), offsets, counts)
        return out

    # --- aggregation (§3.2.3) ---

    def aggregate(self, members: Ints) -> Aggregate:
        counts = [int(self.counts[u]) for u in members]
        size = max(1, round(sum(counts) / len(counts)))
        chosen: Counter[int] = Counter()
        for user, quota in zip(members, apportion(size, counts, self.rng)):
            if not quota:
                continue
            start = int(self.starts[user])
            freq = Counter(self.sid[start : start + int(self.counts[user])].tolist())
            strings = list(freq)
            for s, n in zip(strings, apportion(quota, [freq[s] for s in strings], self.rng)):
                if n:
                    chosen[s] += n
        index, _ = self._queries_of(members)
        keys = np.array(sorted(chosen), dtype=np.intp)
        index = index[np.isin(self.sid[index], keys)]
        index = index[np.argsort(self.sid[index], kind="stable")]
        bounds = [*np.searchsorted(self.sid[index], keys, side="left").tolist(), len(index)]
        agg = Aggregate([], [], [], [], [])
        for g, s in enumerate(keys.tolist()):
            n = chosen[s]
            qs = index[bounds[g] : bounds[g + 1]]
            times, ranks = self.time[qs], self.rank[qs]
            time = float(times[~np.isnan(times)].mean()) if np.any(~np.isnan(times)) else math.nan
            rank = float(ranks[~np.isnan(ranks)].mean()) if np.any(~np.isnan(ranks)) else math.nan
            labels = common_suffix([self.domains[d] for d in self.dom[qs].tolist() if d >= 0])
            dom = self.domain_ids[labels] if labels else -1
            url = ".".join(reversed(labels))
            clicked = [self.urls[q] for q in qs.tolist() if self.urls[q]]
            schemes = {u.split("://", 1)[0] if "://" in u else "" for u in clicked}
            if url and len(schemes) == 1 and (scheme := schemes.pop()):
                url = f"{scheme}://{url}"
            for _ in range(n):
                agg.sid.append(s)
                agg.time.append(time)
                agg.rank.append(rank)
                agg.dom.append(dom)
                agg.url.append(url)
        return agg


@dataclass
class Result:
    """The clusters (user indexes), each one's aggregate, and the query strings the aggregates' ``sid`` index."""

    clusters: list[Ints]
    aggregates: list[Aggregate]
    strings: list[str]


def microaggregate_mdav(log: UserLog, k: int, rng: random.Random, progress: Progress | None = None) -> Result:
    """Cluster the users of ``log`` with MDAV (k..2k-1 users each) and aggregate every cluster."""
    space = UserSpace(log, rng)
    clusters = mdav(space, len(log.users), k)
    if progress is not None:
        progress(len(log.users))
    return Result(clusters, [space.aggregate(c) for c in clusters], space.strings)


def _like(template: Any, value: float | str | None) -> Any:
    """``value`` in the type of the input's field: text for TSV and text JSON fields, numbers for numeric ones."""
    if isinstance(template, int | float) and not isinstance(template, bool) and isinstance(value, float):
        return round(value)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None if template is None else ""
    return str(round(value)) if isinstance(value, float) else value


def output_events(log: UserLog, result: Result) -> Iterator[Event]:
    """Every user, in input order, with their cluster's aggregated queries (in time order) in their own schema."""
    cluster_of: dict[int, int] = {}
    for c, members in enumerate(result.clusters):
        for u in members.tolist():
            cluster_of[u] = c
    numeric_time = log.numeric_time
    strings = result.strings
    for u, user in enumerate(log.users):
        agg = result.aggregates[cluster_of[u]]
        template = log.events[u][0]
        order = sorted(range(len(agg.sid)), key=lambda i: (math.isnan(agg.time[i]), agg.time[i], agg.sid[i]))
        for i in order:
            t = agg.time[i]
            time_text: float | str | None
            if math.isnan(t):
                time_text = None
            elif numeric_time:
                time_text = float(t)
            else:
                time_text = datetime.fromtimestamp(round(t), UTC).strftime(AOL_TIME)
            url = agg.url[i]
            yield Event(
                user,
                strings[agg.sid[i]],
                _like(template.time, time_text),
                _like(template.rank, agg.rank[i]),
                _like(template.url, url or None),
                template.record,
                template.raw,
                template.codec,
                template.eol,
            )
