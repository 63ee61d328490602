"""MDAV over paper 003's users and the cluster aggregation of §3.2.3.

The aggregation ``C`` of a group of users is a list of queries of length ``round(mean queries per user)``: each
user contributes in proportion to their number of queries (largest remainders), and within a user the query
strings keep their frequencies (largest remainders again, ties broken by the random source). Each chosen query
string gets the arithmetic mean time and rank of that string's queries in the group and their clicked URL
generalised to the right-most common domain part. This is MDAV's average record.

The representative a cluster *releases* (method ``mdav``) adds what §3.2.3 leaves open (its ``≃``): which strings
a user's share keeps when it is too small for all of them; :mod:`~adapters.microaggregate.shares` offers the
candidates and :mod:`~adapters.microaggregate.srp_floor` picks each cluster's. Method ``mdav-paper`` releases the
printed rounding.

The distance (eq. 1-4) is :mod:`~adapters.microaggregate.distance`'s, plus (method ``mdav``) a term for how users
repeat their queries (:class:`UserSpace`); a log is normalised with its own bounds, a
block of a bigger log with the whole log's (:mod:`~adapters.microaggregate.blocks`). ``docs/MICROAGGREGATION.md``
has the whole picture.
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

from adapters.microaggregate.classified import Classify, kb_classify, node_table
from adapters.microaggregate.distance import LogSpace, QuerySet, host_labels, normalise
from adapters.microaggregate.information import entropy_bits
from adapters.microaggregate.log import AOL_TIME, FlatLog, UserLog, gather
from adapters.microaggregate.mdav import mdav
from adapters.microaggregate.shares import Member, options
from adapters.microaggregate.srp_floor import SRP_LEVELS, pick, score
from sidecar.api import Event

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.intp]
#: Called with the number of users placed in clusters so far (for a progress bar).
Progress = Callable[[int], None]


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
    """The users of a log as MDAV records: paper 003's distance, §3.2.3's average record.

    Normalised with ``log.bounds`` when the log is a block of a bigger one, else with its own bounds. ``threads``
    is rapidfuzz's (default: :data:`~adapters.microaggregate.distance.THREADS`). ``repetition`` (method ``mdav``)
    adds to eq. 4 a third term, as heavy as each of its two: how differently two users repeat their queries,
    ``|ĥ_1 - ĥ_2|`` with ``ĥ`` a user's query entropy over ``log2`` of the log's largest query count. Eq. 4 does not
    see it (same query sets and counts, one user repeating one query, the other spreading evenly: distance 0),
    and it is what paper 003's ILR measures; the count term is its proxy (§3.2.2)."""

    def __init__(self, log: UserLog, rng: random.Random, threads: int | None = None, repetition: bool = False) -> None:
        self.rng = rng
        flat = FlatLog.of(log)
        bounds = log.bounds or flat.bounds()
        domain_ids: dict[tuple[str, ...], int] = {}
        host_dom: dict[str, int] = {"": -1}
        for url in dict.fromkeys(flat.url):  # the clicked domains first: they are the distance's columns
            if url not in host_dom:
                labels = host_labels(url)
                host_dom[url] = domain_ids.setdefault(labels, len(domain_ids)) if labels else -1
        hosts = len(domain_ids)
        for labels in list(domain_ids):  # every suffix: the generalised URLs are domains too
            for cut in range(1, len(labels)):
                domain_ids.setdefault(labels[:cut], len(domain_ids))
        self.urls = flat.url
        self.strings = flat.strings
        self.domains = list(domain_ids)
        self.domain_ids = domain_ids
        self.bounds = bounds
        self.space = LogSpace(self.strings, self.domains, bounds.words, threads, hosts)
        self.sid = flat.sid
        self.time = flat.time
        self.rank = flat.rank
        self.dom = np.array([host_dom[u] for u in flat.url], dtype=np.intp)
        self.counts = flat.counts
        self.starts = flat.starts
        self.ntime = normalise(self.time, bounds.time)
        self.nrank = normalise(self.rank, bounds.rank)
        self.ncount = normalise(self.counts.astype(np.float64), bounds.count)
        self.repetition = repetition
        self.entropy_scale = math.log2(max(2.0, bounds.count[1]))  # the most any user of the whole log can have
        self.nentropy = np.array(
            [self._entropy(self.sid[int(a) : int(a) + int(n)].tolist()) for a, n in zip(self.starts, self.counts)]
            if repetition
            else []
        )

    def _entropy(self, sids: Sequence[int]) -> float:
        """The entropy of a user's query strings over the log's largest possible one (in [0, 1])."""
        return entropy_bits(Counter(sids).values()) / self.entropy_scale

    def _queries_of(self, users: Ints) -> tuple[Ints, Ints]:
        """The query indexes of ``users`` concatenated, and where each user's start in them."""
        return gather(self.starts, self.counts, users)

    def _query_set(self, index: Ints) -> QuerySet:
        return QuerySet(self.sid[index], self.ntime[index], self.nrank[index], self.dom[index])

    # --- the Space protocol of mdav ---

    def to_record(self, record: int, members: Ints) -> Floats:
        a = self._query_set(np.arange(self.starts[record], self.starts[record] + self.counts[record], dtype=np.intp))
        entropy = float(self.nentropy[record]) if self.repetition else 0.0
        return self._distances(a, float(self.ncount[record]), entropy, members)

    def to_average(self, members: Ints) -> Floats:
        agg = self.aggregate(members)
        a = QuerySet(
            np.array(agg.sid, dtype=np.intp),
            normalise(np.array(agg.time, dtype=np.float64), self.bounds.time),
            normalise(np.array(agg.rank, dtype=np.float64), self.bounds.rank),
            np.array(agg.dom, dtype=np.intp),
        )
        count = normalise(np.array([float(len(agg.sid))]), self.bounds.count)[0]
        return self._distances(a, float(count), self._entropy(agg.sid) if self.repetition else 0.0, members)

    def _distances(self, a: QuerySet, count: float, entropy: float, members: Ints) -> Floats:
        """Eq. 4 from ``a`` to ``members``; with :attr:`repetition`, ``(2 eq. 4 + |ĥ_a - ĥ_u|) / 3`` (``entropy``:
        ``ĥ_a``, unused without it)."""
        index, offsets = self._queries_of(members)
        eq4 = self.space.user_distances(a, count, self._query_set(index), offsets, self.ncount[members])
        if not self.repetition:
            return eq4
        return (2.0 * eq4 + np.abs(entropy - self.nentropy[members])) / 3.0

    # --- aggregation (§3.2.3) ---

    def members(self, users: Ints, strata: Ints | None = None) -> list[Member]:
        """``users`` as :class:`Member` rows for the string choice (stratified by ``strata`` when given)."""
        return [
            Member.of(
                self.sid[int(self.starts[u]) : int(self.starts[u]) + int(self.counts[u])].tolist(), self.rng, strata
            )
            for u in users.tolist()
        ]

    def size(self, users: Ints) -> int:
        """§3.2.3's representative size: the members' mean number of queries, rounded (at least 1)."""
        return max(1, round(int(self.counts[users].sum()) / len(users)))

    def aggregate(self, members: Ints, chosen: Counter[int] | None = None) -> Aggregate:
        """The group's aggregation releasing ``chosen`` (string id -> copies); by default the printed rounding."""
        if chosen is None:
            chosen = options(self.members(members), self.size(members), self.rng, (0.0,))[0]
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
    """The clusters (user indexes), each one's aggregate, the query strings the aggregates' ``sid`` index, and the
    number of blocks the users were cut into (:mod:`~adapters.microaggregate.blocks`)."""

    clusters: list[Ints]
    aggregates: list[Aggregate]
    strings: list[str]
    blocks: int = 1
    #: Blocks whose SRP floor was out of reach (:mod:`~adapters.microaggregate.srp_floor`; ``mdav`` only).
    floor_unmet: int = 0


