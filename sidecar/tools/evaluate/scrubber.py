"""Quality measures on a labelled corpus: per-type recall and precision, ordinary words kept.

* recall of a type: share of its planted spans of which detections (of any type: what matters is
  that the identifier leaves the log) cover at least ``cover`` of the characters;
* precision of a type: share of its detections that overlap a planted identifier;
* ordinary words kept: share of the words of identifier-free queries that no detection touches.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

Found = list[tuple[int, int, str]]


@dataclass
class Scores:
    planted: Counter[str] = field(default_factory=Counter)
    recalled: Counter[str] = field(default_factory=Counter)
    detected: Counter[str] = field(default_factory=Counter)
    correct: Counter[str] = field(default_factory=Counter)
    words: int = 0
    words_kept: int = 0
    misses: list[tuple[str, str]] = field(default_factory=list)  # (kind, query): for local debugging only
    false_alarms: list[tuple[str, str]] = field(default_factory=list)

    def recall(self, kind: str) -> float:
        return self.recalled[kind] / self.planted[kind] if self.planted[kind] else float("nan")

    def precision(self, kind: str) -> float:
        return self.correct[kind] / self.detected[kind] if self.detected[kind] else float("nan")

    @property
    def kept(self) -> float:
        return self.words_kept / self.words if self.words else float("nan")


def _covered(start: int, end: int, found: Found) -> int:
    return sum(max(0, min(end, b) - max(start, a)) for a, b, _ in found)


def evaluate(
    detect: Callable[[str], Found], items: Iterable[tuple[str, list[tuple[int, int, str]]]], cover: float = 0.8
) -> Scores:
    """Score ``detect`` (text -> spans) on ``items`` (query, gold spans)."""
    sc = Scores()
    for query, gold in items:
        found = detect(query)
        for a, b, kind in gold:
            sc.planted[kind] += 1
            if _covered(a, b, found) >= cover * (b - a):
                sc.recalled[kind] += 1
            else:
                sc.misses.append((kind, query))
        for a, b, kind in found:
            sc.detected[kind] += 1
            if any(min(b, gb) > max(a, ga) for ga, gb, _ in gold):
                sc.correct[kind] += 1
            else:
                sc.false_alarms.append((kind, query))
        if not gold:
            pos = 0
            for word in query.split():
                start = query.index(word, pos)
                end = pos = start + len(word)
                sc.words += 1
                if not any(min(end, b) > max(start, a) for a, b, _ in found):
                    sc.words_kept += 1
    return sc
