"""Microaggregation measures (papers 003 §4.1-4.5 and 002 eq. 4-5) over an original and a protected log.

Each user keeps their id in a microaggregated log (papers 003, 002), so the measures compare a user's
original records with their protected ones; users present in one log only are counted and left out.

* **PEL** (003 §4.1): ``I(φ, φ') / H(φ) · 100`` per user, φ and φ' the user's original and protected
  query strings as random variables (probability proportional to repetitions), logs base 2 in both (the
  ratio does not depend on the base). The paper gives the two marginals but not their joint, which the
  mutual information needs. *Interpretation*: the joint is the coupling that pairs each query with itself
  as far as the two distributions share it (mass ``min(p(q), p'(q))`` on ``(q, q)``) and draws the rest
  independently (mass ``r(x) r'(y) / R`` with the residuals ``r = p - min``, ``r' = p' - min`` and
  ``R = Σ r``). A query the protected profile keeps thus exposes itself; what changed tells nothing. It gives
  PEL = 100 for an unchanged profile, 0 for a disjoint one, and for a user with ``n`` equally frequent
  queries who fills ``1/k`` of a same-size centroid ``100 · (1/k + (1 - 1/k) log2(k/(k-1)) / log2 n)``:
  paper 003's "theoretical level of privacy" 1/k (Fig. 3) plus what the coupling learns from whether a
  drawn protected query is one of the user's own (under a bit; it matters for users with few queries).
* **ILR** (003 §4.2): ``|H(φ) - H(φ')| / H(φ) · 100`` per user (the entropies above). Not bounded by 100:
  a protected profile may have more than twice the original entropy.
* **SRP** (002 eq. 4): per user and taxonomy level ``l``, ``ρ / χ`` where ``χ`` is the number of the user's
  original queries classified down to level ``l`` and ``ρ = Σ_c min(n(c), n'(c))`` over the level-``l``
  categories ``c`` (a category is its path prefix L1..Ll, so ``travel`` under two L1s is two categories),
  ``n``/``n'`` the original/protected counts. The worst case of a random partition is ``1/k`` (eq. 5).
* **Rand and Jaccard indices** (003 §4.4) between k-means partitions of the same users, original vs
  protected, for several numbers of clusters κ (the paper's κ = 2..500). The paper clusters with its
  microaggregation distance; here k-means (``scipy.cluster.vq.kmeans2``, k-means++ start, one seed for
  both sides) runs on each user's category shares: the share of their queries in each L1 category and in
  each L2 category of the original log (the protected log mapped onto the same columns).
* **Frequencies** (003 §4.5): the 10 most frequent queries and words (stop words out) of the original log,
  with their counts in both logs.
* **Groups of identical profiles**: users whose protected query multisets are identical, the smallest
  group being the ``k`` of user k-anonymity the protected log shows.
"""

from __future__ import annotations

import math
import re
import warnings
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from adapters.microaggregate.information import entropy_bits as entropy
from knowledge.text import STOPWORDS

Path = tuple[str, ...]
LEVELS = (1, 2, 3, 4, 5)
KAPPAS = (2, 5, 10, 20, 50, 100, 200, 500)
_WORD = re.compile(r"[^\W_]+")


def _dist(c: Counter[str], keys: list[str]) -> NDArray[np.float64]:
    a = np.array([c.get(x, 0) for x in keys], dtype=float)
    total = a.sum()
    return a / total if total else a


def mutual_information(original: Counter[str], protected: Counter[str]) -> float:
    """``I(φ, φ')`` in bits under the overlap coupling of the module docstring (closed form).

    ``Σ_q o log(o / (p p')) + Σ_x r log(r / p) + Σ_y r' log(r' / p') - R log R`` with ``o = min(p, p')``.
    """
    keys = sorted(set(original) | set(protected))
    p, q = _dist(original, keys), _dist(protected, keys)
    if not p.sum() or not q.sum():
        return 0.0
    o = np.minimum(p, q)
    r, r2 = p - o, q - o
    big_r = float(r.sum())

    def plogq(x: NDArray[np.float64], y: NDArray[np.float64]) -> float:
        nz = x > 1e-15
        return float((x[nz] * np.log2(x[nz] / y[nz])).sum())

    value = plogq(o, p * q) + plogq(r, p) + plogq(r2, q)
    if big_r > 1e-15:
        value -= big_r * math.log2(big_r)
    return min(max(value, 0.0), entropy(original.values()))


def pel(original: Counter[str], protected: Counter[str]) -> float | None:
    """Profile Exposure Level in [0, 1] (paper 003 §4.1, as a fraction); None when ``H(φ) = 0``."""
    h = entropy(original.values())
    if h <= 0:
        return None
    return min(1.0, mutual_information(original, protected) / h)


