"""Semantic units (paper 001 Algorithm 1, step 2): KB lemmas found right to left by progressive left-trimming.

The longest span ending at the current token that is a KB lemma (WordNet noun,
multiword included, plurals normalised; a curated term) is a unit; adjectives
just before it join it (``european soccer``). Stop words never start or end a
unit, except in a curated term (``t mobile``, ``realtor com``) or, for web words,
a WordNet phrase (``search engine``, ``home page``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

from knowledge.classifier.model import Entry, Tokens, Unit
from knowledge.store import FLAG_CURATED, KnowledgeBase
from knowledge.text import NOUN_SUFFIXES, STOPWORDS, WEB_WORDS

MAX_MODIFIERS = 2  # adjectives that may join a unit


def inflection_bases(word: str, noun_exc: dict[str, str], last_words: frozenset[str]) -> tuple[str, ...]:
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


def combined_zipf(zipfs: list[float]) -> float:
    """wordfreq's frequency of a phrase: 1/f = sum(1/f_i), in Zipf units."""
    if len(zipfs) == 1:
        return zipfs[0]
    return -math.log10(sum(10.0 ** (-z) for z in zipfs))


@dataclass(frozen=True, slots=True)
class UnitTables:
    """Key sets derived from a KB once per process, and its entries unpacked on first use."""

    multi_first: frozenset[str]  # first words of multiword keys: a longer span must start with one
    multi_first2: frozenset[str]  # first two words of keys of 3+ words
    last_words: frozenset[str]  # last words of keys: the only possible inflection bases
    infl: dict[str, tuple[str, ...]]  # inflection bases of known words (others are derived per use)
    curated_keys: frozenset[str]  # keys of curated terms
    curated_stop_first: frozenset[str]  # stop words that start a curated term (``t mobile``)
    curated_stop_last: frozenset[str]  # stop words that end a multiword curated term (``cars com``)
    entries: dict[str, Entry]  # unpacked lemma entries, filled on first use
    words: dict[str, Word]  # what the unit search knows of each KB or wordfreq word, filled on first use

    @classmethod
    def build(cls, kb: KnowledgeBase) -> UnitTables:
        """Derive the tables of ``kb``."""
        lemmas, exc = kb.lemmas, kb.noun_exc
        last = frozenset(k.rpartition(" ")[2] for k in lemmas)
        maybe_plural = (w for w in kb.zipf if w.endswith(("s", "men")) or w in exc)
        curated = frozenset(k for k, packed in lemmas.items() if packed[0] & FLAG_CURATED)
        return cls(
            multi_first=frozenset(k.split(" ", 1)[0] for k in lemmas if " " in k),
            multi_first2=frozenset(" ".join(k.split(" ", 2)[:2]) for k in lemmas if k.count(" ") >= 2),
            last_words=last,
            infl={w: b for w in maybe_plural if (b := inflection_bases(w, exc, last))},
            curated_keys=curated,
            curated_stop_first=frozenset(k.split(" ", 1)[0] for k in curated if k.split(" ", 1)[0] in STOPWORDS),
            curated_stop_last=frozenset(
                k.rpartition(" ")[2] for k in curated if " " in k and k.rpartition(" ")[2] in STOPWORDS
            ),
            entries={},
            words={},
        )


@dataclass(frozen=True, slots=True)
class Word:
    """What the unit search needs to know of one token, found with one dict lookup (:meth:`UnitFinder.word`)."""

    zipf: float  # Zipf of the token (0 when unknown)
    #: Never ends a unit: no KB key ends with it or its inflection bases, or a function word (not a web
    #: word) no curated term ends with.
    skip_end: bool
    stop: bool  # a stop word: a span ending with it must be a curated term (unless a web word)
    #: May start a multiword span: 0 no; 1 yes; 2 only a curated term (a function word such as ``t mobile``).
    starts: int
    bases: tuple[str, ...]  # noun-inflection bases that end some KB key
    key: str | None  # the lemma the token alone matches (itself, else its first base that is one)
    modifier: bool  # an adjective that may join the unit after it (``european soccer``)
    entry: Entry | None  # the KB entry of ``key``


#: A token that can play no part in a unit.
_NOTHING = Word(0.0, True, False, 0, (), None, False, None)


