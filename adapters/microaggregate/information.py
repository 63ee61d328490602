"""Shannon entropy of a count vector: the microaggregation's representative choice and the audit's PEL and ILR
(paper 003 §4.1-4.2) use the same one."""

from __future__ import annotations

import math
from collections.abc import Iterable


def entropy_bits(counts: Iterable[int]) -> float:
    """Shannon entropy, base 2, of a count vector (0 for an empty or one-value vector)."""
    values = [c for c in counts if c > 0]
    total = sum(values)
    if len(values) <= 1:
        return 0.0
    return -sum(c / total * math.log2(c / total) for c in values)
