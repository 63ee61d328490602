"""Query classifier: paper 001 Algorithm 1 over the compiled KB, with paper 004 §3.4 mapping.

Per query:

1. **Tokens** — case-folded words (``www.ebay.com`` -> ``www ebay com``). A rare
   token that no lemma uses gets a **spelling recommendation** (the most frequent
   known word one edit away: ``artic`` -> ``arctic``) or, for glued words, a
   **segmentation** (``bankofamerica`` -> ``bank of america``).
2. **Semantic units** — right to left: the longest span ending at the current
   token that is a KB lemma (WordNet noun, multiword included, plurals
   normalised; a curated term), found by **progressive left-trimming**; adjectives
   just before it join the unit (``european soccer``). Stop words never start or
   end a unit. Units that name a city or a person (HIPAA identifiers, which paper
   001 removes) are the main unit only when nothing else is left; in the voting of
   :meth:`Classifier.classify` named states, countries and regions are outvoted
   by topic words too (``texas lottery`` is about the lottery).
3. **Main unit** — the most specific unit: lowest wordfreq frequency (the
   paper's "entropy"; ``european soccer`` 10^4.38 beats ``players`` 10^5.30).
4. **Category** — :meth:`Classifier.classify_paper` takes the main unit's category
   alone (Algorithm 1 as published). :meth:`Classifier.classify` lets every unit
   vote with weight growing with its specificity, the main unit counting most, so
   context can overrule one ambiguous word; the main unit reported is then the
   most specific unit of the winning category.

Queries made mostly of words common in other languages and rare in English go to
the ``foreign`` category (ODP's World). A query with no unit is uncategorisable:
:meth:`Classifier.classify` returns None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from sidecar.kb import KnowledgeBase, load_kb
from sidecar.kb.store import FLAG_CURATED, FLAG_IDENT, FLAG_PLACE
from sidecar.kb.text import NOUN_SUFFIXES, STOPWORDS, tokenize

CACHE_SIZE = 200_000
MAX_MODIFIERS = 2
CORRECT_BELOW = 300  # tokens rarer than Zipf 3.0 that no lemma uses get a recommendation
CORRECT_GAIN = 80  # ...if a known word one edit away is at least Zipf 0.8 more frequent
MIN_SEGMENT_ZIPF = 250
RECOMMEND_MIN = 300  # only words at least this common (Zipf 3.0) are recommended
#: Recommendation indexes by KB hash, shared by the classifiers of one process.
_DELETE_INDEXES: dict[str, dict[str, tuple[str, ...]]] = {}


@dataclass(frozen=True, slots=True)
class Classification:
    """What a query is about. ``path`` = levels L1..L5 (L1 = ``category``)."""

    category: str
    path: tuple[str, ...]
    main_unit: str
    confidence: float


class Unit(NamedTuple):
    """A semantic unit: its text, the KB key it matched, frequencies and KB entry."""

    text: str
    key: str
    zipf: float  # of the unit as it stands (after spelling recommendation)
    surface_zipf: float  # of the words the user typed
    entry: tuple[int, ...]

    @property
    def ident(self) -> bool:
        return bool(self.entry[0] & FLAG_IDENT)

    @property
    def curated(self) -> bool:
        return bool(self.entry[0] & FLAG_CURATED)

    def categories(self) -> list[tuple[int, float, int]]:
        """``(category index, share 0..1, path index)`` in decreasing share."""
        e = self.entry
        return [(e[i], e[i + 1] / 1000.0, e[i + 2]) for i in range(1, len(e), 3)]


def _one_edit(a: str, b: str) -> bool:
    """Damerau-Levenshtein distance of ``a`` and ``b`` is exactly 1."""
    if a == b:
        return False
    la, lb = len(a), len(b)
    if la == lb:
        diff = [i for i in range(la) if a[i] != b[i]]
        if len(diff) == 1:
            return True
        return len(diff) == 2 and diff[1] == diff[0] + 1 and a[diff[0]] == b[diff[1]] and a[diff[1]] == b[diff[0]]
    if abs(la - lb) != 1:
        return False
    short, long_ = (a, b) if la < lb else (b, a)
    i = 0
    while i < len(short) and short[i] == long_[i]:
        i += 1
    return short[i:] == long_[i + 1:]


def _combined_zipf(zipfs: list[float]) -> float:
    """wordfreq's frequency of a phrase: 1/f = sum(1/f_i), in Zipf units."""
    if len(zipfs) == 1:
        return zipfs[0]
    return -math.log10(sum(10.0 ** (-z) for z in zipfs))