class UnitFinder:
    """Find the semantic units of tokenised queries in one KB."""

    def __init__(self, kb: KnowledgeBase, tables: UnitTables) -> None:
        self.lemmas = kb.lemmas
        self.zipf = kb.zipf
        self.modifiers = kb.modifiers
        self.noun_exc = kb.noun_exc
        self.max_ngram = kb.max_ngram
        self.multi_first = tables.multi_first
        self.multi_first2 = tables.multi_first2
        self._last_words = tables.last_words
        self._infl = tables.infl
        self._curated = tables.curated_keys
        self._curated_stop_first = tables.curated_stop_first
        self._curated_stop_last = tables.curated_stop_last
        self._entries = tables.entries
        self._words = tables.words

    def entry(self, key: str) -> Entry:
        """The unpacked KB entry of lemma ``key``."""
        entry = self._entries.get(key)
        if entry is None:
            entry = self._entries[key] = Entry.unpack(self.lemmas[key])
        return entry

    def _bases(self, last: str) -> tuple[str, ...]:
        """Noun-inflection bases of a span's last word that end some KB key (noun.exc, then morphy rules)."""
        found = self._infl.get(last)
        if found is not None:
            return found
        if last in self.zipf:
            return ()  # a known word without inflection bases
        if not (last.endswith("s") or last.endswith("men")) and last not in self.noun_exc:
            return ()
        return inflection_bases(last, self.noun_exc, self._last_words)

    def word(self, token: str) -> Word:
        """The :class:`Word` of ``token``: from the shared table (KB words only: bounded by the KB), else derived."""
        w = self._words.get(token)
        if w is not None:
            return w
        lemmas = self.lemmas
        known = token in self.zipf
        bases = self._bases(token)
        key = token if token in lemmas else next((b for b in bases if b in lemmas), None)
        stop = token in STOPWORDS
        web = token in WEB_WORDS
        if token in self.multi_first and not (stop and not web and token not in self._curated_stop_first):
            starts = 2 if stop and not web else 1
        else:
            starts = 0
        modifier = token in self.modifiers and not stop
        ends = bool(bases) or token in self._last_words
        if not (stop or starts or ends or modifier):
            w = _NOTHING
        else:
            skip_end = not ends or (stop and token not in self._curated_stop_last and not web)
            entry = None if key is None else self.entry(key)
            w = Word(self.zipf.get(token, 0) / 100.0, skip_end, stop, starts, bases, key, modifier, entry)
        if known or starts or modifier or token in self._last_words:  # KB and wordfreq words: bounded by the KB
            self._words[token] = w
        return w

    def units(self, tokens: Tokens, phrases_over_corrections: bool = True) -> list[Unit]:
        """Semantic units, right to left; with ``phrases_over_corrections`` false no span holds a corrected token."""
        toks, surf, changed = tokens.tokens, tokens.surface, tokens.changed
        out: list[Unit] = []
        end = len(toks)
        table, word, zipf, lemmas, curated = self._words, self.word, self.zipf, self.lemmas, self._curated
        entries, multi2, max_n = self._entries, self.multi_first2, self.max_ngram
        got = list(map(table.get, toks))  # one C-level lookup per token
        info = cast("list[Word]", got) if None not in got else [x or word(t) for x, t in zip(got, toks)]
        while end > 0:
            last = toks[end - 1]
            w = info[end - 1]
            # Only a curated term may end with a function word (``realtor com``), a WordNet phrase with a
            # web word (``home page``).
            if w.skip_end:
                end -= 1
                continue
            stop_end = w.stop
            # The unit's core: the lemma ``key`` matched by the span toks[start:end] (None: not found yet).
            key: str | None = None
            start = end - 1
            cands = w.bases
            lo = end - max_n if end > max_n else 0
            for span_start in range(lo, end - 1):  # longest span first: left-trimming
                starts = info[span_start].starts
                if not starts:
                    continue
                curated_only = starts == 2 or (stop_end and last not in WEB_WORDS)
                if end - span_start > 2 and toks[span_start] + " " + toks[span_start + 1] not in multi2:
                    continue  # no multiword key starts with these two words
                if not phrases_over_corrections and changed is not None and any(changed[span_start:end]):
                    continue
                span = " ".join(toks[span_start:end])
                if span in lemmas and not (curated_only and span not in curated):
                    key, start = span, span_start
                    break
                if cands:
                    prefix = span[: len(span) - len(last)]
                    for b in cands:
                        based = prefix + b
                        if based in lemmas and not (curated_only and based not in curated):
                            key, start = based, span_start
                            break
                    if key is not None:
                        break
            if key is None:
                key, entry = w.key, w.entry
                if key is None or entry is None or stop_end:
                    end -= 1
                    continue
            else:
                entry = entries.get(key)
                if entry is None:
                    entry = entries[key] = Entry.unpack(lemmas[key])
            m = start
            while m > 0 and start - m < MAX_MODIFIERS and info[m - 1].modifier:
                m -= 1
            if end - m == 1:
                z = w.zipf
                out.append(Unit(last, key, z, z if surf is None else surf[m], entry, m, start, end))
            else:
                words = toks[m:end]
                z = combined_zipf([zipf.get(t, 0) / 100.0 for t in words])
                surface = z if surf is None else combined_zipf(surf[m:end])
                out.append(Unit(" ".join(words), key, z, surface, entry, m, start, end))
            end = m
        return out
