"""Before giving up: what the classifier tries when a query's own units decide nothing.

Paper 001 gives up on a query with no categorised unit (its coverage: 0.85). Short web
queries are often a brand, a site, a misspelled or glued name, a person: these steps,
tried in order only when :func:`~knowledge.classifier.vote.vote` found nothing, raise
the coverage (an improvement on the paper; measured with ``querylog kb evaluate``):

1. **Token repair**, then the units and the vote again on the repaired tokens. A
   token no KB key uses is
   * split where letters meet digits (``mazda5`` -> ``mazda 5``, ``ps3`` stays when
     it is a key);
   * corrected with a looser hand than step 1 of the paper (:mod:`.spelling`): one
     edit to a *curated* word (a brand, a site) for tokens of four letters or more (``ebya``
     -> ``ebay``, ``wallmart`` -> ``walmart``), two edits to a curated or a common word for
     tokens of six letters or more with the same first letter (``travelosity`` ->
     ``travelocity``; rapidfuzz's optimal string alignment distance: insertions, deletions,
     substitutions and swaps of neighbours, as typos are), the closest then the most frequent
     candidate first;
   * segmented with inflected pieces allowed (``dirtbikes`` -> ``dirt bikes``,
     ``tvshowsondvd`` -> ``tv shows on dvd``).

   Real words are never repaired (common, WordNet, foreign, census names and their
   inflections: the speller's rule), and only rare tokens are corrected (:data:`MAX_TYPO_ZIPF`).
   Measured on the magnetic set, reducing a token to a known head or tail
   (``gocomics`` -> ``comics``) was right one time in eight: not done.
2. **A person's name** (a census first name and surname, see :mod:`.names`) with
   nothing else to go by is filed under Arts (people in the news, celebrities): the
   name still casts no vote beside topic words, as in paper 001.
   Later (after step 7), two rare words of which one is a census name in its place (a
   first name first, a surname last) and the other no word the KB knows (``xqzv
   dorfman``) are a name too.
3. **A domain**: an ``edu`` host or query is Reference (education), ``gov`` Society
   (government), ``mil`` Society.
4. **A broadcast call sign**: a query that is a US station's call sign (four letters
   starting with ``k`` or ``w``, the FCC's scheme, 47 CFR 73.3550), alone or with
   ``tv``/``fm``/``radio``/``news`` and a channel number, and not a word (the speller's
   rule, and rare: :data:`MAX_CALL_SIGN_ZIPF`), is Arts (television and radio).
5. **A newspaper's name**: two or more words ending with a masthead word (``times``,
   ``herald``, ``gazette``...; a site's ``www``/``com`` set aside) is News.
6. **A host in a non-English country**: a name followed by the country-code top-level
   domain (IANA's root zone) of a country whose language is not English (``sme sk``,
   ``www gazzetta gr``) is World, ODP's category for sites in other languages; codes
   that are English words or function words (``it``, ``no``, ``de``...) are left out.
7. **The web alone**: a query of function and web words only, one of them naming the web
   itself (``search``, ``web site``, ``online``: :data:`INTERNET_WORDS`), is Computers
   (ODP's Computers/Internet); ``who we are`` or ``find`` alone stay uncategorised.
8. **A noun of a class with a default category**: the rightmost noun (one or two words,
   plurals normalised; English puts the head last) that only its WordNet lexicographer
   file's default category reaches (``lexname_defaults`` in ``categories.yaml``:
   household and other artifacts such as ``blinds`` or ``stencils`` are Home) decides.
   These nouns are never semantic units, so they never outvote a categorised word.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from rapidfuzz import process
from rapidfuzz.distance import OSA

from knowledge.classifier.defaults import LexnameDefaults
from knowledge.classifier.model import Classification, Tokens
from knowledge.classifier.names import NameTables
from knowledge.classifier.segment import prefixes_of, segment
from knowledge.store import FLAG_CURATED, KnowledgeBase
from knowledge.text import STOPWORDS

#: Letters and digits that meet inside a token.
_ALNUM_RUNS = re.compile(r"[^\W\d_]+|\d+")
#: Only tokens rarer than this (Zipf x 100) are corrected: misspellings are rare (``wallmart`` 1.3,
#: ``amazom`` 0), whereas a word with some currency is likelier a name the KB lacks (``coolpix`` 2.0).
MAX_TYPO_ZIPF = 170
SHORT_FIX_LEN = 4  # tokens this long get one edit to a curated word
LONG_FIX_LEN = 6  # tokens at least this long get up to two edits
LONG_FIX_MIN_ZIPF = 400  # ...to a word at least this common (Zipf x 100)
SEGMENT_PIECE_ZIPF = 200  # pieces of a glued token (3+ letters) are at least this common
MAX_PIECE_LEN = 20
#: Two-letter pieces a glued token may hold (``tvguide``, ``pcworld``).
SHORT_PIECES = frozenset({"tv", "pc", "tx", "ny", "uk", "us", "la", "dc", "my", "go", "in", "on", "of", "to"})
#: Top-level domains that name a sector: category name and path label.
DOMAIN_CATEGORIES: dict[str, tuple[str, str]] = {
    "edu": ("Reference", "education"),
    "gov": ("Society", "government"),
    "mil": ("Society", "military"),
}
PERSON_CATEGORY = ("Arts", "people")
#: US broadcast call signs: K or W and three letters (47 CFR 73.3550), rare as text (Zipf x 100 below this).
CALL_SIGN = re.compile(r"[kw][a-z]{3}")
MAX_CALL_SIGN_ZIPF = 250
#: Words that may stand beside a call sign (``wcvb tv``, ``wxyz channel 7``).
STATION_WORDS = frozenset({"tv", "fm", "am", "radio", "news", "channel", "station", "com"})
CALL_SIGN_CATEGORY = ("Arts", "broadcasting")
#: Last words of newspapers' names (``<place> herald``), and the site words set aside around them.
MASTHEAD_WORDS = frozenset(
    [
        "times",
        "herald",
        "post",
        "echo",
        "tribune",
        "gazette",
        "journal",
        "chronicle",
        "courier",
        "observer",
        "inquirer",
        "sentinel",
        "examiner",
        "dispatch",
        "bulletin",
        "ledger",
        "telegraph",
        "guardian",
        "enquirer",
    ]
)
SITE_WORDS = frozenset({"www", "com", "net", "org", "online", "co", "uk"})
#: Country-code top-level domains (IANA root zone) of countries whose main language is not English, less those
#: that are English words, stop words, US state codes (``il``, ``md``, ``tn``...) or common abbreviations
#: (``hr``, ``pt``, ``lv``...).
FOREIGN_CCTLDS = frozenset(
    """
    bg br cl cn cr cz dk ec ee es fr gr gt hn hu ir jp kr kz lt lu mk mx ni nl pl py ro rs ru se si sk sv
    th tr tw ua uy uz vn
    """.split()  # noqa: SIM905 - a code list reads best as text
)
NEWSPAPER_CATEGORY = ("News", "newspapers")
#: Both words of a loose person's name (a census name and a word the KB lacks) are rarer than this (Zipf x 100).
LOOSE_NAME_MAX_ZIPF = 350
#: Web words that name the web itself: a query of stop words with one of these is about the internet.
INTERNET_WORDS = frozenset({"web", "website", "websites", "site", "sites", "page", "pages", "online", "search", "www"})
INTERNET_CATEGORY = ("Computers", "internet")
#: Lazy tables by KB hash (``deletes``, ``windows``, ``pieces``), shared by the classifiers of one KB.
_SHARED: dict[str, dict[str, object]] = {}


class Fallback:
    """The steps after a failed vote, over one KB's words (built once per classifier)."""

    def __init__(
        self, kb: KnowledgeBase, words: frozenset[str], names: NameTables, is_word: Callable[[str], bool]
    ) -> None:
        self.kb = kb
        self._is_word = is_word
        self.zipf = kb.zipf
        self.words = words
        self.names = names
        curated = {w for k, packed in kb.lemmas.items() if packed[0] & FLAG_CURATED for w in k.split()}
        self._curated_words = frozenset(w for w in curated if w.isalpha() and len(w) >= SHORT_FIX_LEN)
        #: Correction candidates by edit limit, then by first/last letter and length, and the pieces of glued
        #: tokens: built on first need (or by :meth:`prepare`), shared by the classifiers of one KB.
        self._tables = _SHARED.setdefault(kb.sha256, {})
        self._fixes: dict[str, tuple[str, ...]] = {}  # repaired tokens, at most ``cache_size`` (cleared when full)
        self.cache_size = 100_000
        self._index = {c: i for i, c in enumerate(kb.categories)}
        #: Step 7, over the KB's lexname-default nouns (its table shared by the classifiers of one KB).
        self.lexname_default = LexnameDefaults(kb, self._tables).find

    # --- 1. token repair ----------------------------------------------------------------

    def repair(self, raw: list[str]) -> list[str] | None:
        """The typed tokens with each unknown one repaired; None when nothing changed."""
        out: list[str] = []
        changed = False
        for t in raw:
            fixed = self._repair_token(t)
            changed = changed or fixed != (t,)
            out.extend(fixed)
        return out if changed else None

    def _repair_token(self, token: str) -> tuple[str, ...]:
        if token in self.words or token in STOPWORDS or len(token) < SHORT_FIX_LEN - 1 or self._is_word(token):
            return (token,)
        fixed = self._fixes.get(token)
        if fixed is None:
            fixed = self._repair_new(token)
            if len(self._fixes) >= self.cache_size:
                self._fixes.clear()
            self._fixes[token] = fixed
        return fixed

    def _repair_new(self, token: str) -> tuple[str, ...]:
        runs = _ALNUM_RUNS.findall(token)
        if len(runs) > 1:  # letters and digits: repair the letter runs alone
            return tuple(p for r in runs for p in (self._repair_token(r) if r.isalpha() else (r,)))
        if not token.isalpha():
            return (token,)
        if self.zipf.get(token, 0) < MAX_TYPO_ZIPF:  # a typo is rare; a rare brand is not one
            got = self._correct(token)
            if got is not None:
                return got
        return self._segment(token) or (token,)

    def _correct(self, token: str) -> tuple[str, ...] | None:
        """One edit to a curated word (4+ letters), else two edits to a curated or common word (6+ letters)."""
        n = len(token)
        if n < SHORT_FIX_LEN:
            return None
        zipf = self.zipf
        index = self._deletes()
        near = {
            w
            for k in {token} | {token[:i] + token[i + 1 :] for i in range(n)}
            for w in index.get(k, ())
            if OSA.distance(token, w, score_cutoff=1) == 1  # one edit
        }
        if near:
            return (min(near, key=lambda w: (-zipf.get(w, 0), w)),)
        if n < LONG_FIX_LEN:
            return None
        pool = self._windows().get((token[0], n), ())  # same first letter, length within two
        if not pool:
            return None
        found = process.extract(token, pool, scorer=OSA.distance, score_cutoff=2, limit=None)
        if not found:
            return None
        best = min(found, key=lambda m: (m[1], -zipf.get(m[0], 0), m[0]))
        return (best[0],)

    def _deletes(self) -> dict[str, tuple[str, ...]]:
        """Symmetric-delete index (distance 1) of the curated words."""
        got = self._tables.get("deletes")
        if got is None:
            index: dict[str, list[str]] = {}
            for w in sorted(self._curated_words):
                for d in {w} | {w[:i] + w[i + 1 :] for i in range(len(w))}:
                    index.setdefault(d, []).append(w)
            got = self._tables["deletes"] = {k: tuple(v) for k, v in index.items()}
        assert isinstance(got, dict)
        return got

    def _windows(self) -> dict[tuple[str, int], tuple[str, ...]]:
        """Words two edits may reach from a token, by its (first letter, length): same first letter, length +-2."""
        got = self._tables.get("windows")
        if got is None:
            by_len: dict[tuple[str, int], list[str]] = {}
            for w in sorted(self._long()):
                by_len.setdefault((w[0], len(w)), []).append(w)
            index: dict[tuple[str, int], tuple[str, ...]] = {}
            for first, length in {(f, n + d) for f, n in by_len for d in range(-2, 3)}:
                words = [w for d in range(-2, 3) for w in by_len.get((first, length + d), ())]
                if words and length >= LONG_FIX_LEN:
                    index[(first, length)] = tuple(words)
            got = self._tables["windows"] = index
        assert isinstance(got, dict)
        return got

    def _long(self) -> frozenset[str]:
        zipf = self.zipf
        return frozenset(
            w
            for w in self.words
            if len(w) >= LONG_FIX_LEN - 2
            and w.isalpha()
            and (zipf.get(w, 0) >= LONG_FIX_MIN_ZIPF or w in self._curated_words)
        )

    def _piece_set(self) -> frozenset[str]:
        got = self._tables.get("pieces")
        if got is None:
            zipf = self.zipf
            base = {w for w in self.words if len(w) >= 3 and w.isalpha() and zipf.get(w, 0) >= SEGMENT_PIECE_ZIPF}
            base |= {w for w in STOPWORDS if len(w) >= 2}
            got = self._tables["pieces"] = frozenset(base | {w + "s" for w in base if len(w) >= 3} | SHORT_PIECES)
        assert isinstance(got, frozenset)
        return got

    def _piece_prefixes(self) -> frozenset[str]:
        got = self._tables.get("prefixes")
        if got is None:
            got = self._tables["prefixes"] = prefixes_of(self._piece_set())
        assert isinstance(got, frozenset)
        return got

    def prepare(self) -> None:
        """Build the lazy tables now (they are otherwise built on first need)."""
        self._deletes()
        self._windows()
        self.lexname_default([])
        self._piece_prefixes()

    def _segment(self, token: str) -> tuple[str, ...] | None:
        """Fewest known pieces (plurals and a few two-letter words allowed), then the most frequent."""
        if len(token) < 6:
            return None
        out = segment(token, self._piece_set(), self._piece_prefixes(), self.zipf, MAX_PIECE_LEN)
        if out is None or len(out) < 2:
            return None
        if all(p in STOPWORDS or p in SHORT_PIECES for p in out):
            return None
        return tuple(out)

    # --- 2. and 3. ----------------------------------------------------------------------

    def person(self, raw: list[str]) -> Classification | None:
        """A person's name with nothing else to go by: Arts (people in the news)."""
        words = self.names.name_words(raw)
        if not words:
            return None
        cat, label = PERSON_CATEGORY
        if cat not in self._index:
            return None
        first = next(t for t in raw if t in words)
        return Classification(cat, (cat, label), first, 0.5)

    def loose_person(self, raw: list[str]) -> Classification | None:
        """Two rare words, a census name in its place (first name first, surname last) and a word the KB lacks:
        Arts (people), as :meth:`person`."""
        if len(raw) != 2 or not (raw[0].isalpha() and raw[1].isalpha()):
            return None
        a, b = raw
        zipf, words = self.zipf, self.words
        if zipf.get(a, 0) >= LOOSE_NAME_MAX_ZIPF or zipf.get(b, 0) >= LOOSE_NAME_MAX_ZIPF:
            return None
        if a in STOPWORDS or b in STOPWORDS:
            return None
        if (a in self.names.first and b not in words) or (b in self.names.last and a not in words):
            cat, label = PERSON_CATEGORY
            return Classification(cat, (cat, label), a, 0.5) if cat in self._index else None
        return None

    def domain(self, raw: list[str]) -> Classification | None:
        """A query or host naming a sector's top-level domain (``edu``, ``gov``, ``mil``)."""
        for t in reversed(raw):
            hit = DOMAIN_CATEGORIES.get(t)
            if hit is not None and hit[0] in self._index:
                cat, label = hit
                return Classification(cat, (cat, label), t, 0.5)
        return None

    def call_sign(self, raw: list[str]) -> Classification | None:
        """A US broadcast station's call sign, alone or with station words and a number: Arts (broadcasting)."""
        signs = [t for t in raw if CALL_SIGN.fullmatch(t)]
        if len(signs) != 1 or CALL_SIGN_CATEGORY[0] not in self._index:
            return None
        sign = signs[0]
        if self.zipf.get(sign, 0) >= MAX_CALL_SIGN_ZIPF or self._is_word(sign) or sign in self.words:
            return None
        if not all(t == sign or t in STATION_WORDS or t.isdigit() for t in raw):
            return None
        cat, label = CALL_SIGN_CATEGORY
        return Classification(cat, (cat, label), sign, 0.5)

    def newspaper(self, raw: list[str]) -> Classification | None:
        """Two or more words ending with a masthead word (``deccan herald``): News (newspapers)."""
        words = [t for t in raw if t not in SITE_WORDS]
        if len(words) < 2 or words[-1] not in MASTHEAD_WORDS or NEWSPAPER_CATEGORY[0] not in self._index:
            return None
        cat, label = NEWSPAPER_CATEGORY
        return Classification(cat, (cat, label), " ".join(words), 0.5)

    def foreign_host(self, raw: list[str]) -> Classification | None:
        """A name then a non-English country's top-level domain (``sme sk``): World, the code as its path."""
        if len(raw) < 2 or raw[-1] not in FOREIGN_CCTLDS or self.kb.foreign_category < 0:
            return None
        name = [t for t in raw[:-1] if t not in SITE_WORDS]
        if not name or any(t.isdigit() for t in name):
            return None
        cat = self.kb.categories[self.kb.foreign_category]
        return Classification(cat, (cat, raw[-1]), " ".join(name), 0.5)

    def web_alone(self, raw: list[str]) -> Classification | None:
        """Function and web words only, one naming the web (``web search``): Computers (internet)."""
        if INTERNET_WORDS.isdisjoint(raw) or not STOPWORDS.issuperset(raw) or INTERNET_CATEGORY[0] not in self._index:
            return None
        cat, label = INTERNET_CATEGORY
        return Classification(cat, (cat, label), next(t for t in reversed(raw) if t in INTERNET_WORDS), 0.5)


def classify_with_fallback(
    tokens: Tokens,
    fallback: Fallback,
    retry: Callable[[Tokens], Classification | None],
) -> Classification | None:
    """The fallback steps in order for a query whose own units decided nothing."""
    raw = tokens.raw
    person = fallback.person(raw)
    if person is not None:
        return person
    repaired = fallback.repair(raw)
    if repaired is not None:
        got = retry(Tokens(repaired, None, None, raw))
        if got is not None:
            return got
    return (
        fallback.domain(raw)
        or fallback.call_sign(raw)
        or fallback.newspaper(raw)
        or fallback.foreign_host(raw)
        or fallback.web_alone(raw)
        or fallback.loose_person(raw)
        or fallback.lexname_default(repaired or tokens.tokens)
    )
