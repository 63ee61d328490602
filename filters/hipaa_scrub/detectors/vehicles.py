"""Vehicle licence plates next to a plate or tag cue, in the serial formats states issue.

A plate is 5 to 8 letters and digits with at least two digits, written whole (``7abc123``), with a dash or a
space between two groups (``abc-1234``, ``abc 1234``, ``ab 12345``, ``tag 105 uqy``); a group of letters alone
has at most three (a state's letter block: ``10 inch plate`` is no plate). The cue comes before it (``license
plate``, ``plate``, ``plates``, ``tag``, ``license tag``, then perhaps ``number``/``no``/``#``/``:``: ``ny tag abc
1234``) or after it, perhaps with a state's abbreviation or one-word name between (``7abc123 plate owner``,
``d73-igu ny plate``).
A year (``2006 plates``) is not a plate. :class:`~.context.ContextNumberDetector` still takes other cued values
(``plate 12``-like short ones); the longer span wins the overlap.
"""

from __future__ import annotations

import re

from filters.hipaa_scrub.detectors import Detector, Pattern, Span

_CUE = r"(?:licen[cs]e\s+(?:plate|tag)s?|plates?|tags?)"
_NUMBER = r"(?:\s*(?:number|num|no\.?|nbr|#))?\s*(?::|#|=|is)?\s*"
_STATE = r"(?!licen[cs]e\b)(?:[a-z]{2}|[a-z]{4,14})"  # an abbreviation or a state's one-word name (checked at detect)
_GROUP = r"[a-z0-9]{1,5}"
_VALUE = rf"(?P<v>[a-z0-9]{{5,8}}|{_GROUP}[ -]{_GROUP})"
STATES = frozenset(
    [
        "al",
        "ak",
        "az",
        "ar",
        "ca",
        "co",
        "ct",
        "de",
        "dc",
        "fl",
        "ga",
        "hi",
        "id",
        "il",
        "in",
        "ia",
        "ks",
        "ky",
        "la",
        "me",
        "md",
        "ma",
        "mi",
        "mn",
        "ms",
        "mo",
        "mt",
        "ne",
        "nv",
        "nh",
        "nj",
        "nm",
        "ny",
        "nc",
        "nd",
        "oh",
        "ok",
        "or",
        "pa",
        "ri",
        "sc",
        "sd",
        "tn",
        "tx",
        "ut",
        "vt",
        "va",
        "wa",
        "wv",
        "wi",
        "wy",
        "alabama",
        "alaska",
        "arizona",
        "arkansas",
        "california",
        "colorado",
        "connecticut",
        "delaware",
        "florida",
        "georgia",
        "hawaii",
        "idaho",
        "illinois",
        "indiana",
        "iowa",
        "kansas",
        "kentucky",
        "louisiana",
        "maine",
        "maryland",
        "massachusetts",
        "michigan",
        "minnesota",
        "mississippi",
        "missouri",
        "montana",
        "nebraska",
        "nevada",
        "ohio",
        "oklahoma",
        "oregon",
        "pennsylvania",
        "tennessee",
        "texas",
        "utah",
        "vermont",
        "virginia",
        "washington",
        "wisconsin",
        "wyoming",
    ]
)
_YEAR = re.compile(r"^(?:19|20)\d\d$")


def plate_like(value: str, words: frozenset[str] = frozenset()) -> bool:
    """5-8 letters and digits, 2+ digits, groups of letters alone at most 3 long and not one of ``words`` (``for
    06``, ``new 12``: common words), not a year."""
    compact = value.replace(" ", "").replace("-", "")
    if not 5 <= len(compact) <= 8 or sum(map(str.isdigit, compact)) < 2 or _YEAR.match(compact):
        return False
    return all(not (g.isalpha() and (len(g) > 3 or g in words)) for g in re.split("[ -]", value))


class PlateDetector(Detector):
    """Licence plates before or after a plate/tag cue (module doc)."""

    KINDS = ("vehicle",)
    MIN_DIGITS = 2
    PRIORITY = 34
    GATE_WORDS = frozenset({"plate", "plates", "tag", "tags"})
    TRIGGERS = (r"\d",)  # a digit of the value; the cue words are checked apart (``GATE_WORDS``)
    PATTERNS = (
        Pattern("after_cue", rf"(?<![\w]){_CUE}{_NUMBER}{_VALUE}(?![\w-])"),
        Pattern(
            "before_cue",
            rf"(?<![\w-]){_VALUE.replace('?P<v>', '?P<w>')}\s+(?:(?P<s>{_STATE})\s+)?{_CUE}(?![\w])",
        ),
    )

    def __init__(self, common: frozenset[str] = frozenset()) -> None:
        super().__init__()
        #: very common English words of 1-3 letters: such a group next to a number is no letter block
        self.common = frozenset(w for w in common if len(w) <= 3)

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        after, before = self.compiled_ascii if lower.isascii() else self.compiled
        for rx, group in ((after[1], "v"), (before[1], "w")):
            for m in rx.finditer(lower):
                if group == "w" and m.group("s") is not None and m.group("s") not in STATES:
                    continue  # "12345 paper plates": a word, not a state, between
                if plate_like(m.group(group), self.common):
                    out.append(Span(m.start(group), m.end(group), "vehicle", self.PRIORITY))
