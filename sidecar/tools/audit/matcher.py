"""Paper 001's log matcher (§3.3.3): protected records identical to an original one."""

from __future__ import annotations

from collections import Counter
from typing import Any

from sidecar.tools.audit.logs import Record


def match(original: list[Record], protected: list[Record]) -> dict[str, Any]:
    """Counts of protected records whose (user, query) — and whose whole record — occur in the original.

    ``matching_records`` is the (user, query) test the paper's privacy figures use:
    a protected record that puts a query back with a user who sent that text.
    ``matching_full_records`` compares whole lines (multiset intersection).
    With instance keys (``Record.instance``), ``matching_own_sender_records``
    counts protected records that carry their own sender's query: the same
    event, not merely the same text.
    """
    pairs = {(r.user, r.query) for r in original}
    matching = sum(1 for r in protected if (r.user, r.query) in pairs)
    full = sum((Counter(r.line for r in original) & Counter(r.line for r in protected)).values())
    n = len(protected)
    out: dict[str, Any] = {}
    if any(r.instance is not None for r in original):
        own = {(r.user, r.instance) for r in original if r.instance is not None}
        out["matching_own_sender_records"] = sum(1 for r in protected if (r.user, r.instance) in own)
    return out | {
        "matching_records": matching,
        "matching_share": matching / n if n else 0.0,
        "matching_full_records": full,
        "matching_full_share": full / n if n else 0.0,
    }
