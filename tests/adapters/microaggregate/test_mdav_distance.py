"""The fast eq. 1-4 (numpy blocks, cached rows, grouped strings) equals a literal, pair-by-pair reading of them."""

from __future__ import annotations

import math
import random
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.microaggregate import distance
from adapters.microaggregate.aggregate import UserSpace
from adapters.microaggregate.distance import domain_distance, host_labels
from adapters.microaggregate.log import UserLog, parse_rank, parse_time
from sidecar.api import Event, SchemaConfig
from sidecar.codecs import TsvCodec, codec_for

WORDS = ["cat", "cats", "car", "dog", "doge", "food", "a", "zebra", "x"]
URLS = ["", "http://www.a.com", "http://maps.a.com/x", "https://b.org", "http://www.b.org"]


def levenshtein(x: str, y: str) -> float:
    """Edit distance over characters, normalised by the longer string (textbook dynamic programme)."""
    row = list(range(len(y) + 1))
    for i, cx in enumerate(x, 1):
        prev, row[0] = row[0], i
        for j, cy in enumerate(y, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (cx != cy))
    return row[-1] / max(len(x), len(y), 1)


def hausdorff(a: list[Any], b: list[Any], d: Any) -> float:
    if not a and not b:
        return 0.0
    if not a or not b:
        return 1.0
    return max(max(min(d(x, y) for y in b) for x in a), max(min(d(x, y) for x in a) for y in b))


def norm(values: list[float]) -> dict[float, float]:
    present = [v for v in values if v == v]
    low, high = (min(present), max(present)) if present else (0.0, 0.0)
    return {v: ((v - low) / (high - low) if high > low else 0.0) for v in present}


def reference(log: UserLog) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Eq. 4 between every pair of users, each term as the paper (and the module docstring) defines it."""
    events = [e for group in log.events for e in group]
    times = norm([parse_time(e.time) for e in events])
    ranks = norm([parse_rank(e.rank) for e in events])
    lengths = norm([float(len(str(e.query).split())) for e in events])
    counts = norm([float(len(g)) for g in log.events])

    def numeric(x: float, y: float, table: dict[float, float]) -> float:
        if x != x and y != y:
            return 0.0
        if x != x or y != y:
            return 1.0
        return abs(table[x] - table[y])

    def query(p: Event, q: Event) -> float:
        wp, wq = str(p.query).lower().split(), str(q.query).lower().split()
        d_phi = (2 * hausdorff(wp, wq, levenshtein) + abs(lengths[len(wp)] - lengths[len(wq)])) / 3
        d_t = numeric(parse_time(p.time), parse_time(q.time), times)
        d_r = numeric(parse_rank(p.rank), parse_rank(q.rank), ranks)
        d_u = domain_distance(host_labels(str(p.url or "")), host_labels(str(q.url or "")))
        return (d_t + d_r + d_u + 3 * d_phi) / 6

    n = len(log.users)
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            h = hausdorff(log.events[i], log.events[j], query)
            out[i, j] = 0.5 * (abs(counts[len(log.events[i])] - counts[len(log.events[j])]) + h)
    return out


def _codec() -> TsvCodec:
    codec = codec_for(SchemaConfig(), "log.tsv")
    assert isinstance(codec, TsvCodec)
    return codec


query_text = st.lists(st.sampled_from(WORDS), max_size=4).map(" ".join)
event = st.tuples(
    query_text,
    st.one_of(st.none(), st.integers(0, 10**6)),
    st.one_of(st.none(), st.integers(1, 10)),
    st.sampled_from(URLS),
)
logs = st.lists(st.lists(event, min_size=1, max_size=5), min_size=2, max_size=6)


def _user_log(users: list[list[tuple[str, int | None, int | None, str]]]) -> UserLog:
    log = UserLog(_codec())
    for u, rows in enumerate(users):
        log.users.append(str(u))
        log.events.append([Event(str(u), q, "" if t is None else str(t), r, url or None) for q, t, r, url in rows])
    return log


def _check(users: list[list[tuple[str, int | None, int | None, str]]]) -> None:
    log = _user_log(users)
    expected = reference(log)
    space = UserSpace(log, random.Random(0))
    everyone = np.arange(len(users), dtype=np.intp)
    for u in range(len(users)):
        assert space.to_record(u, everyone) == pytest.approx(expected[u], abs=2e-6)


@settings(max_examples=60, deadline=None)
@given(logs)
def test_fast_distance_equals_the_literal_equations(users: list[list[tuple[str, int | None, int | None, str]]]) -> None:
    """Empty queries, repeated words, missing time/rank/URL, generalisable domains: every case of eq. 1-4."""
    _check(users)


@settings(max_examples=30, deadline=None)
@given(logs)
def test_fast_distance_is_the_same_in_tiny_blocks_and_caches(
    users: list[list[tuple[str, int | None, int | None, str]]],
) -> None:
    """Column blocks of a few cells and caches of one row exercise every block boundary and eviction."""
    saved = distance.BLOCK_CELLS, distance.WORD_CACHE_BYTES, distance.STRING_CACHE_BYTES
    distance.BLOCK_CELLS, distance.WORD_CACHE_BYTES, distance.STRING_CACHE_BYTES = 3, 1, 1
    try:
        _check(users)
    finally:
        distance.BLOCK_CELLS, distance.WORD_CACHE_BYTES, distance.STRING_CACHE_BYTES = saved


@settings(max_examples=40, deadline=None)
@given(logs, st.integers(0, 2**32 - 1))
def test_distance_to_the_average_record_is_eq4_to_the_aggregate(
    users: list[list[tuple[str, int | None, int | None, str]]], seed: int
) -> None:
    """MDAV's average record (§3.2.3: mean times and ranks, generalised domains) measured like any user."""
    log = _user_log(users)
    space = UserSpace(log, random.Random(0))
    members = np.arange(len(users), dtype=np.intp)
    space.rng = random.Random(seed)
    agg = space.aggregate(members)
    space.rng = random.Random(seed)
    fast = space.to_average(members)
    with_average = _user_log(users)
    with_average.users.append("average")
    with_average.events.append(
        [
            Event("average", space.strings[s], "" if t != t else repr(t), None if r != r else repr(r), url or None)
            for s, t, r, url in zip(agg.sid, agg.time, agg.rank, agg.url)
        ]
    )
    eq4 = reference(with_average)[-1, :-1]
    assert fast == pytest.approx(eq4, abs=2e-6)
    # with the repetition term: the average record's entropy over the same scale as the users'
    space = UserSpace(log, random.Random(0), repetition=True)
    space.rng = random.Random(seed)
    scale = math.log2(max(2, max(len(g) for g in log.events)))
    counts = Counter(agg.sid)
    h_avg = -sum(c / len(agg.sid) * math.log2(c / len(agg.sid)) for c in counts.values()) / scale
    expected = (2 * eq4 + np.abs(h_avg - _repetition(log))) / 3
    assert space.to_average(members) == pytest.approx(expected, abs=2e-6)