def microaggregate_mdav(
    log: UserLog,
    k: int,
    rng: random.Random,
    progress: Progress | None = None,
    matched: bool = True,
    classify: Classify | None = None,
) -> Result:
    """Cluster the users of ``log`` with MDAV (k..2k-1 users each) and aggregate every cluster. ``matched``: the
    distance has the repetition term (:class:`UserSpace`) and each cluster releases the candidate of
    :func:`options` with the least ILR under the block's SRP floor (:mod:`~adapters.microaggregate.srp_floor`;
    categories from ``classify``, default the knowledge base's). Else eq. 4 and the printed rounding."""
    space = UserSpace(log, rng, repetition=matched)
    clusters = mdav(space, len(log.users), k, progress)
    space.space.clear()
    if not matched:
        return Result(clusters, [space.aggregate(c) for c in clusters], space.strings)
    nodes, _, _ = node_table((classify or kb_classify())(space.strings), SRP_LEVELS)
    rows = [space.members(c, nodes) for c in clusters]
    offered = [options(r, space.size(c), rng) for r, c in zip(rows, clusters)]
    choice, short = pick([score(r, o, nodes) for r, o in zip(rows, offered)], k)
    aggregates = [space.aggregate(c, o[j]) for c, o, j in zip(clusters, offered, choice)]
    return Result(clusters, aggregates, space.strings, floor_unmet=int(short.any()))


def microaggregate_mdav_paper(log: UserLog, k: int, rng: random.Random, progress: Progress | None = None) -> Result:
    """:func:`microaggregate_mdav` with §3.2.3's rounding as printed: every share over all the user's strings."""
    return microaggregate_mdav(log, k, rng, progress, matched=False)


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
