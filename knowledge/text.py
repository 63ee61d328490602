"""Query text normalisation shared by the KB builder and the classifier.

One tokeniser for both sides, so WordNet lemmas, curated terms and queries meet
in the same form: case-folded runs of letters and digits, everything else a
separator (``www.myspace.com`` -> ``www myspace com``).
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"[^\W_]+")

#: Function words and web noise: never a semantic unit, never the start or end of one.
STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all am an and any are as at be been before being below between both but
    by can could did do does doing down during each few for from further had has have having he her here hers
    herself him himself his how i if in into is it its itself just me more most my myself no nor not now of
    off on once only or other our ours ourselves out over own same she should so some such than that the their
    theirs them themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves s t d ll m re
    ve don doesn didn isn aren wasn weren won wouldn shouldn couldn www http https com net org edu gov html
    htm php asp co us info biz ws get got find search look looking want need show tell give make go going site
    sites website websites web page pages online free vs via per etc
    """.split()  # noqa: SIM905 - a word list reads best as text
)

#: The stop words that are content words on the web rather than function words: a WordNet phrase may
#: start or end with one (``search engine``, ``home page``), whereas ``the who`` needs a curated term.
WEB_WORDS: frozenset[str] = frozenset(
    """
    get got find search look looking want need show tell give make go going site sites website websites web
    page pages online free
    """.split()  # noqa: SIM905 - a word list reads best as text
)

#: WordNet's regular noun inflection rules (morphy), tried on the last word of a span.
NOUN_SUFFIXES: tuple[tuple[str, str], ...] = (
    ("ies", "y"),
    ("ses", "s"),
    ("xes", "x"),
    ("zes", "z"),
    ("ches", "ch"),
    ("shes", "sh"),
    ("men", "man"),
    ("s", ""),
)


def tokenize(text: str) -> list[str]:
    """Case-folded word tokens of ``text`` (letters and digits; all else separates)."""
    if text.isascii():  # most queries: ASCII words and spaces, split without the regex
        low = text.lower()
        if low.replace(" ", "").isalnum():
            return low.split()
    return _TOKEN.findall(text.casefold())


def key_of(text: str) -> str:
    """The lookup key of a lemma or term: its tokens joined by one space."""
    return " ".join(tokenize(text.replace("_", " ")))
