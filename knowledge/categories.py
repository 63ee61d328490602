"""The category taxonomy (``knowledge/data/categories.yaml``): categories defined by WordNet anchors and
curated terms.

Shape (every key optional except ``categories``)::

    foreign: {category: World, languages: [es, fr, de]}   # non-English queries
    categories:
      Sports:
        anchors: [sport.n.01, athlete.n.01]   # a synset and everything below it
        lexnames: []                           # fallback: unanchored nouns of these lexicographer files
        lexname_defaults: []                   # last resort: for lemmas with no other categorised sense
        terms:                                 # curated terms (brands, sites, bands) by sub-topic
          Soccer: [fc barcelona, fifa]

Errors are :class:`~sidecar.config.loader.ConfigError` with file and line.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from knowledge.paths import DEFAULT_CATEGORIES
from knowledge.text import key_of
from knowledge.wordnet import LEXNAMES
from sidecar.config.loader import ConfigError, Located, load_yaml

_SYNSET = re.compile(r"^[^\s.][^\s]*\.[nvasr]\.\d\d$")
_LANG = re.compile(r"^[a-z]{2,3}$")
_KEYS = ("anchors", "lexnames", "lexname_defaults", "terms")


@dataclass(frozen=True)
class CategoryDef:
    """One category: anchors, fallback lexicographer files, curated terms by label."""

    name: str
    anchors: tuple[str, ...]
    lexnames: tuple[str, ...]
    terms: tuple[tuple[str, tuple[str, ...]], ...]
    #: Last resort: unanchored nouns of these lexicographer files, for a lemma with no other categorised sense.
    lexname_defaults: tuple[str, ...] = ()


@dataclass(frozen=True)
class Taxonomy:
    """The loaded categories file; ``sha256`` identifies its bytes."""

    categories: tuple[CategoryDef, ...]
    foreign_category: str | None
    foreign_languages: tuple[str, ...]
    sha256: str
    file: str

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.categories)


def _str_list(doc: Located, value: Any, path: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise doc.error(path, "expected a list of non-empty strings")
    return tuple(value)


def _category(doc: Located, name: str, body: Any, path: str) -> CategoryDef:
    if body is None:
        body = {}
    if not isinstance(body, dict):
        raise doc.error(path, "expected a mapping with anchors, lexnames, lexname_defaults, terms")
    unknown = sorted(set(body) - set(_KEYS))
    if unknown:
        raise doc.error(f"{path}.{unknown[0]}", "unknown key", _KEYS)
    anchors = _str_list(doc, body.get("anchors"), f"{path}.anchors")
    for i, a in enumerate(anchors):
        if not _SYNSET.match(a):
            raise doc.error(f"{path}.anchors[{i}]", f"{a!r} is not a synset name like sport.n.01")
    lexnames = _noun_lexnames(doc, body.get("lexnames"), f"{path}.lexnames")
    defaults = _noun_lexnames(doc, body.get("lexname_defaults"), f"{path}.lexname_defaults")
    raw_terms = body.get("terms") or {}
    if not isinstance(raw_terms, dict):
        raise doc.error(f"{path}.terms", "expected a mapping of label -> list of terms")
    terms = []
    for label, items in raw_terms.items():
        listed = _str_list(doc, items, f"{path}.terms.{label}")
        for i, t in enumerate(listed):
            if not key_of(t):
                raise doc.error(f"{path}.terms.{label}[{i}]", "term has no letters or digits")
        terms.append((str(label), listed))
    return CategoryDef(name, anchors, lexnames, tuple(terms), defaults)


def _noun_lexnames(doc: Located, value: Any, path: str) -> tuple[str, ...]:
    lexnames = _str_list(doc, value, path)
    for i, lx in enumerate(lexnames):
        if lx not in LEXNAMES or not lx.startswith("noun."):
            raise doc.error(f"{path}[{i}]", f"{lx!r} is not a noun lexicographer file")
    return lexnames


def load_taxonomy(path: Path | str | None = None) -> Taxonomy:
    """Load and check a categories file (default: the shipped ``knowledge/data/categories.yaml``)."""
    file = Path(path) if path is not None else DEFAULT_CATEGORIES
    try:
        raw = file.read_bytes()
    except OSError as exc:
        raise ConfigError(str(file), None, "", f"cannot read categories: {exc.strerror}") from None
    doc = load_yaml(file, raw.decode("utf-8", errors="replace"))
    data = doc.data
    if not isinstance(data, dict) or not isinstance(data.get("categories"), dict) or not data["categories"]:
        raise ConfigError(str(file), None, "categories", "expected a non-empty mapping of category -> definition")
    unknown = sorted(set(data) - {"categories", "foreign", "version"})
    if unknown:
        raise doc.error(unknown[0], "unknown key", ("version", "categories", "foreign"))
    cats = tuple(_category(doc, str(n), b, f"categories.{n}") for n, b in data["categories"].items())
    seen: dict[str, str] = {}
    for c in cats:
        for i, a in enumerate(c.anchors):
            if a in seen:
                raise doc.error(f"categories.{c.name}.anchors[{i}]", f"{a} is already an anchor of {seen[a]}")
            seen[a] = c.name
        for i, lx in enumerate(c.lexnames):
            if lx in seen:
                raise doc.error(f"categories.{c.name}.lexnames[{i}]", f"{lx} is already assigned to {seen[lx]}")
            seen[lx] = c.name
        for i, lx in enumerate(c.lexname_defaults):
            owner = seen.setdefault("default " + lx, c.name)
            if owner != c.name:
                raise doc.error(f"categories.{c.name}.lexname_defaults[{i}]", f"{lx} is already a default of {owner}")
    foreign = data.get("foreign") or {}
    if not isinstance(foreign, dict):
        raise doc.error("foreign", "expected a mapping with category and languages")
    fcat = foreign.get("category")
    if fcat is not None and fcat not in {c.name for c in cats}:
        raise doc.error("foreign.category", f"{fcat!r} is not a category", [c.name for c in cats])
    langs = _str_list(doc, foreign.get("languages"), "foreign.languages")
    for i, lang in enumerate(langs):
        if not _LANG.match(lang):
            raise doc.error(f"foreign.languages[{i}]", f"{lang!r} is not a language code like es")
    return Taxonomy(cats, fcat, langs, hashlib.sha256(raw).hexdigest(), str(file))
