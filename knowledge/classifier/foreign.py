"""Queries in another language or script go to the KB's foreign category (ODP's World).

A query made mostly of words common in another language and rare in English is
foreign; a lone such word must be far commoner there than in English
(``trabajo``, not the brand-like ``sentra``). A query written mostly in a
non-Latin script (Cyrillic, Greek, Han...) is foreign too.
"""

from __future__ import annotations

import unicodedata
from typing import NamedTuple

from knowledge.classifier.model import Classification, Unit
from knowledge.store import KnowledgeBase
from knowledge.text import STOPWORDS

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


class ForeignWord(NamedTuple):
    """A typed word that belongs to another language."""

    word: str
    lang: str  # language code (``es``, ``fr``...)


def foreign_language(
    kb: KnowledgeBase, foreign_words: frozenset[str], raw: list[str], units: list[Unit]
) -> Classification | None:
    """ODP World: most words common in another language and rare in English, or another script.

    ``foreign_words`` = the keys of ``kb.foreign``; ``raw`` = the typed tokens.
    """
    if kb.foreign_category < 0:
        return None
    if foreign_words.isdisjoint(raw):
        return foreign_script(kb, raw)
    foreign = kb.foreign
    words = [t for t in raw if t.isalpha() and t not in STOPWORDS]
    hits = [ForeignWord(t, foreign[t]) for t in words if t in foreign]
    if hits:  # function words of those languages count once the query has a foreign content word
        hits += [ForeignWord(t, FUNCTION_WORDS[t]) for t in words if t in FUNCTION_WORDS and t not in foreign]
    if not hits or len(hits) * 2 < len(words) or len(hits) <= sum(len(u.text.split()) for u in units) - 1:
        return None
    if len(hits) == 1 and hits[0].word in kb.foreign_weak:
        return None  # one word, not much commoner there than in English: likelier a brand or a name
    langs: dict[str, int] = {}
    for hit in hits:
        langs[hit.lang] = langs.get(hit.lang, 0) + 1
    lang = max(sorted(langs), key=langs.__getitem__)
    name = kb.categories[kb.foreign_category]
    return Classification(name, (name, lang), hits[0].word, round(len(hits) / len(words), 3))


def foreign_script(kb: KnowledgeBase, raw: list[str]) -> Classification | None:
    """ODP World for queries written mostly in a non-Latin script (numbers aside); the path's second level names
    the script."""
    if "".join(raw).isascii():
        return None
    scripts: dict[str, int] = {}
    for t in raw:
        c = t[0]
        if c.isalpha() and ord(c) > LATIN_END:
            script = unicodedata.name(c, "OTHER").split(" ", 1)[0].lower()
            scripts[script] = scripts.get(script, 0) + 1
    n = sum(scripts.values())
    if n * 2 <= sum(1 for t in raw if not t.isdigit()):  # numbers (a year, a count) belong to no script
        return None
    script = max(sorted(scripts), key=scripts.__getitem__)
    name = kb.categories[kb.foreign_category]
    first = next(t for t in raw if t[0].isalpha() and ord(t[0]) > LATIN_END)
    return Classification(name, (name, script), first, round(n / len(raw), 3))
