"""Quality of the classifier: accuracy and coverage on labelled query sets.

* the project's hand-labelled set (``tests/data/labelled_queries.tsv``);
* ``magnetic_annotated.txt`` (``../shared/data/labelled``) through the category
  mapping ``knowledge/data/magnetic_categories.yaml``;
* coverage only on the AOL sample (``../shared/data/aol-sample.tsv``);
* the **independent** set (``tests/data/independent_queries.tsv``): 1,000 short
  real-world-style queries with ODP top-level labels and a ``kind`` column, written
  by another hand from sources the classifier was never tuned on and frozen (its
  SHA-256 is pinned by a test). The classifier is never tuned on its lines: only its
  aggregate figures are read. Its label ``Adult`` (outside the 16 categories) is
  scored apart: coverage only.

Accuracy is measured on the queries the classifier categorises (as paper 001 did);
coverage is the share it categorises. Only counts are reported, never queries.
"""

from __future__ import annotations

import csv
import zlib
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import yaml

from knowledge.paths import MAGNETIC_CATEGORIES

if TYPE_CHECKING:
    from knowledge.classifier.model import Classification

ROOT = Path(__file__).resolve().parents[1]
LABELLED = ROOT / "tests" / "data" / "labelled_queries.tsv"
INDEPENDENT = ROOT / "tests" / "data" / "independent_queries.tsv"
#: Header of the independent set.
INDEPENDENT_HEADER = ("query", "category", "kind")
#: Its label for queries outside the 16 categories (scored apart, coverage only).
OUTSIDE = "Adult"
MAGNETIC_MAP = MAGNETIC_CATEGORIES
SHARED_DATA = ROOT / ".." / "shared" / "data"


@dataclass
class Score:
    """Accuracy/coverage counters, overall and per expected category."""

    total: int = 0
    covered: int = 0
    correct: int = 0
    per_category: dict[str, list[int]] = field(default_factory=dict)  # name -> [total, covered, correct]

    def add(self, expected: str | None, got: str | None) -> None:
        self.total += 1
        row = self.per_category.setdefault(expected or "-", [0, 0, 0])
        row[0] += 1
        if got is not None:
            self.covered += 1
            row[1] += 1
            if got == expected:
                self.correct += 1
                row[2] += 1

    @property
    def coverage(self) -> float:
        return self.covered / self.total if self.total else 0.0

    @property
    def accuracy(self) -> float:
        return self.correct / self.covered if self.covered else 0.0


def read_labelled(path: Path = LABELLED) -> list[tuple[str, str]]:
    """``(query, category)`` rows of a ``query<TAB>category`` file (``#`` lines are comments)."""
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        query, _, cat = line.partition("\t")
        rows.append((query, cat.strip()))
    return rows


def read_magnetic(path: Path, mapping_path: Path = MAGNETIC_MAP) -> list[tuple[str, str]]:
    """Magnetic queries whose label maps to a category (longest mapped prefix wins; null = left out)."""
    mapping: dict[str, str | None] = yaml.safe_load(mapping_path.read_text(encoding="utf-8"))
    keys = sorted(mapping, key=len, reverse=True)
    out: list[tuple[str, str]] = []
    with path.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            parts = line.rstrip("\n").split("\t")
            if len(parts) < 3:
                continue
            label = parts[2].strip()
            for k in keys:
                if label == k or label.startswith(k + "\\"):
                    category = mapping[k]
                    if category is not None:
                        out.append((parts[0], category))
                    break
    return out


@dataclass(frozen=True)
class Labelled:
    """A query of the independent set: its text, its ODP top-level label and its kind."""

    query: str
    category: str
    kind: str


class FormatError(ValueError):
    """A labelled file does not have the expected shape (the message names the line, never its text)."""


def read_independent(path: Path = INDEPENDENT) -> list[Labelled]:
    """Rows of the independent set: a ``query<TAB>category<TAB>kind`` header, then one query per line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    if not lines or tuple(lines[0].split("\t")) != INDEPENDENT_HEADER:
        raise FormatError(f"{path.name}: line 1: header must be {'<TAB>'.join(INDEPENDENT_HEADER)}")
    out: list[Labelled] = []
    for no, line in enumerate(lines[1:], start=2):
        parts = line.split("\t")
        if len(parts) != 3 or not all(p.strip() for p in parts):
            raise FormatError(f"{path.name}: line {no}: expected 3 non-empty tab-separated fields")
        out.append(Labelled(parts[0], parts[1].strip(), parts[2].strip()))
    return out


@dataclass
class IndependentScore:
    """Scores of the independent set: categorised labels overall and per kind; ``Adult`` apart."""

    overall: Score = field(default_factory=Score)
    per_kind: dict[str, Score] = field(default_factory=dict)
    outside: Score = field(default_factory=Score)  # label Adult: coverage only (no category is right)


def score_independent(classify: Callable[[str], object | None], rows: Iterable[Labelled]) -> IndependentScore:
    """Accuracy on the categorised queries and coverage, overall and per kind; ``Adult`` rows apart."""
    out = IndependentScore()
    for row in rows:
        r = classify(row.query)
        got = getattr(r, "category", None) if r is not None else None
        if row.category == OUTSIDE:
            out.outside.add(None, got)
            continue
        out.overall.add(row.category, got)
        out.per_kind.setdefault(row.kind, Score()).add(row.category, got)
    return out


def read_aol_queries(path: Path) -> list[str]:
    """The Query column of an AOL-format TSV (header line first)."""
    with path.open(encoding="utf-8", errors="replace", newline="") as f:
        reader = csv.reader(f, delimiter="\t", quoting=csv.QUOTE_NONE)
        header = next(reader, [])
        qi = header.index("Query") if "Query" in header else 1
        return [row[qi] for row in reader if len(row) > qi]


def half_of(query: str) -> int:
    """Deterministic half of a query, by CRC-32: 0 is the tuning half (look at its queries when improving the
    classifier), 1 the held-out half (its aggregate figures only, measured when a change is done)."""
    return zlib.crc32(query.encode("utf-8", errors="replace")) & 1


def score(classify: Callable[[str], object | None], rows: Iterable[tuple[str, str]]) -> Score:
    s = Score()
    for query, expected in rows:
        r = classify(query)
        s.add(expected, getattr(r, "category", None) if r is not None else None)
    return s


def coverage(classify: Callable[[str], Classification | None], queries: Iterable[str]) -> tuple[int, int, Counter[str]]:
    """``(categorised, total, per-category counts)`` over ``queries``."""
    got: Counter[str] = Counter()
    n = 0
    for q in queries:
        n += 1
        r = classify(q)
        if r is not None:
            got[r.category] += 1
    return sum(got.values()), n, got
