"""An independent corpus of vehicle identifiers in queries, written from the public definitions alone.

* **VINs, 49 CFR 565.15**: 17 characters of the digits and the letters but I, O and Q; position 9 is the check
  digit: each character transliterated (565.15(c) table: A=1 ... H=8, J=1 ... N=5, P=7, R=9, S=2 ... Z=9, a digit
  itself), multiplied by its position's weight (8 7 6 5 4 3 2 10 0 9 8 7 6 5 4 3 2), the sum taken modulo 11,
  a remainder of 10 written X. Position 10 is the model year code (letters but I, O, Q, U, Z, and 1-9), and for
  a maker of 1,000 or more vehicles a year positions 13-17 are digits. Drawn with a valid check digit (a VIN as
  printed) and, after a ``vin`` cue only, with an arbitrary one (a mistyped VIN).
* **License plates**, in the standard-issue serial formats the states publish for passenger plates (California
  ``1ABC234``, New York, Pennsylvania, Texas, Virginia, North Carolina ``ABC-1234``, Ohio, Michigan ``ABC 1234``,
  Illinois ``AB 12345``, New Jersey ``A12-BCD``, Florida ``ABC D12``, Massachusetts ``1AB 234``, Washington,
  Arizona, Georgia ``ABC1234``, Maryland ``1AB2345``, Minnesota ``123-ABC``, Delaware six digits, ...), typed
  upper or lower case, with or without the separator, and vanity plates with digits (``GO4IT 2``-like: letters
  and at least two digits, the form a search for a car's owner most often has).
* **Cues**: ``plate``, ``license plate``, ``tag``, ``tag number``, ``plate number``, ``plates``, ``license tag``,
  before the value or after it (``7abc123 plate owner``), with a state name or abbreviation around.
* **Negatives**: queries with those cue words and no identifier (``license plate frames``, ``tag heuer``, ``tag
  sale``, ``plate 7 of the atlas``): the words must all be kept.

Frozen in ``tests/data/independent_vehicles.jsonl`` (``python -m sidecar.tools.corpus.vehicles`` rewrites it on
purpose); like :mod:`.independent` it imports nothing of the scrubber or of the own corpus generator. Rows are
``(query, [(start, end, kind)])`` with kinds ``vin``, ``vin_cued`` and ``plate``.
"""

from __future__ import annotations

import json
import random
import string
from pathlib import Path

Gold = list[tuple[int, int, str]]
Item = tuple[str, Gold]

SEED = 56515
ROWS_PER_KIND = 300
ORDINARY_ROWS = 300
FROZEN = Path(__file__).resolve().parents[3] / "tests" / "data" / "independent_vehicles.jsonl"
KINDS: tuple[str, ...] = ("vin", "vin_cued", "plate")

# 49 CFR 565.15(c): transliteration of letters, and the weight of each position
_LETTER_VALUES = {
    **dict(zip("ABCDEFGH", range(1, 9))),
    **dict(zip("JKLMN", range(1, 6))),
    "P": 7,
    "R": 9,
    **dict(zip("STUVWXYZ", range(2, 10))),
}
_POSITION_WEIGHTS = (8, 7, 6, 5, 4, 3, 2, 10, 0, 9, 8, 7, 6, 5, 4, 3, 2)
_VIN_ALPHABET = "".join(c for c in string.ascii_uppercase if c not in "IOQ") + string.digits
_YEAR_CODES = "".join(c for c in string.ascii_uppercase if c not in "IOQUZ") + "123456789"
# World manufacturer identifiers as SAE assigns them (first character: region/country; a few real ones)
_WMIS = ("1FT", "1G1", "1HG", "2T1", "3VW", "4T1", "5YJ", "JHM", "JN1", "KMH", "WBA", "WVW", "YV1", "SAL", "ZFA")

