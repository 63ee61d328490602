"""Query -> concepts (paper 004 §3.4), through the classifier's semantic units.

The classifier (:mod:`knowledge.classifier`) already does the linguistic part:
case-folded tokens, spelling recommendations, stop words that never start or end
a unit, plural forms normalised (``phones`` -> ``phone``, WordNet's ``noun.exc``
and morphy rules, which play the stemmer's part), and **progressive
left-trimming**: the longest span ending at a token that is a KB lemma, adjectives
just before it joining as modifiers. Every unit of a query is one concept (a
complex query becomes several individual queries).

A unit's lemma key names synsets (:meth:`knowledge.concepts.ConceptTree.senses`).
When it names none (a curated term such as ``bank of america``, which is no
WordNet noun), its words are trimmed from the left again (``of america``,
``america``), trying the plural's base form of the last word too
(``cheap flights`` -> ``flight``). **Sense choice** (a stated rule, not
disambiguation): among the key's senses that lie in some domain, the first (WordNet's
most frequent) whose category is the query's ``classify`` category when the event
carries one, else the first. With ``domain: category`` and an event that carries a
category, only senses of that category count (D(q) is the query's category: a
unit without a sense there is left out, and a query left with no concept is
discarded, as paper 004 discards queries outside its taxonomy); an event without
a category takes each unit's first sense in any category (its own category is
then its domain). A unit with no sense in any domain has no concept.
"""

from __future__ import annotations

from dataclasses import dataclass

from filters.dp_replace.domains import Domains
from knowledge.classifier import Classifier, Unit
from knowledge.concepts import ConceptTree
from knowledge.store import KnowledgeBase
from knowledge.text import NOUN_SUFFIXES, STOPWORDS


@dataclass(frozen=True, slots=True)
class Part:
    """One concept of a query: token span (modifiers ``[first, head)``, concept words ``[head, end)``)."""

    first: int
    head: int
    end: int
    node: int
    plural: bool


@dataclass(frozen=True, slots=True)
class Mapped:
    """A query's recommended tokens and its concepts, left to right."""

    tokens: tuple[str, ...]
    parts: tuple[Part, ...]
    units: int  # semantic units found (with or without a concept)
    single: int  # concepts left out because their domain holds them alone (single_concept: drop)
    #: the output's skeleton for ``surface: shape`` / ``paper``: words kept as they are, and ``i`` (an int) where
    #: the i-th replacement goes (built once per distinct query, see :func:`skeleton`)
    shape: tuple[str | int, ...] = ()
    paper: tuple[str | int, ...] = ()


EMPTY = Mapped((), (), 0, 0)


def skeleton(tokens: tuple[str, ...], parts: tuple[Part, ...], keep_all: bool) -> tuple[str | int, ...]:
    """The query with each concept span (modifiers included) as its part index; other tokens kept when they are
    stop words, or all of them with ``keep_all`` (paper 004's reconstruction also keeps the modifiers)."""
    out: list[str | int] = []
    i = k = 0
    while i < len(tokens):
        if k < len(parts) and i == parts[k].first:
            p = parts[k]
            if keep_all:
                out.extend(tokens[p.first : p.head])
            out.append(k)
            i = p.end
            k += 1
            continue
        tok = tokens[i]
        if keep_all or tok in STOPWORDS:
            out.append(tok)
        i += 1
    return tuple(out)


class Mapper:
    """Map queries to concepts with one KB; caches per (query, category)."""

    def __init__(
        self, kb: KnowledgeBase, tree: ConceptTree, domains: Domains, cache_size: int, drop_single: bool
    ) -> None:
        self.classifier = Classifier(kb, cache_size=max(cache_size, 1))
        self.tree = tree
        self.domains = domains
        self.noun_exc = kb.noun_exc
        self.category_index = {name: i for i, name in enumerate(kb.categories)}
        self.cache_size = cache_size
        self.drop_single = drop_single
        #: ``domain: category``: a query's concepts come from its ``classify`` category only (units without a
        #: sense there are left out), so that D(q) is the query's category; a query without a category (no
        #: ``classify`` in front, or uncategorisable) takes each unit's first sense in any category.
        self.strict_category = domains.mode == "category"
        self._cache: dict[tuple[str, str | None], Mapped] = {}
        self._senses: dict[str, tuple[int, ...]] = {}  # keys tried -> senses in a domain (memory only)
        self._category: list[int] = tree.category.tolist()

    def _bases(self, word: str) -> list[str]:
        out = []
        base = self.noun_exc.get(word)
        if base is not None:
            out.append(base)
        for suffix, repl in NOUN_SUFFIXES:
            if word.endswith(suffix) and len(word) > len(suffix) + 1:
                b = word[: -len(suffix)] + repl
                if b not in out:
                    out.append(b)
        return out

    def _in_domains(self, key: str) -> tuple[int, ...]:
        """The senses of ``key`` that lie in some domain (cached: keys repeat across queries)."""
        nodes = self._senses.get(key)
        if nodes is None:
            label = self.domains.label
            nodes = tuple(n for n in self.tree.senses(key) if label[n] >= 0)
            if len(self._senses) >= 200_000:
                self._senses.clear()
            self._senses[key] = nodes
        return nodes

    def _sense(self, key: str, category: int | None, strict: bool) -> int | None:
        cat_of = self._category
        nodes = self._in_domains(key)
        if not nodes:
            return None
        if category is not None:
            for n in nodes:
                if cat_of[n] == category:
                    return n
            if strict:
                return None
        return nodes[0]

    def concept(self, words: list[str], category: int | None, strict: bool = False) -> tuple[int, int, bool] | None:
        """(node, words trimmed from the left, matched through a plural's base) of a unit's key words."""
        for i in range(len(words)):
            rest = words[i:]
            node = self._sense(" ".join(rest), category, strict)
            if node is not None:
                return node, i, False
            for base in self._bases(rest[-1]):
                node = self._sense(" ".join([*rest[:-1], base]), category, strict)
                if node is not None:
                    return node, i, True
        return None

    def map(self, query: str, category: str | None = None) -> Mapped:
        """The concepts of ``query`` (``category``: the event's ``classify`` category, for the sense choice)."""
        key = (query, category)
        found = self._cache.get(key)
        if found is not None:
            return found
        found = self._map(query, category)
        if self.cache_size:
            if len(self._cache) >= self.cache_size:
                self._cache.clear()
            self._cache[key] = found
        return found

    def _map(self, query: str, category: str | None) -> Mapped:
        if not query or query.isspace():
            return EMPTY
        tokens, units = self.classifier.analyse(query)
        cat = self.category_index.get(category) if category else None
        parts, single = self._parts(tokens, units, cat, self.strict_category and cat is not None)
        toks = tuple(tokens)
        return Mapped(toks, parts, len(units), single, skeleton(toks, parts, False), skeleton(toks, parts, True))

    def _parts(
        self, tokens: list[str], units: list[Unit], cat: int | None, strict: bool
    ) -> tuple[tuple[Part, ...], int]:
        parts: list[Part] = []
        single = 0
        for u in reversed(units):  # units come right to left
            words = u.key.split()
            found = self.concept(words, cat, strict)
            if found is None:
                continue
            node, trimmed, via_base = found
            plural = via_base or tokens[u.end - 1] != words[-1]
            if self.drop_single and self.domains.size(self.domains.of(node)) < 2:
                single += 1
                continue
            parts.append(Part(u.first, u.head + trimmed, u.end, node, plural))
        return tuple(parts), single
