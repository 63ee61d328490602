"""Compile WordNet + wordfreq + ``categories.yaml`` into one KB file.

For every WordNet noun synset the builder finds the nearest category anchor up
its hypernym / instance-hypernym graph; the chain from the anchor down to the
synset is the L2..L5 path. A synset no anchor reaches falls back to its own
topic domain (not inherited by its hyponyms; used only for lemmas without an
anchored sense), then to its lexicographer file (:mod:`.anchors`). Each noun
lemma (multiword ones included) then gets a category distribution from its
senses, weighted by SemCor sense counts (``cntlist.rev``) and sense rank.
Adjectives reach nouns through pertainyms (``medical`` -> medicine). Curated
terms from ``categories.yaml`` override WordNet. The other WordNet words (any
part of speech, no category) are kept as ``known`` words, which the classifier
never spell-corrects. Everything is emitted in sorted order, so equal sources
give equal bytes.
"""

from __future__ import annotations

import math
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path
from typing import Any

from knowledge.anchors import (
    DEFAULT_DISTANCE,
    DOMAIN_FALLBACK,
    LEXNAME_DISTANCE,
    Resolver,
    is_instance_of,
    semcor_counts,
    sense_weight,
)
from knowledge.categories import Taxonomy, load_taxonomy
from knowledge.concepts import compile_concepts
from knowledge.paths import BUILDER_VERSION
from knowledge.store import FLAG_ADJ, FLAG_CURATED, FLAG_IDENT, FLAG_PLACE, PATH_SEP, encode, pack_table, write_atomic
from knowledge.text import STOPWORDS, key_of
from knowledge.wordnet import WordNetSource, locate, open_wordnet

MAX_LEVELS = 5
MAX_NGRAM = 5
TOP_CATEGORIES = 3
ZIPF_MIN = 1.5  # words rarer than this are not stored (absent = rarest)
FOREIGN_MIN_ZIPF = 3.3  # a word this common in another language...
FOREIGN_MAX_EN_ZIPF = 2.3  # ...and this rare in English marks a non-English query
#: ...but alone only when it is at least this much (Zipf) more common there than in English: ``trabajo``
#: (5.8 vs 2.2) is Spanish, ``sentra`` (3.97 in Indonesian vs 2.2) is likelier a brand.
FOREIGN_ALONE_MARGIN = 2.4
#: Instance hypernyms that make a lemma a HIPAA-style identifier (a person's name, a place below
#: state level). Such units are the main unit only when nothing else is left (paper 001).
IDENT_ANCHORS = ("city.n.01", "town.n.01", "village.n.02", "municipality.n.01", "port.n.01", "person.n.01")
#: Instance hypernyms of other named places (states, countries, regions): outvoted by topic words.
PLACE_ANCHORS = ("state.n.01", "country.n.02", "state.n.04", "region.n.03", "geographical_area.n.01")


class KBBuildError(Exception):
    """The sources cannot be compiled (an unknown anchor, no WordNet...)."""


@dataclass(frozen=True)
class BuildReport:
    path: Path
    seconds: float
    size: int
    sha256: str
    counts: dict[str, int]