def _repetition(log: UserLog) -> np.ndarray[Any, np.dtype[np.float64]]:
    """Each user's query entropy in bits over log2 of the log's largest number of queries per user (at least 2)."""
    scale = math.log2(max(2, max(len(g) for g in log.events)))
    out = []
    for group in log.events:
        counts = Counter(str(e.query) for e in group)
        n = sum(counts.values())
        out.append(-sum(c / n * math.log2(c / n) for c in counts.values()) / scale)
    return np.array(out)


@settings(max_examples=40, deadline=None)
@given(logs)
def test_the_repetition_term_adds_a_third_of_the_entropy_gap(
    users: list[list[tuple[str, int | None, int | None, str]]],
) -> None:
    """Method ``mdav``'s distance: ``(2 eq. 4 + |ĥ_1 - ĥ_2|) / 3``, ``ĥ`` the normalised query entropy."""
    log = _user_log(users)
    eq4, h = reference(log), _repetition(log)
    space = UserSpace(log, random.Random(0), repetition=True)
    everyone = np.arange(len(users), dtype=np.intp)
    for u in range(len(users)):
        expected = (2 * eq4[u] + np.abs(h[u] - h)) / 3
        assert space.to_record(u, everyone) == pytest.approx(expected, abs=2e-6)


def test_eq4_cannot_tell_how_users_repeat_their_queries_and_the_repetition_term_can() -> None:
    """Same queries, same count: one user asks "cat" three times and "dog" once, the other each twice."""
    log = _user_log(
        [
            [("cat", None, None, "")] * 3 + [("dog", None, None, "")],
            [("cat", None, None, "")] * 2 + [("dog", None, None, "")] * 2,
        ]
    )
    both = np.arange(2, dtype=np.intp)
    assert UserSpace(log, random.Random(0)).to_record(0, both)[1] == 0.0
    gap = (1.0 - (-(0.75 * math.log2(0.75) + 0.25 * math.log2(0.25)))) / 2.0  # entropies 0.811 and 1 bit, over log2(4)
    assert UserSpace(log, random.Random(0), repetition=True).to_record(0, both)[1] == pytest.approx(gap / 3)


@settings(max_examples=40, deadline=None)
@given(logs, st.lists(st.lists(st.booleans(), min_size=6, max_size=6), min_size=1, max_size=5))
def test_rows_computed_for_fewer_users_stay_exact_when_the_users_change(
    users: list[list[tuple[str, int | None, int | None, str]]], subsets: list[list[bool]]
) -> None:
    """The cached rows cover only the strings and domains of the users measured (MDAV's remaining users): a
    shrinking set reuses them, a set with users back in recomputes them; every distance is eq. 4's either way."""
    log = _user_log(users)
    expected = reference(log)
    saved = distance.WORD_CACHE_BYTES, distance.STRING_CACHE_BYTES
    distance.WORD_CACHE_BYTES, distance.STRING_CACHE_BYTES = 1 << 20, 1 << 20
    try:
        space = UserSpace(log, random.Random(0))
    finally:
        distance.WORD_CACHE_BYTES, distance.STRING_CACHE_BYTES = saved
    for keep in subsets:
        members = np.array([u for u in range(len(users)) if keep[u % len(keep)]] or [0], dtype=np.intp)
        for u in range(len(users)):
            assert space.to_record(u, members) == pytest.approx(expected[u, members], abs=2e-6)


@settings(max_examples=20, deadline=None)
@given(logs)
def test_threads_give_the_same_distances_to_the_bit(users: list[list[tuple[str, int | None, int | None, str]]]) -> None:
    """Blocks of eq. 3-4 and of the string distances on several threads: each writes its own cells."""
    log = _user_log(users)
    everyone = np.arange(len(users), dtype=np.intp)
    saved = distance.BLOCK_CELLS
    distance.BLOCK_CELLS = 3  # many blocks: every thread gets some
    try:
        one = UserSpace(log, random.Random(0), threads=1)
        many = UserSpace(log, random.Random(0), threads=4)
        for u in range(len(users)):
            assert np.array_equal(one.to_record(u, everyone), many.to_record(u, everyone))
    finally:
        distance.BLOCK_CELLS = saved
