"""Splitting a glued token into known pieces (``bankofamerica`` -> ``bank of america``).

One dynamic programme for the speller and the fallback: fewest pieces, then the highest summed
Zipf, the leftmost cut on a tie. A piece is tried only while it is a prefix of some allowed piece
(:func:`prefixes_of`), so a token costs a few set lookups per position instead of one per
(start, end) pair.
"""

from __future__ import annotations

from collections.abc import Iterable

MIN_PIECE = 2  # letters of the shortest piece


def prefixes_of(pieces: Iterable[str]) -> frozenset[str]:
    """Every prefix of two letters or more of ``pieces`` (the pieces themselves included)."""
    return frozenset(p[:k] for p in pieces for k in range(MIN_PIECE, len(p) + 1))


def segment(
    token: str, pieces: frozenset[str], prefixes: frozenset[str], zipf: dict[str, int], max_len: int
) -> list[str] | None:
    """The best split of ``token`` into ``pieces`` of at most ``max_len`` letters; None when there is none."""
    n = len(token)
    #: best[j] = (pieces, minus summed Zipf, start of the last piece) of the best split of token[:j].
    best: list[tuple[int, int, int] | None] = [None] * (n + 1)
    best[0] = (0, 0, -1)
    for i in range(n - 1):
        prev = best[i]
        if prev is None:
            continue
        count, neg = prev[0] + 1, prev[1]
        for j in range(i + MIN_PIECE, min(n, i + max_len) + 1):
            piece = token[i:j]
            if piece not in prefixes:
                break
            if piece not in pieces:
                continue
            cand = (count, neg - zipf.get(piece, 0), i)
            cur = best[j]
            if cur is None or cand[:2] < cur[:2]:
                best[j] = cand
    if best[n] is None:
        return None
    out: list[str] = []
    j = n
    while j > 0:
        cut = best[j]
        assert cut is not None  # every prefix on the chain of cuts has one
        out.append(token[cut[2] : j])
        j = cut[2]
    out.reverse()
    return out