class _Compiler:
    def __init__(self, taxonomy: Taxonomy, source: WordNetSource) -> None:
        self.tax = taxonomy
        self.source = source
        self.paths: dict[tuple[str, ...], int] = {}
        #: Senses of lemmas that only a lexname default reaches (filled by :meth:`_nouns`).
        self.default_dist: dict[str, list[tuple[float, int, tuple[str, ...]]]] = {}

    def path_id(self, path: tuple[str, ...]) -> int:
        path = path[:MAX_LEVELS]
        if path not in self.paths:
            self.paths[path] = len(self.paths)
        return self.paths[path]

    def run(self) -> dict[str, Any]:
        """The KB payload: every table of the file, in sorted order."""
        tax = self.tax
        counts = semcor_counts(self.source.folder)
        with open_wordnet(self.source) as wn:
            resolver = self._resolver(wn)
            offsets = wn._lemma_pos_offset_map  # lemma -> pos -> [offsets in sense order]
            noun_dist, noun_weight, ident = self._nouns(wn, offsets, counts, resolver)
            adj_dist, modifiers = self._adjectives(wn, offsets, counts, resolver, noun_weight)
            noun_exc = self._exceptions(self.source.folder / "noun.exc")
            known = {w for name in offsets for w in key_of(name).split() if w.isalpha()}

            def category_of(s: Any) -> int:  # the taxonomy dp_replace samples from: no lexname defaults
                r = resolver.resolve(s)
                return -1 if r is None or r[0] >= DEFAULT_DISTANCE else r[1]

            concepts = compile_concepts(wn, category_of)
        lemmas, curated = self._lemmas(noun_dist, noun_weight, ident, adj_dist)
        defaults = self._defaults(lemmas, noun_weight)
        zipf, foreign, foreign_weak = self._frequencies(lemmas, modifiers)
        noun_exc = {f: b for f, b in sorted(noun_exc.items()) if b in lemmas and f not in lemmas}
        lemma_words = {w for k in lemmas for w in k.split()} | modifiers
        known -= lemma_words  # WordNet words with no category: real words, never "corrected"
        paths = [PATH_SEP.join(p) for p, _ in sorted(self.paths.items(), key=lambda kv: kv[1])]
        meta = {
            "builder": BUILDER_VERSION,
            "sources": {
                "wordnet": {"origin": self.source.origin, "sha256": self.source.sha256},
                "wordfreq": version("wordfreq"),
                "categories": {"file": Path(tax.file).name, "sha256": tax.sha256},
            },
            "counts": {
                "categories": len(tax.names),
                "lemmas": len(lemmas),
                "curated_terms": curated,
                "paths": len(paths),
                "frequencies": len(zipf),
                "modifiers": len(modifiers),
                "known_words": len(known),
                "foreign_words": len(foreign),
                "concepts": len(concepts["names"].split("\n")),
                "concept_keys": len(concepts["keys"].split("\n")),
                "multi_parent_concepts": concepts["multi_parent"],
                "lexname_defaults": len(defaults),
            },
        }
        codes = list(tax.foreign_languages)
        fcat = tax.names.index(tax.foreign_category) if tax.foreign_category else -1
        return {
            "meta": meta,
            "categories": list(tax.names),
            "paths": paths,
            "lemmas": lemmas,
            "defaults": defaults,
            "zipf": pack_table(zipf),
            "modifiers": "\n".join(sorted(modifiers)),
            "known": "\n".join(sorted(known)),
            "noun_exc": noun_exc,
            "foreign": pack_table({w: codes.index(lang) for w, lang in foreign.items()}),
            "foreign_weak": "\n".join(sorted(foreign_weak)),
            "foreign_codes": list(codes),
            "foreign_category": fcat,
            "max_ngram": MAX_NGRAM,
            "concepts": concepts,
        }

    def _resolver(self, wn: Any) -> Resolver:
        """The anchor resolver of the taxonomy's categories; every anchor must name a WordNet synset."""
        tax = self.tax
        anchors = {a: i for i, c in enumerate(tax.categories) for a in c.anchors}
        lexmap = {lx: i for i, c in enumerate(tax.categories) for lx in c.lexnames}
        defaults = {lx: i for i, c in enumerate(tax.categories) for lx in c.lexname_defaults}
        missing = []
        for a in sorted(anchors):
            try:
                wn.synset(a)
            except Exception:  # nltk raises WordNetError / ValueError for unknown names
                missing.append(a)
        if missing:
            raise KBBuildError(f"{tax.file}: anchors not in WordNet: {', '.join(missing)}")
        return Resolver(anchors, lexmap, defaults)

    def _nouns(
        self, wn: Any, offsets: dict[str, dict[str, list[int]]], counts: dict[str, int], resolver: Resolver
    ) -> tuple[dict[str, list[tuple[float, int, tuple[str, ...]]]], dict[str, float], dict[str, int]]:
        """Each noun lemma key's weighted senses with a category (those of its domain fallback only when no
        other sense has one, those of a lexname default only when no sense has either), its total sense weight,
        and its identifier flags (from its first sense)."""
        names = self.tax.names
        ident_names = set(IDENT_ANCHORS)
        place_names = set(PLACE_ANCHORS)
        noun_dist: dict[str, list[tuple[float, int, tuple[str, ...]]]] = {}
        noun_weight: dict[str, float] = {}
        ident: dict[str, int] = {}
        default_dist = self.default_dist
        for lemma_name in sorted(offsets):
            noun_offs = offsets[lemma_name].get("n")
            if not noun_offs:
                continue
            key = key_of(lemma_name)
            if not key or len(key.split()) > MAX_NGRAM:
                continue
            senses = []
            total = 0.0
            by_domain: list[tuple[float, int, tuple[str, ...]]] = []  # used when no other sense has a category
            by_default: list[tuple[float, int, tuple[str, ...]]] = []  # ...and when no sense has a domain either
            for rank, off in enumerate(noun_offs):
                s = wn.synset_from_pos_and_offset("n", off)
                cnt = 0
                for lm in s.lemmas():
                    if lm.name().lower() == lemma_name:
                        cnt = counts.get(lm.key(), 0)
                        break
                w = sense_weight(cnt, rank)
                total += w
                r = resolver.resolve(s)
                if r is not None:
                    scale = 0.5 if r[0] >= DOMAIN_FALLBACK else 1.0
                    if DOMAIN_FALLBACK <= r[0] < LEXNAME_DISTANCE:
                        by_domain.append((w * scale, r[1], (names[r[1]], *r[2])))
                    elif r[0] >= DEFAULT_DISTANCE:
                        by_default.append((w * scale, r[1], (names[r[1]], *r[2])))
                    else:
                        senses.append((w * scale, r[1], (names[r[1]], *r[2])))
                if rank == 0:
                    ident[key] = (FLAG_IDENT if is_instance_of(s, ident_names) else 0) | (
                        FLAG_PLACE if is_instance_of(s, place_names) else 0
                    )
            noun_dist.setdefault(key, []).extend(senses or by_domain)
            if not senses and not by_domain and by_default:
                default_dist.setdefault(key, []).extend(by_default)
            noun_weight[key] = noun_weight.get(key, 0.0) + total
        return noun_dist, noun_weight, ident

    def _lemmas(
        self,
        noun_dist: dict[str, list[tuple[float, int, tuple[str, ...]]]],
        noun_weight: dict[str, float],
        ident: dict[str, int],
        adj_dist: dict[str, tuple[list[tuple[float, int, tuple[str, ...]]], float]],
    ) -> tuple[dict[str, list[int]], int]:
        """The lemma table (key -> flags, then category, permille share and path id per top category), the
        curated terms overriding WordNet; and the number of curated terms."""
        lemmas: dict[str, list[int]] = {}
        for key in sorted(set(noun_dist) | set(adj_dist)):
            if key in noun_dist:
                flags = ident.get(key, 0)
                entry = self._entry(noun_dist[key], noun_weight[key])
            else:
                flags = FLAG_ADJ
                entry = self._entry(adj_dist[key][0], adj_dist[key][1])
            if entry:
                lemmas[key] = [flags, *entry]
        curated = 0
        for ci, c in enumerate(self.tax.categories):
            for label, terms in c.terms:
                for t in terms:
                    k = key_of(t)
                    lemmas[k] = [FLAG_CURATED, ci, 1000, self.path_id((c.name, label.lower(), k))]
                    curated += 1
        return dict(sorted(lemmas.items())), curated

    def _defaults(self, lemmas: dict[str, list[int]], noun_weight: dict[str, float]) -> dict[str, list[int]]:
        """Lemmas that only a lexname default categorises (no lemma entry, no curated term): key -> entry as in
        the lemma table (flags 0); the classifier's last fallback step reads them."""
        out: dict[str, list[int]] = {}
        for key in sorted(self.default_dist):
            if key in lemmas:
                continue
            entry = self._entry(self.default_dist[key], noun_weight[key])
            if entry:
                out[key] = [0, *entry]
        return out

    def _entry(self, senses: list[tuple[float, int, tuple[str, ...]]], total: float) -> list[int]:
        """Top categories with their permille share and the heaviest sense's path."""
        if not senses or total <= 0:
            return []
        by_cat: dict[int, float] = defaultdict(float)
        best_path: dict[int, tuple[float, tuple[str, ...]]] = {}
        for w, cat, path in senses:
            by_cat[cat] += w
            if cat not in best_path or w > best_path[cat][0]:
                best_path[cat] = (w, path)
        ranked = sorted(by_cat.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_CATEGORIES]
        out: list[int] = []
        for cat, w in ranked:
            share = min(1000, max(1, round(1000 * w / total)))
            out += [cat, share, self.path_id(best_path[cat][1])]
        return out

    def _adjectives(
        self,
        wn: Any,
        offsets: dict[str, dict[str, list[int]]],
        counts: dict[str, int],
        resolver: Resolver,
        noun_weight: dict[str, float],
    ) -> tuple[dict[str, tuple[list[tuple[float, int, tuple[str, ...]]], float]], set[str]]:
        names = self.tax.names
        dist: dict[str, tuple[list[tuple[float, int, tuple[str, ...]]], float]] = {}
        modifiers: set[str] = set()
        for lemma_name in sorted(offsets):
            adj_offs = offsets[lemma_name].get("a", [])
            if not adj_offs:
                continue
            key = key_of(lemma_name)
            if not key:
                continue
            adj_total = 0.0
            senses: list[tuple[float, int, tuple[str, ...]]] = []
            for rank, off in enumerate(adj_offs):
                s = wn.synset_from_pos_and_offset("a", off)
                cnt = 0
                for lm in s.lemmas():
                    if lm.name().lower() != lemma_name:
                        continue
                    cnt = counts.get(lm.key(), 0)
                    w = sense_weight(cnt, rank)
                    for rel in lm.pertainyms() + lm.derivationally_related_forms():
                        rs = rel.synset()
                        if rs.pos() != "n":
                            continue
                        r = resolver.resolve(rs)
                        if r is not None and r[0] < LEXNAME_DISTANCE:
                            senses.append((w, r[1], (names[r[1]], *r[2])))
                            break
                    break
                adj_total += sense_weight(cnt, rank)
            if " " not in key and adj_total >= noun_weight.get(key, 0.0):
                modifiers.add(key)
            if senses and key not in noun_weight:
                dist[key] = (senses, adj_total)
        return dist, modifiers

    @staticmethod
    def _exceptions(path: Path) -> dict[str, str]:
        out: dict[str, str] = {}
        if path.is_file():
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
                parts = line.split()
                if len(parts) >= 2:
                    out.setdefault(key_of(parts[0]), key_of(parts[1]))
        return out

    def _frequencies(
        self, lemmas: dict[str, list[int]], modifiers: set[str]
    ) -> tuple[dict[str, int], dict[str, str], set[str]]:
        from wordfreq import get_frequency_dict

        en = get_frequency_dict("en")
        vocab = {w for k in lemmas for w in k.split()} | modifiers | STOPWORDS
        zipf: dict[str, int] = {}
        for w, f in en.items():
            if f <= 0 or key_of(w) != w:
                continue
            z = math.log10(f) + 9
            if z >= ZIPF_MIN or w in vocab:
                zipf[w] = round(z * 100)
        foreign: dict[str, str] = {}
        weak: set[str] = set()
        for lang in self.tax.foreign_languages:
            for w, f in get_frequency_dict(lang).items():
                if f <= 0 or len(w) < 3 or key_of(w) != w or w in foreign or w in lemmas or w in STOPWORDS:
                    continue
                z = math.log10(f) + 9
                if z >= FOREIGN_MIN_ZIPF and zipf.get(w, 0) < FOREIGN_MAX_EN_ZIPF * 100:
                    foreign[w] = lang
                    if z - zipf.get(w, 0) / 100.0 < FOREIGN_ALONE_MARGIN:
                        weak.add(w)
        return dict(sorted(zipf.items())), dict(sorted(foreign.items())), weak


def compile_kb(categories: Path | str | None = None, source: WordNetSource | None = None) -> bytes:
    """The KB file's bytes for these sources (deterministic)."""
    taxonomy = load_taxonomy(categories)
    return encode(_Compiler(taxonomy, source or locate()).run())


def build(path: Path, categories: Path | str | None = None) -> BuildReport:
    """Compile and write the KB to ``path`` atomically."""
    import hashlib

    t0 = time.perf_counter()
    limit = sys.getrecursionlimit()
    # the compiler recurses deep; the limit is process-wide (a serve that rebuilt its KB would accept deeper
    # JSON and msgpack records than any other), so it is put back once compiled
    sys.setrecursionlimit(max(limit, 10_000))
    try:
        data = compile_kb(categories)
    finally:
        sys.setrecursionlimit(limit)
    write_atomic(path, data)
    from knowledge.store import decode

    kb = decode(data)
    return BuildReport(path, time.perf_counter() - t0, len(data), hashlib.sha256(data).hexdigest(), kb.meta["counts"])
