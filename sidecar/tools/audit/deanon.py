"""Paper 001's de-anonymizers 1-4 (§4.2.2, Algorithm 3).

The attacker holds the protected log and, in the worst case the paper assumes,
the same knowledge base (so the same categories). Algorithm 3 replays the
anonymizer on the protected stream: per category, a set of users and a set of
queries; when a set reaches k (and holds a user other than the arriving one),
one user and one query are popped and sent as a guessed original pair; when
it holds one user only, k <- ceil(k * delta). The four attackers differ in which
user they pop (the query is drawn at random in all four):

1. a random user of the set;
2. the user appearing most often in the set;
3. the user of the set with the most queries in that category so far (history);
4. history count times appearances in the set.

Each runs on the protected stream as it is and sorted by its time field
("+T"). What the paper leaves open, decided here in the attacker's favour:
users still in the sets at the end are also paired (flushed) with the same
rule, and ties are broken at random.

Success is measured three ways, each a multiset intersection of the guesses
with the original log over the number of original records:

* **pairs** (the issue's measure): (user, query text). A guess counts when the
  user ever sent that text, so popular texts (``google``) are "recovered" by
  coincidence: see :func:`chance`.
* **records**: (user, instance key), the share of queries put back with *their
  own* sender. It needs a field that identifies each query event and travels
  with the query (a request id; ``bench anonymity`` adds one). Coincidences
  between users who share a text do not count; a query whose text a scrubber
  changed still counts when it goes back to its sender.
* **identical**: the guessed record is identical to an original one in every
  field (paper 001's "recovered original logs", its log matcher applied to the
  attacker's output). With ``time: release`` a released query keeps its
  original time only when the arrival that released it has the same time (its
  own arrival, say), so this is the strictest.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Pair = tuple[str, str]
Guess = tuple[str, int]


@dataclass
class _Set:
    k: int
    users: list[str] = field(default_factory=list)
    queries: list[int] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)


Selector = Callable[[_Set, str, dict[tuple[str, str], int], random.Random], int]


def _pick_max(users: list[str], score: Callable[[str], float], rng: random.Random) -> int:
    best = max(score(u) for u in set(users))
    candidates = [i for i, u in enumerate(users) if score(u) == best]
    return candidates[rng.randrange(len(candidates))]


def _random(s: _Set, cat: str, history: dict[tuple[str, str], int], rng: random.Random) -> int:
    return rng.randrange(len(s.users))


def _most_in_set(s: _Set, cat: str, history: dict[tuple[str, str], int], rng: random.Random) -> int:
    return _pick_max(s.users, lambda u: s.counts[u], rng)


def _most_history(s: _Set, cat: str, history: dict[tuple[str, str], int], rng: random.Random) -> int:
    return _pick_max(s.users, lambda u: history.get((u, cat), 0), rng)


def _history_times_set(s: _Set, cat: str, history: dict[tuple[str, str], int], rng: random.Random) -> int:
    return _pick_max(s.users, lambda u: history.get((u, cat), 0) * s.counts[u], rng)


ATTACKS: dict[str, Selector] = {
    "deanonymizer_1": _random,
    "deanonymizer_2": _most_in_set,
    "deanonymizer_3": _most_history,
    "deanonymizer_4": _history_times_set,
}


def _pop(s: _Set, ui: int, qi: int) -> Guess:
    u = s.users[ui]
    s.users[ui] = s.users[-1]
    s.users.pop()
    q = s.queries[qi]
    s.queries[qi] = s.queries[-1]
    s.queries.pop()
    s.counts[u] -= 1
    if not s.counts[u]:
        del s.counts[u]
    return u, q


def attack(
    stream: Sequence[tuple[str, str]], select: Selector, k: int, delta: float, seed: int, flush: bool = True
) -> list[Guess]:
    """Algorithm 3 over (user, category) records in stream order.

    Returns the guesses as (user, position of the record whose query is given to that user).
    """
    rng = random.Random(seed)
    sets: dict[str, _Set] = {}
    history: dict[tuple[str, str], int] = {}
    guesses: list[Guess] = []
    for pos, (user, cat) in enumerate(stream):
        s = sets.get(cat)
        if s is None:
            s = sets[cat] = _Set(k)
        s.users.append(user)
        s.queries.append(pos)
        s.counts[user] += 1
        history[(user, cat)] = history.get((user, cat), 0) + 1
        if len(s.users) >= s.k:
            if len(s.counts) > 1 or user not in s.counts:
                guesses.append(_pop(s, select(s, cat, history, rng), rng.randrange(len(s.queries))))
            else:
                s.k = math.ceil(s.k * delta)
    if flush:
        for cat, s in sets.items():
            while s.users:
                guesses.append(_pop(s, select(s, cat, history, rng), rng.randrange(len(s.queries))))
    return guesses


def chance(original: Sequence[tuple[str, str, str]], original_pairs: Counter[Pair], seed: int) -> float:
    """Share of original pairs a blind guess recovers: users shuffled at random within each category.

    Records are (user, key, category) with ``original_pairs`` counting (user, key):
    key = the query text for the pair measure, the instance key for the record one.
    When many users send the same texts, (user, query) pairs are "recovered" by
    coincidence; an attack only learns something from the protected log when it
    beats this level.
    """
    rng = random.Random(seed)
    by_cat: dict[str, tuple[list[str], list[str]]] = {}
    for user, query, cat in original:
        users, queries = by_cat.setdefault(cat, ([], []))
        users.append(user)
        queries.append(query)
    guesses: Counter[Pair] = Counter()
    for users, queries in by_cat.values():
        rng.shuffle(users)
        guesses.update(zip(users, queries))
    n = sum(original_pairs.values())
    return sum((guesses & original_pairs).values()) / n if n else 0.0


def _time_key(t: str) -> tuple[int, Any]:
    try:
        return (0, float(t))
    except ValueError:
        return (1, t)


def run_all(
    protected: Sequence[tuple[str, str, str, str]],
    original_pairs: Counter[Pair],
    n_original: int,
    k: int,
    delta: float,
    seed: int,
    extra: Mapping[str, tuple[Sequence[Hashable], Counter[tuple[str, Hashable]]]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Every attacker, in stream order and in time order (+T), over (user, query, category, time) records.

    ``extra`` scores the guesses by other keys than the query text: name ->
    (the key of each protected record, the original (user, key) multiset); each
    attacker then also gets ``recovered_<name>`` and ``recovered_<name>_share``.
    """
    by_time = sorted(range(len(protected)), key=lambda i: _time_key(protected[i][3]))
    measures: dict[str, tuple[Sequence[Hashable], Counter[tuple[str, Hashable]]]] = {
        "": ([r[1] for r in protected], original_pairs),  # type: ignore[dict-item]  # Counter is invariant; only read
    }
    measures.update({f"_{name}": value for name, value in (extra or {}).items()})
    out: dict[str, dict[str, Any]] = {}
    for name, select in ATTACKS.items():
        for suffix, order in (("", range(len(protected))), ("+T", by_time)):
            positions = list(order)
            guesses = attack([(protected[i][0], protected[i][2]) for i in positions], select, k, delta, seed)
            picked = [(user, positions[pos]) for user, pos in guesses]
            row: dict[str, Any] = {"guesses": len(guesses)}
            for measure, (keys, original) in measures.items():
                hits = sum((Counter((u, keys[i]) for u, i in picked) & original).values())
                row[f"recovered{measure}"] = hits
                row[f"recovered{measure}_share"] = hits / n_original if n_original else 0.0
            out[name + suffix] = row
    return out
