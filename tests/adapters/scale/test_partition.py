"""The routing function: every user in exactly one partition, ranges that tile the hash space, the key."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from adapters.file.scale.partition import (
    DEFAULT_KEY,
    KEY_ENV,
    PartitionKeyError,
    hash_range,
    owner,
    partition_key,
    user_hash,
)


@given(st.one_of(st.text(), st.integers(), st.none()), st.integers(min_value=1, max_value=4096))
def test_owner_is_the_range_that_holds_the_users_hash(user: object, n: int) -> None:
    """owner() is in 0..n-1 and its hash_range holds the user's hash: the split and a router agree."""
    p = owner(user, n, DEFAULT_KEY)
    assert 0 <= p < n
    lo, hi = hash_range(p, n)
    assert lo <= user_hash(user, DEFAULT_KEY) < hi


@given(st.integers(min_value=1, max_value=1000))
def test_ranges_tile_the_hash_space(n: int) -> None:
    """Consecutive, non-empty ranges from 0 to 2**64: every hash has exactly one owner."""
    ranges = [hash_range(i, n) for i in range(n)]
    assert ranges[0][0] == 0 and ranges[-1][1] == 1 << 64
    assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
    assert all(lo < hi for lo, hi in ranges)


def test_users_spread_evenly_and_the_key_moves_them() -> None:
    """10,000 users over 4 partitions: each gets 25% +- 2.5%; another key assigns about 3/4 of them elsewhere."""
    users = [str(i) for i in range(10_000)]
    counts = [0] * 4
    for u in users:
        counts[owner(u, 4, DEFAULT_KEY)] += 1
    assert all(2250 <= c <= 2750 for c in counts), counts
    other = b"another-partition-key-0123456789"
    moved = sum(owner(u, 4, DEFAULT_KEY) != owner(u, 4, other) for u in users)
    assert 7000 <= moved <= 8000


def test_key_from_the_environment() -> None:
    """The env key is used when set; a short one is refused, naming the variable but not the value."""
    assert partition_key({}) == DEFAULT_KEY
    assert partition_key({KEY_ENV: "k" * 32}) == b"k" * 32
    with pytest.raises(PartitionKeyError, match=KEY_ENV) as err:
        partition_key({KEY_ENV: "short-secret"})
    assert "short-secret" not in str(err.value)
