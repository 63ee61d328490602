"""Overlap resolution of the scrubber's findings: longer spans win, then lower priority numbers, then text order."""

from __future__ import annotations

from operator import attrgetter

from filters.hipaa_scrub.detectors import Span

_START = attrgetter("start")


def word_or_dash(char: str) -> bool:
    """``re.match(r"[\\w-]", char)``: a word character (alphanumeric or ``_``) or a dash."""
    return char.isalnum() or char in "_-"


def rank(s: Span) -> tuple[int, int, int]:
    """Overlap resolution order: longer spans first, then lower priority numbers, then text order."""
    return (s.start - s.end, s.priority, s.start)


def resolve(found: list[Span]) -> list[Span]:
    """The spans kept when overlaps are resolved by :func:`rank`, in text order."""
    if len(found) == 2:  # the usual case (a catch-all number under a specific one), without sorting
        a, b = found
        a_first = rank(a) <= rank(b)  # the order a stable sort by rank gives
        if a.end > b.start and a.start < b.end:
            return [a if a_first else b]  # overlap: the higher ranked one stays
        if a.start != b.start:
            a_first = a.start < b.start
        return [a, b] if a_first else [b, a]
    found.sort(key=rank)
    kept = [found[0]]
    for s in found[1:]:
        start, end = s.start, s.end
        for k in kept:
            if end > k.start and start < k.end:
                break  # overlaps a span that ranks higher
        else:
            kept.append(s)
    if len(kept) > 1:
        kept.sort(key=_START)
    return kept
