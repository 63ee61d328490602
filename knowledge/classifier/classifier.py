"""The :class:`Classifier`: one KB's derived tables, the per-query cache, and the steps in order."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from knowledge import KnowledgeBase, load_kb
from knowledge.classifier.fallback import Fallback, classify_with_fallback
from knowledge.classifier.foreign import foreign_language
from knowledge.classifier.model import Classification, Tokens, Unit, Verdict
from knowledge.classifier.names import NameTables
from knowledge.classifier.spelling import Speller, SpellingTables
from knowledge.classifier.units import UnitFinder, UnitTables
from knowledge.classifier.vote import paper_verdict, vote
from knowledge.text import tokenize

CACHE_SIZE = 200_000


@dataclass(frozen=True, slots=True)
class Tables:
    """Lookup tables derived from a KB once per process (shared by its classifiers)."""

    words: frozenset[str]  # every word of a KB key, and the modifiers
    foreign_words: frozenset[str]  # words of other languages (the keys of ``kb.foreign``)
    spelling: SpellingTables
    units: UnitTables
    names: NameTables
    paths: list[tuple[str, ...] | None]  # path tuples, filled on first use


#: Derived tables by KB hash (a process holds one or two KBs).
_TABLES: dict[str, Tables] = {}


def tables_for(kb: KnowledgeBase) -> Tables:
    """The derived tables of ``kb``, built on first use."""
    t = _TABLES.get(kb.sha256)
    if t is not None:
        return t
    words = frozenset(w for k in kb.lemmas for w in k.split()) | kb.modifiers
    foreign = frozenset(kb.foreign)
    t = Tables(
        words=words,
        foreign_words=foreign,
        spelling=SpellingTables.build(kb, words, foreign),
        units=UnitTables.build(kb),
        names=NameTables.build(kb.zipf),
        paths=[None] * len(kb.paths),
    )
    _TABLES[kb.sha256] = t
    return t


class Classifier:
    """Classify queries with a compiled :class:`~knowledge.KnowledgeBase` (thread-compatible, cached).

    ``cache_size`` bounds the per-query caches and the per-token spelling and repair caches (cleared when full).
    The per-query cache is a least-recently-used map of the text as given (``functools.lru_cache``,
    C-implemented: a hit costs well under a microsecond), in front of a map of the normalised text
    (case-folded word tokens joined by one space, everything a classification depends on; cleared when
    full), so ``Ebay`` and `` ebay!`` are classified once. 0 turns both off.
    """

    def __init__(self, kb: KnowledgeBase, cache_size: int = CACHE_SIZE) -> None:
        self.kb = kb
        self.lemmas = kb.lemmas
        self.zipf = kb.zipf
        t = tables_for(kb)
        self.words = t.words
        self._foreign_words = t.foreign_words
        self._names = t.names
        self._paths = t.paths
        self._speller = Speller(kb, t.words, t.spelling, t.names, cache_size)
        self._finder = UnitFinder(kb, t.units)
        #: Try the steps of :mod:`~knowledge.classifier.fallback` before giving up (off: paper 001's coverage).
        self.fallback = True
        self._fallback = Fallback(kb, t.words, t.names, self._speller.is_word)
        self._fallback.cache_size = cache_size
        self._cache_size = cache_size
        self._make_caches()

    @classmethod
    def load(cls, kb_path: Path | None = None, *, build_if_needed: bool = True) -> Classifier:
        """Load the compiled KB (building it when missing, corrupt or stale)."""
        return cls(load_kb(kb_path, build_if_needed=build_if_needed))

    @property
    def cache_size(self) -> int:
        """Entries of the per-query and per-token caches."""
        return self._cache_size

    @cache_size.setter
    def cache_size(self, size: int) -> None:
        self._cache_size = size
        self._speller.cache_size = size
        self._fallback.cache_size = size
        self._make_caches()

    def _make_caches(self) -> None:
        """(Re)create the per-query caches with the current size (empty)."""
        size = self._cache_size
        self._normal: dict[str, Classification | None] = {}
        self._by_text = self._vote if size <= 0 else lru_cache(maxsize=size)(self._classify_text)

    def _classify_text(self, query: str) -> Classification | None:
        """:meth:`classify` behind the text LRU: the normalised-text map, then the classification."""
        raw = tokenize(query)
        key = " ".join(raw)
        normal = self._normal
        if key in normal:
            return normal[key]
        result = self._vote_tokens(self._speller.tokens_of(raw))
        if len(normal) >= self._cache_size:
            normal.clear()
        normal[key] = result
        return result

    # --- tokens and units ---------------------------------------------------------------

    def recommend(self, token: str) -> tuple[str, ...]:
        """The token as the KB should see it: itself, a spelling recommendation, or a segmentation."""
        return self._speller.recommend(token)

    def prepare(self) -> None:
        """Build the lazy spelling-recommendation and fallback indexes now (otherwise built on first need)."""
        self._speller.prepare()
        self._fallback.prepare()

    def tokens(self, query: str) -> tuple[list[str], list[float], list[bool]]:
        """Recommended tokens, the Zipf of what was typed for each, and whether it was changed."""
        t = self._speller.tokens(query)
        if t.surface is None or t.changed is None:  # nothing was changed: typed = recommended
            return t.tokens, [self.zipf.get(w, 0) / 100.0 for w in t.tokens], [False] * len(t.tokens)
        return t.tokens, t.surface, t.changed

    def analyse(self, query: str) -> tuple[list[str], list[Unit]]:
        """The recommended tokens of ``query`` and its semantic units (right to left, with token positions)."""
        tokens = self._speller.tokens(query)
        return tokens.tokens, self._finder.units(tokens)

    def units(self, query: str, *, phrases_over_corrections: bool = True) -> list[Unit]:
        """Semantic units of ``query``, right to left (progressive left-trimming)."""
        return self._finder.units(self._speller.tokens(query), phrases_over_corrections)

    # --- classification -----------------------------------------------------------------

    def _result(self, verdict: Verdict) -> Classification:
        """Spell a verdict out: category name, path levels, main unit text, confidence to 3 places."""
        path = verdict.path
        levels = self._paths[path]
        if levels is None:
            levels = self._paths[path] = self.kb.path(path)
        return Classification(self.kb.categories[verdict.category], levels, verdict.unit.text, round(verdict.share, 3))

    def classify_paper(self, query: str) -> Classification | None:
        """Algorithm 1 as published: the main unit's category alone (no phrase over a corrected word)."""
        tokens = self._speller.tokens(query)
        units = self._finder.units(tokens, phrases_over_corrections=False)
        if not units:
            return foreign_language(self.kb, self._foreign_words, tokens.raw, units)
        return self._result(paper_verdict(units))

    def _vote(self, query: str) -> Classification | None:
        """:meth:`classify` without the cache."""
        return self._vote_tokens(self._speller.tokens(query))

    def _vote_tokens(self, tokens: Tokens) -> Classification | None:
        """:meth:`_vote` of tokenised text."""
        units = self._finder.units(tokens)
        foreign = foreign_language(self.kb, self._foreign_words, tokens.raw, units)
        if foreign is not None:
            return foreign
        verdict = vote(units, tokens.raw, self._names) if units else None
        if verdict is not None:
            return self._result(verdict)
        if not self.fallback or not tokens.raw:
            return None
        return classify_with_fallback(tokens, self._fallback, self._retry)

    def _retry(self, tokens: Tokens) -> Classification | None:
        """The units and the vote of repaired tokens (fallback step 1)."""
        units = self._finder.units(tokens)
        verdict = vote(units, tokens.raw, self._names) if units else None
        return None if verdict is None else self._result(verdict)

    def classify(self, query: str) -> Classification | None:
        """Category, path, main unit and confidence of ``query``; None when uncategorisable."""
        return self._by_text(query)

    @property
    def lookup(self) -> Callable[[str], Classification | None]:
        """:meth:`classify` as the cache's own callable (no Python frame on a hit): for hot loops."""
        return self._by_text

    def classify_uncached(self, query: str) -> Classification | None:
        """:meth:`classify` without the per-query cache (word-level caches still apply)."""
        return self._vote(query)

    def classify_many(self, queries: list[str]) -> list[Classification | None]:
        """:meth:`classify` of each query, in order."""
        classify = self._by_text
        return [classify(q) for q in queries]
