"""Value types of the classifier: unpacked KB entries, tokens, semantic units, verdicts and results.

All are slotted dataclasses: on CPython 3.11 their field reads are specialised (faster than a
NamedTuple's or a tuple index). KB entries are shared, so frozen; the per-query values (tokens,
units, verdicts) are not, because a frozen dataclass's ``__init__`` costs several percent of a query.
"""

from __future__ import annotations

from dataclasses import dataclass

from knowledge.store import FLAG_CURATED, FLAG_IDENT


@dataclass(frozen=True, slots=True)
class Classification:
    """What a query is about. ``path`` = levels L1..L5 (L1 = ``category``)."""

    category: str
    path: tuple[str, ...]
    main_unit: str
    confidence: float


@dataclass(frozen=True, slots=True)
class Sense:
    """One category a KB lemma reaches."""

    category: int  # index into ``KnowledgeBase.categories``
    permille: int  # share of the lemma's sense weight reaching it, 0..1000
    path: int  # index of its L1..L5 path in ``KnowledgeBase.paths``


@dataclass(frozen=True, slots=True)
class Entry:
    """A KB lemma entry: ``FLAG_*`` bits and one to three senses, in decreasing share."""

    flags: int
    senses: tuple[Sense, ...]
    top: Sense  # the sense of the largest share (the lowest category index on a tie)
    top_share: float  # its share of the senses' summed permille: the confidence of a unit voting alone

    @classmethod
    def unpack(cls, packed: tuple[int, ...]) -> Entry:
        """From the KB's packed form ``(flags, category, permille, path, category, permille, path, ...)``."""
        triples = zip(packed[1::3], packed[2::3], packed[3::3])
        senses = tuple(Sense(category, permille, path) for category, permille, path in triples)
        top = senses[0]
        for sense in senses:
            if sense.permille > top.permille or (sense.permille == top.permille and sense.category < top.category):
                top = sense
        return cls(packed[0], senses, top, top.permille / sum(s.permille for s in senses))

    def sense_for(self, category: int) -> Sense | None:
        """The first sense reaching ``category``, if any."""
        for sense in self.senses:
            if sense.category == category:
                return sense
        return None


@dataclass(slots=True)
class Tokens:
    """A query's tokens as the KB should see them (after spelling recommendations) and as typed."""

    tokens: list[str]  # recommended tokens
    surface: list[float] | None  # Zipf of what was typed, per recommended token; None: nothing changed
    changed: list[bool] | None  # whether each recommended token differs from the typed one; None: nothing changed
    raw: list[str]  # typed tokens


@dataclass(slots=True)
class Unit:
    """A semantic unit: its text, the KB key it matched, frequencies and KB entry."""

    text: str
    key: str
    zipf: float  # of the unit as it stands (after spelling recommendation)
    surface_zipf: float  # of the words the user typed
    entry: Entry
    #: Token positions (in the recommended tokens): modifiers ``[first, head)``, the lemma ``[head, end)``.
    first: int = 0
    head: int = 0
    end: int = 0

    @property
    def ident(self) -> bool:
        """A quasi-identifier (a city, a named person)."""
        return bool(self.entry.flags & FLAG_IDENT)

    @property
    def curated(self) -> bool:
        """A curated term of ``categories.yaml``."""
        return bool(self.entry.flags & FLAG_CURATED)


@dataclass(slots=True)
class Verdict:
    """The outcome of a vote, before it is spelled out as a :class:`Classification`."""

    unit: Unit  # the main unit reported
    category: int
    share: float  # confidence, 0..1
    path: int
