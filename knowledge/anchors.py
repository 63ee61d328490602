"""The nearest category anchor of each WordNet noun synset, and the sense weights the builder (:mod:`.build`) uses.

A synset's category is that of the nearest anchor (``categories.yaml``) up its hypernym / instance-hypernym graph;
the chain from the anchor down to the synset is its L2..L5 path. A synset no anchor reaches falls back to its own
topic domain (not inherited by its hyponyms), then to its lexicographer file, each far behind any anchor; last to
its lexicographer file's *default* category (``lexname_defaults``), which the builder counts only for a lemma with no
other categorised sense.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

DOMAIN_EDGE = 2  # a topic-domain link counts as this many hypernym steps
#: Follow WordNet topic domains (``touchdown`` -> football)? Measured with `querylog kb evaluate`:
#: off is better (domain members are often not about the domain's topic: labelled 85% vs 84%,
#: magnetic 63% vs 62%), so the hypernym graph alone decides.
USE_DOMAINS = False
#: Synsets no anchor reaches take their topic domain's category (``thrombosis`` -> medicine) at this
#: distance, at half weight like the lexicographer-file fallback.
DOMAIN_FALLBACK = 25
LEXNAME_DISTANCE = 50  # fallback through the lexicographer file: far behind any anchor
#: Fallback through a lexicographer file's default category: behind everything else, and never blocking a
#: synset's own topic domain or lexicographer-file fallback (``golf course`` keeps golf's Sports).
DEFAULT_DISTANCE = 60


def label_of(s: Any) -> str:
    """A synset's label: its first lemma name, spaced and lowercase."""
    name: str = s.lemmas()[0].name()
    return name.replace("_", " ").lower()


class Resolver:
    """Nearest anchor of each synset, memoised: ``(distance, category, chain of labels)``."""

    def __init__(
        self, anchors: dict[str, int], lexnames: dict[str, int], defaults: dict[str, int] | None = None
    ) -> None:
        self.anchors = anchors
        self.lexnames = lexnames
        self.defaults = defaults or {}
        self.memo: dict[str, tuple[int, int, tuple[str, ...]] | None] = {}
        self.busy: set[str] = set()

    def resolve(self, s: Any) -> tuple[int, int, tuple[str, ...]] | None:
        name = s.name()
        if name in self.memo:
            return self.memo[name]
        if name in self.busy:  # a domain cycle
            return None
        self.busy.add(name)
        best: tuple[int, int, tuple[str, ...]] | None = None
        label = label_of(s)
        if name in self.anchors:
            best = (0, self.anchors[name], (label,))
        else:
            parents = sorted(s.hypernyms() + s.instance_hypernyms(), key=lambda p: p.name())
            for p in parents:
                r = self.resolve(p)
                if r is not None and DOMAIN_FALLBACK <= r[0] < LEXNAME_DISTANCE:
                    continue  # a parent's domain fallback is not inherited
                if r is not None and (best is None or r[0] + 1 < best[0]):
                    best = (r[0] + 1, r[1], (*r[2], label))
            for d in sorted(s.topic_domains(), key=lambda p: p.name()) if USE_DOMAINS else ():
                r = self.resolve(d)
                if r is not None and (best is None or r[0] + DOMAIN_EDGE < best[0]):
                    best = (r[0] + DOMAIN_EDGE, r[1], (*r[2], label))
            # No anchor above: the synset's own topic domain, far behind any anchor.
            weak = best is None or best[0] >= DEFAULT_DISTANCE  # nothing, or only an inherited default
            if weak and DOMAIN_FALLBACK < LEXNAME_DISTANCE and not USE_DOMAINS:
                for d in sorted(s.topic_domains(), key=lambda p: p.name()):
                    r = self.resolve(d)
                    if r is not None and r[0] < DOMAIN_FALLBACK and (best is None or r[0] + DOMAIN_FALLBACK < best[0]):
                        best = (r[0] + DOMAIN_FALLBACK, r[1], (*r[2], label))
            lex = s.lexname()
            if (best is None or best[0] >= DEFAULT_DISTANCE) and lex in self.lexnames:
                best = (LEXNAME_DISTANCE, self.lexnames[lex], (lex.split(".", 1)[1], label))
            if best is None and lex in self.defaults:
                best = (DEFAULT_DISTANCE, self.defaults[lex], (lex.split(".", 1)[1], label))
        self.busy.discard(name)
        self.memo[name] = best
        return best


def semcor_counts(folder: Path) -> dict[str, int]:
    """SemCor tag counts by sense key, from ``cntlist.rev``."""
    out: dict[str, int] = {}
    path = folder / "cntlist.rev"
    if path.is_file():
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[2].isdigit():
                out[parts[0]] = int(parts[2])
    return out


def sense_weight(count: int, rank: int) -> float:
    """A sense's weight: its SemCor count plus one, times 0.75 per place down WordNet's sense order."""
    return (count + 1.0) * (0.75**rank)


def is_instance_of(s: Any, ident: set[str]) -> bool:
    """Is ``s`` an instance of a synset named in ``ident`` (through its instance hypernyms and their hypernyms)?"""
    if not s.instance_hypernyms():
        return False
    seen = set()
    todo = list(s.instance_hypernyms())
    while todo:
        p = todo.pop()
        if p.name() in ident:
            return True
        if p.name() not in seen:
            seen.add(p.name())
            todo.extend(p.hypernyms())
    return False
