"""Main unit and category (paper 001 Algorithm 1, steps 3-4; paper 004 §3.4).

The main unit is the most specific unit: lowest wordfreq frequency (the paper's
"entropy"). :func:`paper_verdict` takes its category alone; :func:`vote` lets
every unit vote with a weight growing with its specificity, so context can
overrule one ambiguous word.
"""

from __future__ import annotations

from knowledge.classifier.model import Unit, Verdict
from knowledge.classifier.names import NameTables
from knowledge.store import FLAG_CURATED, FLAG_IDENT, FLAG_PLACE

#: Vote of a unit: max(VOTE_FLOOR, VOTE_BASE - its Zipf), times the boosts below.
VOTE_BASE = 7.5
VOTE_FLOOR = 0.5
MAIN_BOOST = 1.5  # the main (most specific) unit
CURATED_BOOST = 2.0  # a curated term (brand, site, league)
NAMED_FACTOR = 0.25  # a named place or person when topic words are present
#: A unit whose senses reach a category with less than this share (permille) of their weight is no
#: evidence: its main senses have no category (``job`` -> 1/1000 each for three categories).
MIN_SHARE = 50
#: ...and a word this common (Zipf x 100: ``home``, ``state``, ``life``) must reach MIN_SHARE_COMMON:
#: everyday words have many senses, and a minor one with a category is weak evidence.
COMMON_ZIPF = 520
COMMON = COMMON_ZIPF / 100.0
MIN_SHARE_COMMON = 200
#: Named units (a city, a person; a state, country or region): the main unit only when nothing else is left.
NAMED = FLAG_IDENT | FLAG_PLACE


def min_share(u: Unit) -> int:
    """Share (permille) of its sense weight a unit's top category needs for the unit to count as evidence."""
    return MIN_SHARE_COMMON if u.zipf * 100 >= COMMON_ZIPF and not u.entry.flags & FLAG_CURATED else MIN_SHARE


def main_unit(units: list[Unit], surface: bool, avoid: int = FLAG_IDENT) -> Unit:
    """The most specific unit (lowest Zipf as typed or as recommended), units flagged ``avoid`` only if all are."""
    pool = [u for u in units if not u.entry.flags & avoid] or units
    if len(pool) == 1:
        return pool[0]
    return min(pool, key=lambda u: ((u.surface_zipf if surface else u.zipf), u.text))


def paper_verdict(units: list[Unit]) -> Verdict:
    """Algorithm 1 as published: the top category of the main unit as typed (``units`` not empty)."""
    main = main_unit(units, surface=True)
    top = main.entry.senses[0]
    return Verdict(main, top.category, top.permille / 1000.0, top.path)


def vote(units: list[Unit], raw: list[str], names: NameTables) -> Verdict | None:
    """Category with the most weight over the units that are evidence; None when none is.

    ``units`` is not empty; ``raw`` = the typed tokens. The unit reported is the most specific unit
    of the winning category. (:func:`min_share` is inlined: this runs once per uncached query.)
    """
    if len(units) == 1:
        u = units[0]
        top = u.entry.senses[0].permille
        if top < MIN_SHARE or (top < MIN_SHARE_COMMON and u.zipf >= COMMON and not u.entry.flags & FLAG_CURATED):
            return None
    else:
        units = [
            u
            for u in units
            if (top := u.entry.senses[0].permille) >= MIN_SHARE_COMMON
            or (top >= MIN_SHARE and (u.zipf < COMMON or u.entry.flags & FLAG_CURATED))
        ]
        if not units:
            return None
    if len(raw) > 1 and not names.first.keys().isdisjoint(raw):
        person = names.name_words(raw)
        if person:  # a person's name is an identifier, not a topic (paper 001 removes them)
            units = [
                u
                for u in units
                if u.entry.flags & FLAG_CURATED or " " in u.key or not person.issuperset(u.text.split())
            ]
            if not units:
                return None
    if len(units) == 1:
        return _one_vote(units[0])
    return _scored(units)


def _scored(units: list[Unit]) -> Verdict:
    """The vote of two or more units that are evidence."""
    plain = [u for u in units if not u.entry.flags & NAMED]
    main = min(plain or units, key=_specific)
    has_plain = bool(plain)
    scores: dict[int, float] = {}
    for u in units:
        flags = u.entry.flags
        w = VOTE_BASE - u.zipf
        if w < VOTE_FLOOR:
            w = VOTE_FLOOR
        if u is main:
            w *= MAIN_BOOST
        if flags & FLAG_CURATED:
            w *= CURATED_BOOST
        if has_plain and flags & NAMED:
            w *= NAMED_FACTOR
        w /= 1000.0
        for sense in u.entry.senses:
            cat = sense.category
            scores[cat] = scores.get(cat, 0.0) + w * sense.permille
    win, best_score, total = -1, -1.0, 0.0
    for cat, sc in scores.items():  # the highest score, the lowest category index on a tie
        total += sc
        if sc > best_score or (sc == best_score and cat < win):
            win, best_score = cat, sc
    backers = [u for u in units if u.entry.sense_for(win) is not None]
    best = min([u for u in backers if not u.entry.flags & NAMED] or backers, key=_specific)
    chosen = best.entry.sense_for(win)
    assert chosen is not None  # best is one of the backers
    return Verdict(best, win, best_score / total, chosen.path)


def _specific(u: Unit) -> tuple[float, str]:
    """Sort key of :func:`main_unit` on recommended frequencies: the rarest unit, then its text."""
    return (u.zipf, u.text)


def _one_vote(u: Unit) -> Verdict:
    """The vote of a single unit (as in :func:`vote`, without the bookkeeping): its top category, whose share
    of the unit's weight does not depend on the weight (precomputed per KB entry)."""
    top = u.entry.top
    return Verdict(u, top.category, u.entry.top_share, top.path)