# passenger-plate serial formats: L a letter, D a digit, anything else literal
_PLATE_FORMATS = (
    "DLLLDDD",  # California
    "LLL-DDDD",  # New York, Pennsylvania, Texas, Virginia, North Carolina
    "LLL DDDD",  # Ohio, Michigan
    "LL DDDDD",  # Illinois
    "LDD-LLL",  # New Jersey
    "LLL LDD",  # Florida
    "DLL DDD",  # Massachusetts
    "LLLDDDD",  # Washington, Arizona, Georgia
    "DLLDDDD",  # Maryland
    "DDD-LLL",  # Minnesota, Wisconsin-like
    "DDDDDD",  # Delaware
    "LLL-DDD",  # Colorado, Connecticut-like
    "DDD LLL",  # Florida (older), Iowa
)
_VANITY_WORDS = ("go", "luv", "mom", "dad", "car", "fun", "ace", "max", "hot", "vet")
_STATES = ("ca", "ny", "tx", "fl", "pa", "oh", "il", "nj", "ga", "nc", "texas", "california", "florida", "ohio")
_PLATE_BEFORE = (
    "license plate {}",
    "plate {}",
    "plate number {}",
    "tag {}",
    "tag number {}",
    "license tag {}",
    "who owns license plate {}",
    "lookup plate {}",
    "{s} plate {}",
    "{s} tag {}",
    "plate# {}",
    "tag: {}",
    "license plate number {} {s}",
    "plates {}",
)
_PLATE_AFTER = ("{} plate owner", "{} license plate", "{} {s} plate", "{} tag lookup", "{} plates")
_VIN_PRINTED = ("{}", "{} recall", "carfax {}", "{} history report", "check {}", "{} title")
_VIN_CUED = ("vin {}", "vin: {}", "vin number {}", "vin# {}", "decode vin {}", "vin {} lookup")
_ORDINARY = (
    "license plate frames",
    "license plate covers chrome",
    "tag heuer watches",
    "tag sale this weekend",
    "yard sale tag ideas",
    "plate tectonics",
    "paper plate crafts",
    "vanity plate ideas",
    "license plate lookup free",
    "tag team wrestling",
    "hot plate recipes",
    "{s} license plate renewal",
    "{s} tag office hours",
    "plate number lookup",
    "vin number lookup",
    "vin decoder",
    "price tag",
    "name tag template",
    "plates for sale",
    "how to read a vin",
)


def check_digit(vin: str) -> str:
    """The 49 CFR 565.15 check digit of a 17-character VIN (position 9 ignored)."""
    total = 0
    for char, weight in zip(vin.upper(), _POSITION_WEIGHTS, strict=True):
        total += weight * (int(char) if char.isdigit() else _LETTER_VALUES[char])
    rest = total % 11
    return "X" if rest == 10 else str(rest)


def draw_vin(r: random.Random, valid: bool = True) -> str:
    """A VIN: a WMI, a vehicle descriptor, the check digit, year and plant codes, a numeric serial."""
    chars = [*r.choice(_WMIS)]
    chars += [r.choice(_VIN_ALPHABET) for _ in range(5)]
    chars += ["0", r.choice(_YEAR_CODES), r.choice(_VIN_ALPHABET), r.choice(_VIN_ALPHABET)]
    chars += [r.choice(string.digits) for _ in range(5)]
    vin = "".join(chars)
    right = check_digit(vin)
    digit = right if valid else r.choice([c for c in string.digits + "X" if c != right])
    return vin[:8] + digit + vin[9:]


def draw_plate(r: random.Random) -> str:
    """A plate in a state's serial format (or a vanity plate with digits), as a person might type it."""
    if r.random() < 0.12:
        word = r.choice(_VANITY_WORDS)
        plate = f"{word}{r.randint(10, 999)}" if r.random() < 0.5 else f"{r.randint(10, 99)}{word}"
    else:
        fmt = r.choice(_PLATE_FORMATS)
        plate = "".join(
            r.choice(string.ascii_uppercase) if c == "L" else r.choice(string.digits) if c == "D" else c for c in fmt
        )
        if r.random() < 0.25:
            plate = plate.replace("-", "").replace(" ", "")
    return plate.lower() if r.random() < 0.5 else plate.upper()


def _plant(r: random.Random, template: str, value: str, kind: str) -> Item:
    text = template.replace("{s}", r.choice(_STATES))
    start = text.index("{}")
    return text.replace("{}", value), [(start, start + len(value), kind)]


def items(seed: int = SEED) -> list[Item]:
    """``ROWS_PER_KIND`` rows of each kind, then the ordinary rows (cue words, no identifier)."""
    r = random.Random(seed)
    out: list[Item] = []
    for _ in range(ROWS_PER_KIND):
        vin = draw_vin(r)
        out.append(_plant(r, r.choice(_VIN_PRINTED), vin if r.random() < 0.6 else vin.lower(), "vin"))
        cued = draw_vin(r, valid=r.random() < 0.5)
        out.append(_plant(r, r.choice(_VIN_CUED), cued if r.random() < 0.6 else cued.lower(), "vin_cued"))
        before = r.random() < 0.8
        out.append(_plant(r, r.choice(_PLATE_BEFORE if before else _PLATE_AFTER), draw_plate(r), "plate"))
    for _ in range(ORDINARY_ROWS):
        out.append((r.choice(_ORDINARY).replace("{s}", r.choice(_STATES)), []))
    return out


def to_lines(rows: list[Item]) -> list[str]:
    """One JSON line per row: the query, its planted spans, the row's kind."""
    return [
        json.dumps({"type": g[0][2] if g else "ordinary", "query": q, "spans": [list(s) for s in g]}, sort_keys=True)
        for q, g in rows
    ]


def read(path: Path = FROZEN) -> list[Item]:
    """The frozen corpus."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    return [(row["query"], [(int(a), int(b), str(k)) for a, b, k in row["spans"]]) for row in rows]


if __name__ == "__main__":  # pragma: no cover - the rebuild entry point
    lines = to_lines(items())
    FROZEN.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"{len(lines)} rows written to {FROZEN}")
