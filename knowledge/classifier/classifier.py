"""Query classifier: paper 001 Algorithm 1 over the compiled KB, with paper 004 §3.4 mapping.

Per query:

1. **Tokens** — case-folded words (``www.ebay.com`` -> ``www ebay com``). A rare
   token that no lemma uses gets a **spelling recommendation** (the most frequent
   known word one edit away: ``artic`` -> ``arctic``) or, for glued words, a
   **segmentation** (``bankofamerica`` -> ``bank of america``). Real words get
   none: tokens under five letters, WordNet words of any part of speech and their
   inflections, and census names.
2. **Semantic units** — right to left: the longest span ending at the current
   token that is a KB lemma (WordNet noun, multiword included, plurals
   normalised; a curated term), found by **progressive left-trimming**; adjectives
   just before it join the unit (``european soccer``). Stop words never start or
   end a unit, except in a curated term (``t mobile``, ``realtor com``).
   Units that name a city or a person (HIPAA identifiers, which paper 001
   removes) are the main unit only when nothing else is left; in the voting of
   :meth:`Classifier.classify` named states, countries and regions are outvoted
   by topic words too (``texas lottery`` is about the lottery).
3. **Main unit** — the most specific unit: lowest wordfreq frequency (the
   paper's "entropy"; ``european soccer`` 10^4.38 beats ``players`` 10^5.30).
4. **Category** — :meth:`Classifier.classify_paper` takes the main unit's category
   alone (Algorithm 1 as published). :meth:`Classifier.classify` lets every unit
   vote with weight growing with its specificity, the main unit counting most, so
   context can overrule one ambiguous word; the main unit reported is then the
   most specific unit of the winning category. Two kinds of unit do not vote
   there: a unit whose senses reach a category with under ``MIN_SHARE`` of their
   weight (``MIN_SHARE_COMMON`` for everyday words such as ``home`` or ``life``:
   its main senses have no category, so it is no evidence), and the words of a
   person's name (a census first name then a census surname, far likelier as a
   name than as words: ``katy perry``), an identifier rather than a topic; a query
   left with no voting unit is uncategorisable.

Queries made mostly of words common in other languages and rare in English go to
the ``foreign`` category (ODP's World); a lone such word must be far commoner there
than in English (``trabajo``, not the brand-like ``sentra``). A query with no unit is uncategorisable:
:meth:`Classifier.classify` returns None.
"""

from __future__ import annotations

import math
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from knowledge import KnowledgeBase, load_kb
from knowledge.store import FLAG_CURATED, FLAG_IDENT, FLAG_PLACE
from knowledge.text import NOUN_SUFFIXES, STOPWORDS, WEB_WORDS, tokenize

CACHE_SIZE = 200_000
MAX_MODIFIERS = 2
#: Shorter tokens get no recommendation: one edit turns most 4-letter acronyms and names into some word.
MIN_FIX_LEN = 5
CORRECT_BELOW = 300  # tokens rarer than Zipf 3.0 that no lemma uses get a recommendation
CORRECT_GAIN = 80  # ...if a known word one edit away is at least Zipf 0.8 more frequent
MIN_SEGMENT_ZIPF = 250
#: Vote of a unit: max(VOTE_FLOOR, VOTE_BASE - its Zipf), times the boosts below.
VOTE_BASE = 7.5
VOTE_FLOOR = 0.5
MAIN_BOOST = 1.5  # the main (most specific) unit
CURATED_BOOST = 2.0  # a curated term (brand, site, league)
NAMED_FACTOR = 0.25  # a named place or person when topic words are present
#: A census first name followed by a census surname is a person's name when the sum of their scores
#: (log10 of census share over English word frequency) reaches this: ``katy perry``, not ``rose garden``.
NAME_MIN_SCORE = 2.0
#: A unit whose senses reach a category with less than this share (permille) of their weight is no
#: evidence: its main senses have no category (``job`` -> 1/1000 each for three categories).
MIN_SHARE = 50
#: ...and a word this common (Zipf x 100: ``home``, ``state``, ``life``) must reach MIN_SHARE_COMMON:
#: everyday words have many senses, and a minor one with a category is weak evidence.
COMMON_ZIPF = 520
MIN_SHARE_COMMON = 200
LATIN_END = 0x24F  # last code point of Latin Extended-B: letters above it are another script
#: Function words of the foreign languages that are also English tokens or stop words (``la``, ``de``):
#: they count as foreign once a query has a foreign content word.
FUNCTION_WORDS: dict[str, str] = {
    **dict.fromkeys(["el", "los", "las", "del", "por", "para", "con", "y", "en", "la", "de"], "es"),
    **dict.fromkeys(["le", "les", "des", "du", "au", "aux", "et", "une", "un", "sur"], "fr"),
    **dict.fromkeys(["der", "die", "das", "und", "mit", "ein", "eine", "im"], "de"),
    **dict.fromkeys(["il", "di", "della", "che", "gli"], "it"),
    **dict.fromkeys(["os", "dos", "da", "ao", "em", "um", "uma"], "pt"),
}
#: Inflections that make a rare token a form of a known word (then it gets no spelling recommendation).
KNOWN_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("ies", "y"), ("es", ""), ("s", ""), ("ing", ""), ("ed", ""), ("er", ""), ("ers", ""), ("ly", ""),
)
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