def ilr(original: Counter[str], protected: Counter[str]) -> float | None:
    """Information Loss Ratio (paper 003 §4.2, as a fraction, >= 0); None when ``H(φ) = 0``."""
    h = entropy(original.values())
    if h <= 0:
        return None
    return abs(h - entropy(protected.values())) / h


def srp(original: Sequence[Path], protected: Sequence[Path], level: int) -> float | None:
    """Semantic Remain Percentage of one user at ``level`` (paper 002 eq. 4, a fraction); None when no
    original query of the user is classified that deep (``χ = 0``)."""
    n = Counter(p[:level] for p in original if len(p) >= level)
    chi = sum(n.values())
    if not chi:
        return None
    n2 = Counter(p[:level] for p in protected if len(p) >= level)
    return sum(min(c, n2.get(cat, 0)) for cat, c in n.items()) / chi


def rand_jaccard(a: Sequence[int] | NDArray[np.int64], b: Sequence[int] | NDArray[np.int64]) -> tuple[float, float]:
    """Rand and Jaccard indices of two partitions of the same elements (paper 003 §4.4), by pair counting:
    ``RI = (r + u) / (r + s + t + u)``, ``JI = r / (r + s + t)``. With fewer than two elements, or no pair
    together in either partition (``r + s + t = 0``), the partitions agree on every pair: 1.0."""
    la, lb = np.asarray(a), np.asarray(b)
    n = la.size
    if n < 2:
        return 1.0, 1.0
    _, ia = np.unique(la, return_inverse=True)
    _, ib = np.unique(lb, return_inverse=True)
    table = np.zeros((ia.max() + 1, ib.max() + 1), dtype=np.int64)
    np.add.at(table, (ia, ib), 1)

    def pairs(x: NDArray[np.int64]) -> int:
        return int((x * (x - 1) // 2).sum())

    r = pairs(table)
    same_a, same_b = pairs(table.sum(axis=1)), pairs(table.sum(axis=0))
    s, t = same_a - r, same_b - r
    total = n * (n - 1) // 2
    u = total - r - s - t
    jaccard = r / (r + s + t) if r + s + t else 1.0
    return (r + u) / total, jaccard


def kmeans_labels(features: NDArray[np.float64], kappa: int, seed: int) -> NDArray[np.int64]:
    """k-means labels (``kmeans2``, k-means++ start, seeded) of the rows of ``features``."""
    from scipy.cluster.vq import kmeans2  # type: ignore[import-untyped]

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "One of the clusters is empty": allowed, a partition still results
        _, labels = kmeans2(features, kappa, minit="++", seed=np.random.default_rng(seed))
    return np.asarray(labels, dtype=np.int64)


def user_features(
    users: list[str], paths: dict[str, list[Path]], columns: tuple[list[Path], list[Path]]
) -> NDArray[np.float64]:
    """Per user: the share of their queries in each L1 and each L2 category of ``columns``."""
    l1, l2 = columns
    i1 = {c: i for i, c in enumerate(l1)}
    i2 = {c: len(l1) + i for i, c in enumerate(l2)}
    out = np.zeros((len(users), len(l1) + len(l2)))
    for row, u in enumerate(users):
        ps = paths.get(u, [])
        for p in ps:
            key1 = p[:1] if p else ("unknown",)
            if key1 in i1:
                out[row, i1[key1]] += 1
            if len(p) >= 2 and p[:2] in i2:
                out[row, i2[p[:2]]] += 1
        if ps:
            out[row] /= len(ps)
    return out


def clustering(
    users: list[str], paths_o: dict[str, list[Path]], paths_p: dict[str, list[Path]], seed: int
) -> list[dict[str, Any]]:
    """Rand and Jaccard indices between k-means partitions of the original and the protected users, per κ."""
    l1 = sorted({p[:1] if p else ("unknown",) for ps in paths_o.values() for p in ps})
    l2 = sorted({p[:2] for ps in paths_o.values() for p in ps if len(p) >= 2})
    fo = user_features(users, paths_o, (l1, l2))
    fp = user_features(users, paths_p, (l1, l2))
    rows = []
    for kappa in [c for c in KAPPAS if c < len(users)]:
        ri, ji = rand_jaccard(kmeans_labels(fo, kappa, seed), kmeans_labels(fp, kappa, seed))
        rows.append({"kappa": kappa, "rand": ri, "jaccard": ji})
    return rows


def words(query: str) -> list[str]:
    """The words of a query that count in the word frequency table: case-folded, stop words out."""
    return [w for w in _WORD.findall(query.lower()) if w not in STOPWORDS]


def top_table(original: Counter[str], protected: Counter[str], n: int = 10) -> dict[str, Any]:
    """The ``n`` most frequent items of the original with their counts in both logs, the protected top ``n``,
    and how many of the original top ``n`` are also in the protected top ``n`` (paper 003 §4.5)."""
    top_o = [x for x, _ in sorted(original.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]
    top_p = [x for x, _ in sorted(protected.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]
    return {
        "rows": [{"text": x, "original": original[x], "protected": protected.get(x, 0)} for x in top_o],
        "protected_top": [{"text": x, "original": original.get(x, 0), "protected": protected[x]} for x in top_p],
        "kept_in_top": len(set(top_o) & set(top_p)),
    }


def identical_groups(protected: dict[str, Counter[str]]) -> dict[str, Any]:
    """Users grouped by identical protected query multisets: group sizes, the smallest, users alone."""
    groups = Counter(tuple(sorted(c.items())) for c in protected.values() if c)
    sizes = sorted(groups.values())
    return {
        "groups": len(sizes),
        "smallest": sizes[0] if sizes else 0,
        "largest": sizes[-1] if sizes else 0,
        "users_alone": sum(1 for s in sizes if s == 1),
        "sizes": dict(sorted(Counter(sizes).items())),
    }


def _word_counts(queries: Counter[str]) -> Counter[str]:
    out: Counter[str] = Counter()
    for q, n in queries.items():
        for w in words(q):
            out[w] += n
    return out


def _summary(values: list[float]) -> dict[str, float]:
    if not values:
        return {"mean": 0.0, "median": 0.0, "min": 0.0, "max": 0.0}
    a = np.array(values)
    return {"mean": float(a.mean()), "median": float(np.median(a)), "min": float(a.min()), "max": float(a.max())}


def measures(
    original: Sequence[tuple[str, str, Path]],
    protected: Sequence[tuple[str, str, Path]],
    *,
    seed: int = 0,
    k: int | None = None,
) -> dict[str, Any]:
    """All microaggregation measures from (user, query, category path) records of both logs.

    ``k`` (the microaggregation's, when known) adds the ``1/k`` reference lines. Means are over users present
    in both logs whose measure is defined (PEL/ILR: ``H(φ) > 0``; SRP: ``χ > 0`` at that level).
    """
    q_o: dict[str, Counter[str]] = {}
    q_p: dict[str, Counter[str]] = {}
    p_o: dict[str, list[Path]] = {}
    p_p: dict[str, list[Path]] = {}
    for user, query, path in original:
        q_o.setdefault(user, Counter())[query] += 1
        p_o.setdefault(user, []).append(path)
    for user, query, path in protected:
        q_p.setdefault(user, Counter())[query] += 1
        p_p.setdefault(user, []).append(path)
    users = sorted(set(q_o) & set(q_p))
    pels = [v for u in users if (v := pel(q_o[u], q_p[u])) is not None]
    ilrs = [v for u in users if (v := ilr(q_o[u], q_p[u])) is not None]
    srps: dict[str, Any] = {}
    for level in LEVELS:
        vals = [v for u in users if (v := srp(p_o[u], p_p[u], level)) is not None]
        if vals:
            srps[f"L{level}"] = {"mean": float(np.mean(vals)), "users": len(vals)}
    all_o = Counter(q for _, q, _ in original if q.strip())
    all_p = Counter(q for _, q, _ in protected if q.strip())
    words_o, words_p = _word_counts(all_o), _word_counts(all_p)
    return {
        "users_compared": len(users),
        "users_only_original": len(set(q_o) - set(q_p)),
        "users_only_protected": len(set(q_p) - set(q_o)),
        "k": k,
        "random_partition_srp": 1 / k if k else None,
        "pel": _summary(pels) | {"users": len(pels), "undefined_users": len(users) - len(pels)},
        "ilr": _summary(ilrs) | {"users": len(ilrs), "undefined_users": len(users) - len(ilrs)},
        "srp": srps,
        "clustering": clustering(users, p_o, p_p, seed) if len(users) > 2 else [],
        "top_queries": top_table(all_o, all_p),
        "top_words": top_table(words_o, words_p),
        "identical_groups": identical_groups({u: q_p[u] for u in q_p}),
        "pel_values": pels,
        "ilr_values": ilrs,
    }


def looks_microaggregated(groups: dict[str, Any]) -> bool:
    """The rule for calling a protected log microaggregated: at least two users, and every user shares
    their protected query multiset with at least one other user (no user alone)."""
    return bool(groups["groups"] > 0 and groups["users_alone"] == 0)
