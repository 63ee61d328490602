"""Person-name tables from the US census lists of the ``names`` package.

A census first name followed by a census surname, both far likelier as names than
as English words (``katy perry``, not ``rose garden``), is a person's name: an
identifier, not a topic. Census names never get a spelling recommendation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from importlib import resources

#: A census first name followed by a census surname is a person's name when the sum of their scores
#: (log10 of census share over English word frequency) reaches this: ``katy perry``, not ``rose garden``.
NAME_MIN_SCORE = 2.0


def census_shares(file: str) -> dict[str, float]:
    """``names`` package census list (``NAME  percent  cumulative  rank``): lower-case name -> share."""
    out: dict[str, float] = {}
    text = resources.files("names").joinpath(file).read_bytes().decode("ascii", errors="replace")
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            try:
                share = max(float(parts[1]) / 100.0, 5e-7)
            except ValueError:
                continue
            key = parts[0].lower()
            out[key] = max(out.get(key, 0.0), share)
    return out


@dataclass(frozen=True, slots=True)
class NameTables:
    """Name scores: log10(census share) - log10(English word frequency), for names of two letters or more."""

    first: dict[str, float]  # census first names (male and female)
    last: dict[str, float]  # census surnames

    @classmethod
    def build(cls, zipf: dict[str, int]) -> NameTables:
        """Score the census lists against the KB's word frequencies (Zipf x 100)."""

        def score(shares: dict[str, float]) -> dict[str, float]:
            # zipf x 100 = 100 * (log10(frequency) + 9); unknown words count as Zipf 1.
            return {
                t: math.log10(v) - (max(zipf.get(t, 0), 100) / 100.0 - 9.0) for t, v in shares.items() if len(t) > 1
            }

        first = census_shares("dist.male.first")
        for k, v in census_shares("dist.female.first").items():
            first[k] = max(first.get(k, 0.0), v)
        return cls(score(first), score(census_shares("dist.all.last")))

    def name_words(self, raw: list[str]) -> set[str]:
        """Words of person names in ``raw``: a first name then a surname, far likelier as a name than as words."""
        first, last = self.first, self.last
        out: set[str] = set()
        if len(raw) < 2 or first.keys().isdisjoint(raw):
            return out
        for i in range(len(raw) - 1):
            a = first.get(raw[i])
            if a is None:
                continue
            b = last.get(raw[i + 1])
            if b is not None and a + b >= NAME_MIN_SCORE:
                out.add(raw[i])
                out.add(raw[i + 1])
        return out
