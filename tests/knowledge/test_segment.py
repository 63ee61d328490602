"""The glued-token segmentation (knowledge/classifier/segment.py) against a plain dynamic programme."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from knowledge.classifier.segment import prefixes_of, segment

LETTERS = "abc"


def _plain(token: str, pieces: frozenset[str], zipf: dict[str, int], max_len: int) -> list[str] | None:
    """Every (start, end) pair tried, as the speller did before the prefix pruning."""
    n = len(token)
    best: list[tuple[int, int, int] | None] = [None] * (n + 1)
    best[0] = (0, 0, -1)
    for j in range(2, n + 1):
        for i in range(max(0, j - max_len), j - 1):
            prev = best[i]
            if prev is None or token[i:j] not in pieces:
                continue
            cand = (prev[0] + 1, prev[1] - zipf.get(token[i:j], 0), i)
            cur = best[j]
            if cur is None or cand[:2] < cur[:2]:
                best[j] = cand
    if best[n] is None:
        return None
    out, j = [], n
    while j > 0:
        cut = best[j]
        assert cut is not None
        out.append(token[cut[2] : j])
        j = cut[2]
    return out[::-1]


@settings(max_examples=300, deadline=None)
@given(
    token=st.text(LETTERS, min_size=0, max_size=14),
    words=st.dictionaries(st.text(LETTERS, min_size=2, max_size=6), st.integers(0, 700), max_size=25),
    max_len=st.integers(2, 8),
)
def test_same_split_as_every_pair_tried(token: str, words: dict[str, int], max_len: int) -> None:
    """Same pieces, counts and tie-breaks as the exhaustive programme; the pieces rebuild the token."""
    pieces = frozenset(words)
    got = segment(token, pieces, prefixes_of(pieces), words, max_len)
    assert got == _plain(token, pieces, words, max_len)
    if got is not None:
        assert "".join(got) == token and all(p in pieces and len(p) <= max_len for p in got)


def test_known_split_and_none() -> None:
    """``bankofamerica`` splits into its words; a token with an unknown stretch has no split."""
    words = {"bank": 500, "of": 700, "america": 550, "ban": 300, "kof": 100}
    pieces = frozenset(words)
    assert segment("bankofamerica", pieces, prefixes_of(pieces), words, 20) == ["bank", "of", "america"]
    assert segment("bankxofamerica", pieces, prefixes_of(pieces), words, 20) is None
