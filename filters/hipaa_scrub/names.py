"""Person-name data: the 1990 US census first/last name lists (``names`` package) scored
against English word frequencies (``wordfreq``).

A first+last pair is a person name when the census says the pair is far likelier
as a name than ``wordfreq`` says it is as two ordinary words:
``log10(first_share) + log10(last_share) - log10(wf(first)) - log10(wf(last)) >= threshold``.
That keeps ``may flowers``, ``rose garden`` and ``will power`` while ``mary garden``
and ``john smith`` are names. Scores are precomputed per token at build.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

FLOOR = 1e-8
"""Word frequency assumed for a token wordfreq does not know (zipf 1)."""


@dataclass(frozen=True)
class NameData:
    first: dict[str, float]  # token -> log10(census share) - log10(word frequency)
    last: dict[str, float]
    first_share: dict[str, float]  # token -> census share (fraction of people), for the corpus generator
    last_share: dict[str, float]


def _read(path: Path) -> dict[str, float]:
    out: dict[str, float] = {}
    for line in path.read_text(encoding="ascii").splitlines():
        parts = line.split()
        if len(parts) >= 2:
            share = float(parts[1]) / 100.0
            out[parts[0].lower()] = max(out.get(parts[0].lower(), 0.0), share if share > 0 else 5e-7)
    return out


@lru_cache(maxsize=1)
def load_names() -> NameData:
    """Census lists scored once per process (about half a second)."""
    import names as census
    from wordfreq import get_frequency_dict

    files = census.FILES
    first = _read(Path(files["first:male"]))
    for k, v in _read(Path(files["first:female"])).items():
        first[k] = max(first.get(k, 0.0), v)
    last = _read(Path(files["last"]))
    wf = get_frequency_dict("en")

    def score(shares: dict[str, float]) -> dict[str, float]:
        return {t: math.log10(s) - math.log10(max(wf.get(t, 0.0), FLOOR)) for t, s in shares.items() if len(t) > 1}

    return NameData(first=score(first), last=score(last), first_share=first, last_share=last)


@lru_cache(maxsize=4)
def common_words(min_zipf: float = 4.3) -> frozenset[str]:
    """English words at least this frequent (``union``, ``hope``, ``energy``...)."""
    from wordfreq import get_frequency_dict

    floor = 10 ** (min_zipf - 9)
    return frozenset(w for w, f in get_frequency_dict("en").items() if f >= floor and w.isalpha())
