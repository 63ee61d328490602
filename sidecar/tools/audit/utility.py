"""Utility: per-user category profiles of the original and protected logs (paper 001 §4.5, paper 004 JSD)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np


def profiles(records: Iterable[tuple[str, str]]) -> dict[str, Counter[str]]:
    """(user, category) records -> {user: Counter(category)}."""
    out: dict[str, Counter[str]] = {}
    for user, cat in records:
        out.setdefault(user, Counter())[cat] += 1
    return out


def jsd(p: Counter[str], q: Counter[str]) -> float:
    """Jensen-Shannon divergence, base 2 (0 = same distribution, 1 = disjoint), of two count vectors."""
    keys = sorted(set(p) | set(q))
    a = np.array([p.get(c, 0) for c in keys], dtype=float)
    b = np.array([q.get(c, 0) for c in keys], dtype=float)
    a /= a.sum()
    b /= b.sum()
    m = (a + b) / 2

    def kl(x: np.ndarray) -> float:
        nz = x > 0
        return float(np.sum(x[nz] * np.log2(x[nz] / m[nz])))

    return max(0.0, (kl(a) + kl(b)) / 2)


def compare(original: dict[str, Counter[str]], protected: dict[str, Counter[str]]) -> dict[str, Any]:
    """Mean per-user JSD over users present in both logs; shares of unchanged and missing profiles."""
    values = []
    weights = []
    unchanged = 0
    for user, p in original.items():
        q = protected.get(user)
        if q == p:
            unchanged += 1
        if q:
            values.append(jsd(p, q))
            weights.append(sum(p.values()))
    n = len(original)
    arr = np.array(values) if values else np.zeros(0)
    return {
        "profile_jsd": float(arr.mean()) if values else 0.0,
        "profile_jsd_weighted": float(np.average(arr, weights=weights)) if values else 0.0,
        "profile_jsd_max": float(arr.max()) if values else 0.0,
        "profile_unchanged_share": unchanged / n if n else 1.0,
        "users_original": n,
        "users_protected": len(protected),
        "users_missing_in_protected": sum(1 for u in original if u not in protected),
        "users_only_in_protected": sum(1 for u in protected if u not in original),
        "jsd_values": values,
    }
