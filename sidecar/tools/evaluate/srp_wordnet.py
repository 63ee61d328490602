"""SRP (paper 002 eq. 4) of a microaggregated log under a taxonomy its release never saw.

``mdav`` chooses its release so that SRP with the knowledge base's ODP categories stays above ``1/k``, and
``querylog audit`` measures SRP with those same categories: by construction, not independent evidence. This
measures SRP with WordNet's own hierarchy instead: a query's category path is the noun lexicographer file of its
first word (3 letters or more) that is a WordNet noun, then that noun's first sense's hypernym chain (the least
by synset names when there are several) below the three most general levels (``entity``,
``physical_entity``/``abstraction``, ...), up to L5. Queries without such a word have no path. SRP per user and
level is :func:`~sidecar.tools.audit.measures_microagg.srp`'s.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from sidecar.tools.audit.measures_microagg import srp

LEVELS = (1, 2, 3, 4, 5)
_WORD = re.compile(r"[a-z]+")
#: Hypernym levels skipped: too general to tell queries apart (entity, physical entity / abstraction, ...).
SKIP = 3

Path = tuple[str, ...]


def wordnet_paths(queries: Iterable[str], wordnet: Any) -> dict[str, Path | None]:
    """Each distinct query's path (module docstring) with ``wordnet`` an nltk WordNet reader."""
    out: dict[str, Path | None] = {}
    for query in queries:
        if query in out:
            continue
        path: Path | None = None
        for token in _WORD.findall(query.lower()):
            senses = wordnet.synsets(token, pos="n") if len(token) >= 3 else []
            if senses:
                first = senses[0]
                # several chains when a synset has two parents; nltk's order follows set order: take the least
                chain = min(first.hypernym_paths(), key=lambda c: [x.name() for x in c])
                path = (first.lexname(), *(s.name() for s in chain[SKIP : SKIP + len(LEVELS) - 1]))
                break
        out[query] = path
    return out


def srp_by_level(
    original: Sequence[tuple[str, str]], protected: Sequence[tuple[str, str]], paths: dict[str, Path | None]
) -> dict[str, Any]:
    """Mean SRP per level over the users of ``original`` ((user, query) pairs) with a path at that level, the
    number of such users, and the share of original queries with a path."""
    by_user: dict[str, list[Path]] = defaultdict(list)
    released: dict[str, list[Path]] = defaultdict(list)
    covered = 0
    for user, query in original:
        if (p := paths.get(query)) is not None:
            by_user[user].append(p)
            covered += 1
    for user, query in protected:
        if (p := paths.get(query)) is not None:
            released[user].append(p)
    levels: dict[str, dict[str, float]] = {}
    for level in LEVELS:
        values = [v for u, o in by_user.items() if (v := srp(o, released.get(u, []), level)) is not None]
        levels[f"L{level}"] = {"mean": float(np.mean(values)) if values else 0.0, "users": float(len(values))}
    return {"srp": levels, "coverage": covered / len(original) if original else 0.0}