class Classifier:
    """Classify queries with a compiled :class:`~sidecar.kb.KnowledgeBase` (thread-compatible, cached)."""

    def __init__(self, kb: KnowledgeBase, cache_size: int = CACHE_SIZE) -> None:
        self.kb = kb
        self.lemmas = kb.lemmas
        self.zipf = kb.zipf
        self.modifiers = kb.modifiers
        self.noun_exc = kb.noun_exc
        self.max_ngram = kb.max_ngram
        self.words = frozenset(w for k in kb.lemmas for w in k.split()) | kb.modifiers
        #: First words of multiword keys: a longer span can only match when it starts with one.
        self.multi_first = frozenset(k.split(" ", 1)[0] for k in kb.lemmas if " " in k)
        self._deletes: dict[str, tuple[str, ...]] | None = None
        self._lookups: dict[str, tuple[str, tuple[int, ...]] | None] = {}
        self.cache_size = cache_size
        self._cache: dict[str, Classification | None] = {}
        self._fixes: dict[str, tuple[str, ...]] = {}

    @classmethod
    def load(cls, kb_path: Path | None = None, *, build_if_needed: bool = True) -> Classifier:
        """Load the compiled KB (building it when missing, corrupt or stale)."""
        return cls(load_kb(kb_path, build_if_needed=build_if_needed))

    # --- tokens -------------------------------------------------------------------------

    def _z(self, word: str) -> float:
        return self.zipf.get(word, 0) / 100.0

    def recommend(self, token: str) -> tuple[str, ...]:
        """The token as the KB should see it: itself, a spelling recommendation, or a segmentation."""
        fixed = self._fixes.get(token)
        if fixed is not None:
            return fixed
        out: tuple[str, ...] = (token,)
        if (
            token.isalpha()
            and len(token) >= 4
            and token not in self.words
            and token not in STOPWORDS
            and token not in self.kb.foreign
            and self.zipf.get(token, 0) < CORRECT_BELOW
        ):
            best = self._correct(token)
            if best is not None:
                out = (best,)
            elif len(token) >= 6:
                out = self._segment(token) or out
        if len(self._fixes) >= self.cache_size:
            self._fixes.clear()
        self._fixes[token] = out
        return out

    def prepare(self) -> None:
        """Build the lazy spelling-recommendation index now (it is otherwise built on first need)."""
        self._delete_index()

    def _delete_index(self) -> dict[str, tuple[str, ...]]:
        """Symmetric-delete index (SymSpell, distance 1) over the recommendable words, built on first use."""
        if self._deletes is None:
            shared = _DELETE_INDEXES.get(self.kb.sha256)
            if shared is not None:
                self._deletes = shared
                return shared
            index: dict[str, list[str]] = {}
            zipf = self.zipf
            for w in sorted(self.words):
                if len(w) < 3 or not w.isalpha() or zipf.get(w, 0) < RECOMMEND_MIN:
                    continue
                for d in {w} | {w[:i] + w[i + 1:] for i in range(len(w))}:
                    index.setdefault(d, []).append(w)
            self._deletes = {k: tuple(v) for k, v in index.items()}
            _DELETE_INDEXES[self.kb.sha256] = self._deletes
        return self._deletes

    def _correct(self, token: str) -> str | None:
        """The most frequent recommendable word one edit (insert, delete, substitute, swap) away."""
        index = self._delete_index()
        zipf = self.zipf
        floor = zipf.get(token, 0) + CORRECT_GAIN
        keys = {token} | {token[:i] + token[i + 1:] for i in range(len(token))}
        best, best_z = None, -1
        for k in keys:
            for c in index.get(k, ()):
                z = zipf.get(c, 0)
                if z < floor or not _one_edit(token, c):
                    continue
                if z > best_z or (z == best_z and best is not None and c < best):
                    best, best_z = c, z
        return best

    def _segment(self, token: str) -> tuple[str, ...] | None:
        """Split a glued token into known words (fewest pieces, then most frequent)."""
        n = len(token)
        best: list[tuple[int, float, int] | None] = [None] * (n + 1)  # (pieces, -sum zipf, previous cut)
        best[0] = (0, 0.0, -1)
        for j in range(1, n + 1):
            for i in range(max(0, j - 20), j):
                prev = best[i]
                if prev is None:
                    continue
                piece = token[i:j]
                z = self.zipf.get(piece, 0)
                if len(piece) < 2:
                    continue
                if piece in STOPWORDS:
                    pass
                elif len(piece) < 3 or z < MIN_SEGMENT_ZIPF or piece not in self.words:
                    continue
                cand = (prev[0] + 1, prev[1] - z, i)
                if best[j] is None or cand[:2] < best[j][:2]:  # type: ignore[index]
                    best[j] = cand
        if best[n] is None or best[n][0] < 2:  # type: ignore[index]
            return None
        pieces = []
        j = n
        while j > 0:
            i = best[j][2]  # type: ignore[index]
            pieces.append(token[i:j])
            j = i
        return tuple(reversed(pieces))

    def tokens(self, query: str) -> tuple[list[str], list[float], list[bool]]:
        """Recommended tokens, the Zipf of what was typed for each, and whether it was changed."""
        toks: list[str] = []
        surf: list[float] = []
        changed: list[bool] = []
        fixes, zipf = self._fixes, self.zipf
        for t in tokenize(query):
            fixed = fixes.get(t) or self.recommend(t)
            if len(fixed) == 1 and fixed[0] is t:
                toks.append(t)
                surf.append(zipf.get(t, 0) / 100.0)
                changed.append(False)
                continue
            z = zipf.get(t, 0) / 100.0
            for f in fixed:
                toks.append(f)
                surf.append(z if len(fixed) == 1 else zipf.get(f, 0) / 100.0)
                changed.append(f != t)
        return toks, surf, changed

    # --- units --------------------------------------------------------------------------

    def _lookup(self, key: str) -> tuple[str, tuple[int, ...]] | None:
        """The KB key and entry for a span, trying noun inflections of its last word (cached)."""
        cache = self._lookups
        if key in cache:
            return cache[key]
        hit = self._lookup_uncached(key)
        if len(cache) >= self.cache_size:
            cache.clear()
        if self.cache_size:
            cache[key] = hit
        return hit

    def _lookup_uncached(self, key: str) -> tuple[str, tuple[int, ...]] | None:
        e = self.lemmas.get(key)
        if e is not None:
            return key, e
        head, _, last = key.rpartition(" ")
        prefix = head + " " if head else ""
        base = self.noun_exc.get(last)
        if base is not None:
            e = self.lemmas.get(prefix + base)
            if e is not None:
                return prefix + base, e
        if not (last.endswith("s") or last.endswith("men")):
            return None
        for suffix, repl in NOUN_SUFFIXES:
            if last.endswith(suffix) and len(last) > len(suffix) + 1:
                k = prefix + last[: -len(suffix)] + repl
                e = self.lemmas.get(k)
                if e is not None:
                    return k, e
        return None

    def units(self, query: str, *, phrases_over_corrections: bool = True) -> list[Unit]:
        """Semantic units of ``query``, right to left (progressive left-trimming)."""
        toks, surf, changed = self.tokens(query)
        out: list[Unit] = []
        end = len(toks)
        mods, multi, zipf, lookup = self.modifiers, self.multi_first, self.zipf, self._lookup
        max_n = self.max_ngram
        while end > 0:
            last = toks[end - 1]
            if last in STOPWORDS:
                end -= 1
                continue
            found = None
            for start in range(max(0, end - max_n), end - 1):  # longest span first: left-trimming
                first = toks[start]
                if first not in multi or first in STOPWORDS:
                    continue
                if not phrases_over_corrections and any(changed[start:end]):
                    continue
                hit = lookup(" ".join(toks[start:end]))
                if hit is not None:
                    found = (start, hit)
                    break
            if found is None:
                hit = lookup(last)
                if hit is None:
                    end -= 1
                    continue
                found = (end - 1, hit)
            start, (key, entry) = found
            m = start
            while m > 0 and start - m < MAX_MODIFIERS and toks[m - 1] in mods and toks[m - 1] not in STOPWORDS:
                m -= 1
            if end - m == 1:
                out.append(Unit(last, key, zipf.get(last, 0) / 100.0, surf[m], entry))
            else:
                span = toks[m:end]
                z = _combined_zipf([zipf.get(t, 0) / 100.0 for t in span])
                out.append(Unit(" ".join(span), key, z, _combined_zipf(surf[m:end]), entry))
            end = m
        return out

    # --- classification -----------------------------------------------------------------

    def _result(self, unit: Unit, cat: int, share: float, path: int) -> Classification:
        return Classification(self.kb.categories[cat], self.kb.path(path), unit.text, round(share, 3))

    def _foreign(self, query: str, units: list[Unit]) -> Classification | None:
        kb = self.kb
        if kb.foreign_category < 0:
            return None
        words = [t for t in tokenize(query) if t.isalpha() and t not in STOPWORDS]
        hits = [(t, kb.foreign[t]) for t in words if t in kb.foreign]
        if not hits or len(hits) * 2 < len(words) or len(hits) <= sum(len(u.text.split()) for u in units) - 1:
            return None
        langs: dict[str, int] = {}
        for _, lang in hits:
            langs[lang] = langs.get(lang, 0) + 1
        lang = max(sorted(langs), key=langs.__getitem__)
        name = kb.categories[kb.foreign_category]
        return Classification(name, (name, lang), hits[0][0], round(len(hits) / len(words), 3))

    @staticmethod
    def _main(units: list[Unit], surface: bool, avoid: int = FLAG_IDENT) -> Unit:
        pool = [u for u in units if not u.entry[0] & avoid] or units
        return min(pool, key=lambda u: ((u.surface_zipf if surface else u.zipf), u.text))

    def classify_paper(self, query: str) -> Classification | None:
        """Algorithm 1 as published: the main unit's category alone (no phrase over a corrected word)."""
        units = self.units(query, phrases_over_corrections=False)
        if not units:
            return self._foreign(query, units)
        main = self._main(units, surface=True)
        cat, share, path = main.categories()[0]
        return self._result(main, cat, share, path)

    def _vote(self, query: str) -> Classification | None:
        units = self.units(query)
        foreign = self._foreign(query, units)
        if foreign is not None or not units:
            return foreign
        named = FLAG_IDENT | FLAG_PLACE
        main = self._main(units, surface=False, avoid=named)
        has_plain = any(not u.entry[0] & named for u in units)
        scores: dict[int, float] = {}
        for u in units:
            e = u.entry
            w = max(0.5, 7.5 - u.zipf)
            if u is main:
                w *= 1.5
            if e[0] & FLAG_CURATED:
                w *= 2.0
            if has_plain and e[0] & named:
                w *= 0.25
            w /= 1000.0
            for i in range(1, len(e), 3):
                scores[e[i]] = scores.get(e[i], 0.0) + w * e[i + 1]
        total = sum(scores.values())
        win = max(sorted(scores), key=scores.__getitem__)
        backers = [u for u in units if win in u.entry[1::3]]
        best = self._main(backers, surface=False, avoid=named)
        e = best.entry
        path = next(e[i + 2] for i in range(1, len(e), 3) if e[i] == win)
        return self._result(best, win, scores[win] / total, path)

    def classify(self, query: str) -> Classification | None:
        """Category, path, main unit and confidence of ``query``; None when uncategorisable."""
        cache = self._cache
        if query in cache:
            return cache[query]
        result = self._vote(query)
        if len(cache) >= self.cache_size:
            cache.clear()
        cache[query] = result
        return result

    def classify_uncached(self, query: str) -> Classification | None:
        """:meth:`classify` without the per-query cache (word-level caches still apply)."""
        return self._vote(query)

    def classify_many(self, queries: list[str]) -> list[Classification | None]:
        classify = self.classify
        return [classify(q) for q in queries]