def _min_share(u: Unit) -> int:
    """Share (permille) of its sense weight a unit's top category needs for the unit to count as evidence."""
    return MIN_SHARE_COMMON if u.zipf * 100 >= COMMON_ZIPF and not u.entry[0] & FLAG_CURATED else MIN_SHARE


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


@dataclass(frozen=True, slots=True)
class _Tables:
    """Lookup sets derived from a KB once per process (shared by its classifiers)."""

    words: frozenset[str]  # every word of a KB key, and the modifiers
    multi_first: frozenset[str]  # first words of multiword keys: a longer span must start with one
    multi_first2: frozenset[str]  # first two words of keys of 3+ words
    last_words: frozenset[str]  # last words of keys: the only possible inflection bases
    infl: dict[str, tuple[str, ...]]  # inflection bases of known words (others are derived per use)
    plain: frozenset[str]  # tokens that never get a spelling recommendation: one set test per token
    segment_words: frozenset[str]  # pieces a glued token may split into
    foreign_words: frozenset[str]
    curated_stop_first: frozenset[str]  # stop words that start a curated term (``t mobile``)
    curated_stop_last: frozenset[str]  # stop words that end a multiword curated term (``cars com``)
    first_names: dict[str, float]  # census first names -> name score (see _name_scores)
    last_names: dict[str, float]
    paths: list[tuple[str, ...] | None]  # path tuples, filled on first use


def _census_shares(file: str) -> dict[str, float]:
    """``names`` package census list (``NAME  percent  cumulative  rank``): lower-case name -> share."""
    import names

    out: dict[str, float] = {}
    path = Path(names.__file__).with_name(file)
    for line in path.read_text(encoding="ascii", errors="replace").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            try:
                share = max(float(parts[1]) / 100.0, 5e-7)
            except ValueError:
                continue
            key = parts[0].lower()
            out[key] = max(out.get(key, 0.0), share)
    return out


def _name_scores(zipf: dict[str, int]) -> tuple[dict[str, float], dict[str, float]]:
    """First- and last-name scores: log10(census share) - log10(English word frequency)."""
    def score(shares: dict[str, float]) -> dict[str, float]:
        # zipf x 100 = 100 * (log10(frequency) + 9); unknown words count as Zipf 1.
        return {t: math.log10(v) - (max(zipf.get(t, 0), 100) / 100.0 - 9.0) for t, v in shares.items() if len(t) > 1}

    first = _census_shares("dist.male.first")
    for k, v in _census_shares("dist.female.first").items():
        first[k] = max(first.get(k, 0.0), v)
    return score(first), score(_census_shares("dist.all.last"))


#: Derived tables by KB hash (a process holds one or two KBs).
_TABLES: dict[str, _Tables] = {}


