"""Spelling recommendation (paper 001 Algorithm 1, step 1): a rare token the KB does not know is replaced.

A token that no lemma uses gets the most frequent known word one edit away
(``artic`` -> ``arctic``) or, when glued, a segmentation (``bankofamerica`` ->
``bank of america``). Real words get none: tokens under :data:`MIN_FIX_LEN`
letters, WordNet words of any part of speech and their inflections, common
words, foreign words and census names.
"""

from __future__ import annotations

from dataclasses import dataclass

from rapidfuzz.distance import OSA

from knowledge.classifier.model import Tokens
from knowledge.classifier.names import NameTables
from knowledge.classifier.segment import prefixes_of, segment
from knowledge.store import KnowledgeBase
from knowledge.text import STOPWORDS, tokenize

#: Shorter tokens get no recommendation: one edit turns most 4-letter acronyms and names into some word.
MIN_FIX_LEN = 5
#: Shorter tokens are not tried as glued words.
MIN_SEGMENT_LEN = 6
CORRECT_BELOW = 300  # tokens rarer than Zipf 3.0 that no lemma uses get a recommendation
CORRECT_GAIN = 80  # ...if a known word one edit away is at least Zipf 0.8 more frequent
RECOMMEND_MIN = 300  # only words at least this common (Zipf 3.0) are recommended
MIN_SEGMENT_ZIPF = 250  # pieces of a glued token (3+ letters) are at least this common (Zipf 2.5)
MAX_PIECE_LEN = 20
#: Inflections that make a rare token a form of a known word (then it gets no spelling recommendation).
KNOWN_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("ies", "y"),
    ("es", ""),
    ("s", ""),
    ("ing", ""),
    ("ed", ""),
    ("er", ""),
    ("ers", ""),
    ("ly", ""),
)
#: Recommendation indexes and segmentation prefixes by KB hash, shared by the classifiers of one process.
_DELETE_INDEXES: dict[str, dict[str, tuple[str, ...]]] = {}
_PREFIXES: dict[str, frozenset[str]] = {}


def one_edit(a: str, b: str) -> bool:
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
    return short[i:] == long_[i + 1 :]


@dataclass(frozen=True, slots=True)
class SpellingTables:
    """Word sets derived from a KB once per process."""

    plain: frozenset[str]  # tokens that never get a spelling recommendation: one set test per token
    segment_words: frozenset[str]  # pieces a glued token may split into

    @classmethod
    def build(cls, kb: KnowledgeBase, words: frozenset[str], foreign_words: frozenset[str]) -> SpellingTables:
        """``words``: every word of a KB key, and the modifiers."""
        zipf = kb.zipf
        common = frozenset(w for w, z in zipf.items() if z >= CORRECT_BELOW)
        return cls(
            plain=words | kb.known | STOPWORDS | foreign_words | common,
            segment_words=frozenset(w for w in STOPWORDS if len(w) >= 2)
            | frozenset(w for w in words if len(w) >= 3 and zipf.get(w, 0) >= MIN_SEGMENT_ZIPF),
        )


class Speller:
    """Spelling recommendations and segmentations, cached per token (``cache_size`` tokens at most)."""

    def __init__(
        self,
        kb: KnowledgeBase,
        words: frozenset[str],
        tables: SpellingTables,
        names: NameTables,
        cache_size: int,
    ) -> None:
        self.kb = kb
        self.zipf = kb.zipf
        self.words = words
        self._plain = tables.plain
        self._segment_words = tables.segment_words
        self._first_names = names.first
        self._last_names = names.last
        self._deletes: dict[str, tuple[str, ...]] | None = None
        self._segment_prefixes: frozenset[str] | None = None
        self.cache_size = cache_size
        self._fixes: dict[str, tuple[str, ...]] = {}

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
            elif len(token) >= MIN_SEGMENT_LEN:
                out = self._segment(token) or out
        if len(self._fixes) >= self.cache_size:
            self._fixes.clear()
        self._fixes[token] = out
        return out

    def is_word(self, token: str) -> bool:
        """A real word that must not be repaired: common, WordNet, foreign, a census name, or an inflection of one."""
        return (
            token in self._plain
            or token in self._first_names
            or token in self._last_names
            or (token.isalpha() and self._known_form(token))
        )

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
        """Build the lazy spelling-recommendation and segmentation indexes now (otherwise built on first need)."""
        self._delete_index()
        self._prefixes()

    def _prefixes(self) -> frozenset[str]:
        """Prefixes of the pieces a glued token may split into (shared per KB)."""
        got = _PREFIXES.get(self.kb.sha256)
        if got is None:
            got = _PREFIXES[self.kb.sha256] = prefixes_of(self._segment_words)
        self._segment_prefixes = got
        return got

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
                for d in {w} | {w[:i] + w[i + 1 :] for i in range(len(w))}:
                    index.setdefault(d, []).append(w)
            self._deletes = {k: tuple(v) for k, v in index.items()}
            _DELETE_INDEXES[self.kb.sha256] = self._deletes
        return self._deletes

    def _correct(self, token: str) -> str | None:
        """The most frequent recommendable word one edit (insert, delete, substitute, swap) away."""
        index = self._delete_index()
        zipf = self.zipf
        floor = zipf.get(token, 0) + CORRECT_GAIN
        keys = {token} | {token[:i] + token[i + 1 :] for i in range(len(token))}
        best: str | None = None
        best_z = -1
        for k in keys:
            for c in index.get(k, ()):
                z = zipf.get(c, 0)
                if z < floor or OSA.distance(token, c, score_cutoff=1) != 1:  # one edit (C, not one_edit)
                    continue
                if z > best_z or (z == best_z and best is not None and c < best):
                    best, best_z = c, z
        return best

    def _segment(self, token: str) -> tuple[str, ...] | None:
        """Split a glued token into known words (fewest pieces, then most frequent)."""
        prefixes = self._segment_prefixes
        if prefixes is None:
            prefixes = self._prefixes()
        pieces = segment(token, self._segment_words, prefixes, self.zipf, MAX_PIECE_LEN)
        return None if pieces is None or len(pieces) < 2 else tuple(pieces)

    def tokens(self, query: str) -> Tokens:
        """Tokens of ``query`` with recommendations applied (the query is normalised once)."""
        return self.tokens_of(tokenize(query))

    def tokens_of(self, raw: list[str]) -> Tokens:
        """:meth:`tokens` of a query already tokenised (``raw`` = :func:`~knowledge.text.tokenize` of it)."""
        plain = self._plain
        if plain.issuperset(raw):  # fast path: no token needs a recommendation
            return Tokens(raw, None, None, raw)
        fixes: list[tuple[str, ...] | None] = []  # the recommendation of each token (None: kept as typed)
        some = False
        for t in raw:
            fixed = None if t in plain or len(t) < MIN_FIX_LEN else self.recommend(t)
            if fixed is not None and fixed == (t,):
                fixed = None
            some = some or fixed is not None
            fixes.append(fixed)
        if not some:
            return Tokens(raw, None, None, raw)
        zipf = self.zipf
        toks: list[str] = []
        surf: list[float] = []
        changed: list[bool] = []
        for t, fixed in zip(raw, fixes):
            z = zipf.get(t, 0) / 100.0
            if fixed is None:
                toks.append(t)
                surf.append(z)
                changed.append(False)
                continue
            for f in fixed:
                toks.append(f)
                surf.append(z if len(fixed) == 1 else zipf.get(f, 0) / 100.0)
                changed.append(f != t)
        return Tokens(toks, surf, changed, raw)