def _tables(kb: KnowledgeBase) -> _Tables:
    t = _TABLES.get(kb.sha256)
    if t is not None:
        return t
    lemmas, zipf, exc = kb.lemmas, kb.zipf, kb.noun_exc
    words = frozenset(w for k in lemmas for w in k.split()) | kb.modifiers
    last = frozenset(k.rpartition(" ")[2] for k in lemmas)
    maybe_plural = (w for w in zipf if w.endswith(("s", "men")) or w in exc)
    common = frozenset(w for w, z in zipf.items() if z >= CORRECT_BELOW)
    foreign = frozenset(kb.foreign)
    first_names, last_names = _name_scores(zipf)
    t = _Tables(
        words=words,
        multi_first=frozenset(k.split(" ", 1)[0] for k in lemmas if " " in k),
        multi_first2=frozenset(" ".join(k.split(" ", 2)[:2]) for k in lemmas if k.count(" ") >= 2),
        last_words=last,
        infl={w: b for w in maybe_plural if (b := _inflection_bases(w, exc, last))},
        plain=words | kb.known | STOPWORDS | foreign | common,
        segment_words=frozenset(w for w in STOPWORDS if len(w) >= 2)
        | frozenset(w for w in words if len(w) >= 3 and zipf.get(w, 0) >= MIN_SEGMENT_ZIPF),
        foreign_words=foreign,
        curated_stop_last=frozenset(
            k.rpartition(" ")[2] for k, e in lemmas.items()
            if e[0] & FLAG_CURATED and " " in k and k.rpartition(" ")[2] in STOPWORDS
        ),
        curated_stop_first=frozenset(
            k.split(" ", 1)[0] for k, e in lemmas.items() if e[0] & FLAG_CURATED and k.split(" ", 1)[0] in STOPWORDS
        ),
        paths=[None] * len(kb.paths),
        first_names=first_names,
        last_names=last_names,
    )
    _TABLES[kb.sha256] = t
    return t


def _inflection_bases(word: str, noun_exc: dict[str, str], last_words: frozenset[str]) -> tuple[str, ...]:
    """Bases of ``word`` as a plural noun (``noun.exc``, then morphy's rules) that end some KB key."""
    base = noun_exc.get(word)  # the builder kept only bases that are KB keys
    out: list[str] = [] if base is None else [base]
    if word.endswith("s") or word.endswith("men"):
        for suffix, repl in NOUN_SUFFIXES:
            if word.endswith(suffix) and len(word) > len(suffix) + 1:
                b = word[: -len(suffix)] + repl
                if b in last_words and b not in out:
                    out.append(b)
    return tuple(out)


def _combined_zipf(zipfs: list[float]) -> float:
    """wordfreq's frequency of a phrase: 1/f = sum(1/f_i), in Zipf units."""
    if len(zipfs) == 1:
        return zipfs[0]
    return -math.log10(sum(10.0 ** (-z) for z in zipfs))


class Classifier:
    """Classify queries with a compiled :class:`~knowledge.KnowledgeBase` (thread-compatible, cached)."""

    def __init__(self, kb: KnowledgeBase, cache_size: int = CACHE_SIZE) -> None:
        self.kb = kb
        self.lemmas = kb.lemmas
        self.zipf = kb.zipf
        self.modifiers = kb.modifiers
        self.noun_exc = kb.noun_exc
        self.max_ngram = kb.max_ngram
        t = _tables(kb)
        self.words = t.words
        self.multi_first = t.multi_first
        self.multi_first2 = t.multi_first2
        self._last_words = t.last_words
        self._infl = t.infl
        self._plain = t.plain
        self._segment_words = t.segment_words
        self._foreign_words = t.foreign_words
        self._curated_stop_first = t.curated_stop_first
        self._curated_stop_last = t.curated_stop_last
        self._first_names = t.first_names
        self._last_names = t.last_names
        self._paths = t.paths
        self._deletes: dict[str, tuple[str, ...]] | None = None
        self.cache_size = cache_size
        self._cache: dict[str, Classification | None] = {}
        self._fixes: dict[str, tuple[str, ...]] = {}

    @classmethod
    def load(cls, kb_path: Path | None = None, *, build_if_needed: bool = True) -> Classifier:
        """Load the compiled KB (building it when missing, corrupt or stale)."""
        return cls(load_kb(kb_path, build_if_needed=build_if_needed))

    # --- tokens -------------------------------------------------------------------------

    def recommend(self, token: str) -> tuple[str, ...]:
        """The token as the KB should see it: itself, a spelling recommendation, or a segmentation."""
        fixed = self._fixes.get(token)
        if fixed is not None:
            return fixed
        out: tuple[str, ...] = (token,)
        if (
            token.isalpha()
            and len(token) >= MIN_FIX_LEN
            and token not in self._plain
            and not self._known_form(token)
            and token not in self._first_names
            and token not in self._last_names
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

    def _known_form(self, token: str) -> bool:
        """An inflected form (plural, -ing, -ed, -er) of a known word: a real word, not a typo."""
        plain = self._plain
        for suffix, repl in KNOWN_SUFFIXES:
            if token.endswith(suffix) and len(token) > len(suffix) + 2:
                stem = token[: -len(suffix)]
                if stem + repl in plain or (repl == "" and suffix in ("ing", "ed", "er") and stem + "e" in plain):
                    return True
                if repl == "" and len(stem) > 2 and stem[-1] == stem[-2] and stem[:-1] in plain:
                    return True  # doubled consonant: running -> run
        return False

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
        pieces_ok, zipf = self._segment_words, self.zipf
        for j in range(2, n + 1):
            for i in range(max(0, j - 20), j - 1):
                prev = best[i]
                if prev is None:
                    continue
                piece = token[i:j]
                if piece not in pieces_ok:
                    continue
                z = zipf.get(piece, 0)
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
        toks, surf, changed, _ = self._tokens(query)
        if surf is None or changed is None:  # nothing was changed: typed = recommended
            return toks, [self.zipf.get(t, 0) / 100.0 for t in toks], [False] * len(toks)
        return toks, surf, changed

    def _tokens(self, query: str) -> tuple[list[str], list[float] | None, list[bool] | None, list[str]]:
        """:meth:`tokens` plus the raw tokens (the query is normalised once); ``None, None`` = nothing changed."""
        raw = tokenize(query)
        plain, zipf = self._plain, self.zipf
        for t in raw:  # fast path: no token needs a recommendation (a frozenset test per token)
            if t not in plain and len(t) >= MIN_FIX_LEN:
                break
        else:
            return raw, None, None, raw
        toks: list[str] = []
        surf: list[float] = []
        changed: list[bool] = []
        for t in raw:
            z = zipf.get(t, 0) / 100.0
            if t in plain or len(t) < MIN_FIX_LEN:
                toks.append(t)
                surf.append(z)
                changed.append(False)
                continue
            fixed = self.recommend(t)
            for f in fixed:
                toks.append(f)
                surf.append(z if len(fixed) == 1 else zipf.get(f, 0) / 100.0)
                changed.append(f != t)
        return toks, surf, changed, raw

    # --- units --------------------------------------------------------------------------

    def _bases(self, last: str) -> tuple[str, ...]:
        """Noun-inflection bases of a span's last word that end some KB key (noun.exc, then morphy rules)."""
        found = self._infl.get(last)
        if found is not None:
            return found
        if last in self.zipf:
            return ()  # a known word without inflection bases
        if not (last.endswith("s") or last.endswith("men")) and last not in self.noun_exc:
            return ()
        return _inflection_bases(last, self.noun_exc, self._last_words)

    def units(self, query: str, *, phrases_over_corrections: bool = True) -> list[Unit]:
        """Semantic units of ``query``, right to left (progressive left-trimming)."""
        return self._units(self._tokens(query), phrases_over_corrections)

    def _units(
        self, tokens: tuple[list[str], list[float] | None, list[bool] | None, list[str]],
        phrases_over_corrections: bool = True,
    ) -> list[Unit]:
        toks, surf, changed, _ = tokens
        out: list[Unit] = []
        end = len(toks)
        mods, multi, multi2, zipf, lemmas = self.modifiers, self.multi_first, self.multi_first2, self.zipf, self.lemmas
        infl, bases, stop, stop_ok = self._infl, self._bases, STOPWORDS, self._curated_stop_first
        stop_last = self._curated_stop_last
        max_n = self.max_ngram
        while end > 0:
            last = toks[end - 1]
            # Only a curated term may end with a function word (``realtor com``), a WordNet phrase with a
            # web word (``home page``).
            stop_end = last in stop
            if stop_end and last not in stop_last and last not in WEB_WORDS:
                end -= 1
                continue
            found = None
            cands = infl.get(last, ()) if last in zipf else bases(last)  # inflection bases of the span end
            lo = end - max_n if end > max_n else 0
            for start in range(lo, end - 1):  # longest span first: left-trimming
                first = toks[start]
                if first not in multi:
                    continue
                stop_first = first in stop and first not in WEB_WORDS
                if stop_first and first not in stop_ok:  # only a curated term may start with a function word
                    continue
                curated_only = stop_first or (stop_end and last not in WEB_WORDS)
                if end - start > 2 and first + " " + toks[start + 1] not in multi2:
                    continue  # no multiword key starts with these two words
                if not phrases_over_corrections and changed is not None and any(changed[start:end]):
                    continue
                key = " ".join(toks[start:end])
                e = lemmas.get(key)
                if e is not None and not (curated_only and not e[0] & FLAG_CURATED):
                    found = (start, key, e)
                    break
                if cands:
                    prefix = key[: len(key) - len(last)]
                    for b in cands:
                        e = lemmas.get(prefix + b)
                        if e is not None and not (curated_only and not e[0] & FLAG_CURATED):
                            found = (start, prefix + b, e)
                            break
                    if found is not None:
                        break
            if found is None and stop_end:
                end -= 1
                continue
            if found is None:
                e = lemmas.get(last)
                if e is not None:
                    found = (end - 1, last, e)
                else:
                    for b in cands:
                        e = lemmas.get(b)
                        if e is not None:
                            found = (end - 1, b, e)
                            break
                    else:
                        end -= 1
                        continue
            start, key, entry = found
            m = start
            while m > 0 and start - m < MAX_MODIFIERS and toks[m - 1] in mods and toks[m - 1] not in stop:
                m -= 1
            if end - m == 1:
                z = zipf.get(last, 0) / 100.0
                out.append(Unit(last, key, z, z if surf is None else surf[m], entry))
            else:
                span = toks[m:end]
                z = _combined_zipf([zipf.get(t, 0) / 100.0 for t in span])
                out.append(Unit(" ".join(span), key, z, z if surf is None else _combined_zipf(surf[m:end]), entry))
            end = m
        return out

    # --- classification -----------------------------------------------------------------

    def _result(self, unit: Unit, cat: int, share: float, path: int) -> Classification:
        p = self._paths[path]
        if p is None:
            p = self._paths[path] = self.kb.path(path)
        return Classification(self.kb.categories[cat], p, unit.text, round(share, 3))

    def _foreign(self, raw: list[str], units: list[Unit]) -> Classification | None:
        """ODP World: most words common in another language and rare in English (``raw`` = typed tokens)."""
        kb = self.kb
        if kb.foreign_category < 0:
            return None
        if self._foreign_words.isdisjoint(raw):
            return self._script(raw)
        foreign = kb.foreign
        words = [t for t in raw if t.isalpha() and t not in STOPWORDS]
        hits = [(t, foreign[t]) for t in words if t in foreign]
        if hits:  # function words of those languages count once the query has a foreign content word
            hits += [(t, FUNCTION_WORDS[t]) for t in words if t in FUNCTION_WORDS and t not in foreign]
        if not hits or len(hits) * 2 < len(words) or len(hits) <= sum(len(u.text.split()) for u in units) - 1:
            return None
        if len(hits) == 1 and hits[0][0] in kb.foreign_weak:
            return None  # one word, not much commoner there than in English: likelier a brand or a name
        langs: dict[str, int] = {}
        for _, lang in hits:
            langs[lang] = langs.get(lang, 0) + 1
        lang = max(sorted(langs), key=langs.__getitem__)
        name = kb.categories[kb.foreign_category]
        return Classification(name, (name, lang), hits[0][0], round(len(hits) / len(words), 3))

    def _script(self, raw: list[str]) -> Classification | None:
        """ODP World for queries written mostly in a non-Latin script (Cyrillic, Greek, Han...)."""
        if "".join(raw).isascii():
            return None
        scripts: dict[str, int] = {}
        for t in raw:
            c = t[0]
            if c.isalpha() and ord(c) > LATIN_END:
                script = unicodedata.name(c, "OTHER").split(" ", 1)[0].lower()
                scripts[script] = scripts.get(script, 0) + 1
        n = sum(scripts.values())
        if n * 2 <= len(raw):
            return None
        script = max(sorted(scripts), key=scripts.__getitem__)
        name = self.kb.categories[self.kb.foreign_category]
        first = next(t for t in raw if t[0].isalpha() and ord(t[0]) > LATIN_END)
        return Classification(name, (name, script), first, round(n / len(raw), 3))

    @staticmethod
    def _main(units: list[Unit], surface: bool, avoid: int = FLAG_IDENT) -> Unit:
        pool = [u for u in units if not u.entry[0] & avoid] or units
        if len(pool) == 1:
            return pool[0]
        return min(pool, key=lambda u: ((u.surface_zipf if surface else u.zipf), u.text))

    def classify_paper(self, query: str) -> Classification | None:
        """Algorithm 1 as published: the main unit's category alone (no phrase over a corrected word)."""
        tokens = self._tokens(query)
        units = self._units(tokens, phrases_over_corrections=False)
        if not units:
            return self._foreign(tokens[3], units)
        main = self._main(units, surface=True)
        cat, share, path = main.categories()[0]
        return self._result(main, cat, share, path)

    def _name_words(self, raw: list[str]) -> set[str]:
        """Words of person names: a census first name then a surname, far likelier as a name than as words."""
        first, last = self._first_names, self._last_names
        out: set[str] = set()
        for i in range(len(raw) - 1):
            a = first.get(raw[i])
            if a is None:
                continue
            b = last.get(raw[i + 1])
            if b is not None and a + b >= NAME_MIN_SCORE:
                out.add(raw[i])
                out.add(raw[i + 1])
        return out

    def _vote(self, query: str) -> Classification | None:
        tokens = self._tokens(query)
        units = self._units(tokens)
        foreign = self._foreign(tokens[3], units)
        if foreign is not None or not units:
            return foreign
        if len(units) == 1:
            if units[0].entry[2] < _min_share(units[0]):
                return None
        else:
            units = [u for u in units if u.entry[2] >= _min_share(u)]
            if not units:
                return None
        raw = tokens[3]
        if len(raw) > 1 and not self._first_names.keys().isdisjoint(raw):
            names = self._name_words(raw)
            if names:  # a person's name is an identifier, not a topic (paper 001 removes them)
                units = [u for u in units if u.entry[0] & FLAG_CURATED or " " in u.key
                         or not names.issuperset(u.text.split())]
                if not units:
                    return None
        named = FLAG_IDENT | FLAG_PLACE
        if len(units) == 1:  # one unit: its top category (the vote below, without the bookkeeping)
            u = units[0]
            e = u.entry
            w = max(VOTE_FLOOR, VOTE_BASE - u.zipf) * MAIN_BOOST * (CURATED_BOOST if e[0] & FLAG_CURATED else 1.0)
            w /= 1000.0
            top, total = 1, 0.0
            for i in range(1, len(e), 3):
                total += w * e[i + 1]
                if e[i + 1] > e[top + 1] or (e[i + 1] == e[top + 1] and e[i] < e[top]):
                    top = i
            return self._result(u, e[top], w * e[top + 1] / total, e[top + 2])
        main = self._main(units, surface=False, avoid=named)
        has_plain = any(not u.entry[0] & named for u in units)
        scores: dict[int, float] = {}
        for u in units:
            e = u.entry
            w = VOTE_BASE - u.zipf
            if w < VOTE_FLOOR:
                w = VOTE_FLOOR
            if u is main:
                w *= MAIN_BOOST
            if e[0] & FLAG_CURATED:
                w *= CURATED_BOOST
            if has_plain and e[0] & named:
                w *= NAMED_FACTOR
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
