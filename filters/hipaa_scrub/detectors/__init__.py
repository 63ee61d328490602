"""Detectors: one class per identifier family, Presidio style.

A detector declares its patterns, context words and validity checks as
class-level data; :meth:`Detector.build` compiles them once. ``detect`` appends
:class:`Span` objects for one text. ``NEEDS`` names the cheap pre-check that must
pass before the detector runs at all (most queries have no digit, no ``@``...);
``TRIGGERS`` the patterns the one-pass prefilter (:mod:`..prefilter`) looks for.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from filters.hipaa_scrub.detectors import prechecks as _built_prechecks
from sidecar.api.compiled import current

PRECHECKS = current(_built_prechecks)
"""The word pre-checks and the cue scan (:mod:`.prechecks`): compiled when built from the current source."""
scan_from_starts: Callable[[re.Pattern[str], re.Pattern[str], str], list[re.Match[str]]] = PRECHECKS.scan_from_starts

_DIGIT_BYTES = b"0123456789"

WS = r"[\t-\r\x1c- ]"
"""What Python's ``\\s`` matches in ASCII text, for ``TRIGGERS`` (RE2's ``\\s`` lacks ``\\v`` and ``\\x1c-\\x1f``)."""


def ascii_digits(ascii_text: str) -> int:
    """The digits 0-9 in an ASCII text, counted in C (``bytes.translate``)."""
    raw = ascii_text.encode()
    return len(raw) - len(raw.translate(None, _DIGIT_BYTES))


KINDS: tuple[str, ...] = (
    "name",
    "address",
    "city",
    "county",
    "zip",
    "date",
    "age",
    "phone",
    "fax",
    "email",
    "ssn",
    "mrn",
    "health_plan",
    "account",
    "card",
    "license",
    "vehicle",
    "vin",
    "device",
    "mac",
    "url",
    "ip",
    "id",
)
"""Identifier types (the keys of ``policies``), after the Safe Harbor list (A)-(R)."""

GENERALIZABLE: frozenset[str] = frozenset({"zip", "date", "age", "city", "county", "url"})
"""Types that have a ``generalize`` policy (ZIP -> 3 digits, date -> year, age -> 90+, ...)."""


@dataclass(slots=True)
class Span:
    """A detected identifier: ``text[start:end]`` of type ``kind``.

    ``general`` is the generalized form (``generalize`` policy); ``residue`` is text
    that stays when the span is removed (a state after a city name); ``score`` its confidence.
    """

    start: int
    end: int
    kind: str
    priority: int = 50
    general: str | None = None
    residue: str = ""
    #: confidence, 0..1: 1.0 for a built-in rule's finding (its own thresholds decided), the census odds of a
    #: name, a custom recognizer's score with its context (``thresholds`` drops findings below their type's)
    score: float = 1.0


@dataclass(frozen=True)
class Pattern:
    """A named regular expression (compiled by the detector at build)."""

    name: str
    regex: str


class Detector:
    """Base class: ``PATTERNS`` compiled at build, ``detect`` fills spans."""

    KINDS: ClassVar[tuple[str, ...]] = ()
    NEEDS: ClassVar[str] = "digit"  # digit | at | colon | dot | alpha
    PATTERNS: ClassVar[tuple[Pattern, ...]] = ()
    PRIORITY: ClassVar[int] = 50
    FLAGS: ClassVar[int] = re.IGNORECASE
    #: Digit-based detectors are skipped on texts with fewer digits than this.
    MIN_DIGITS: ClassVar[int] = 1
    #: Digit-run lengths of which one must occur (a run is a maximal ``\d+``); None: no such set.
    #: The scrubber drops the detector from a text's plan without calling anything when none occurs.
    RUNS: ClassVar[frozenset[int] | None] = None
    #: Set when every span this detector finds is a maximal run of word characters and dashes (``[\w-]+``) of
    #: ``lower`` with at least this many digits, and has the lowest priority: the scrubber then runs it last,
    #: and not at all when spans found before hold every such run (``Scrubber._covered``).
    TOKEN_DIGITS: ClassVar[int | None] = None
    #: Digit-run lengths that must all occur (None: no such set); checked like ``RUNS``, once per set of lengths.
    RUNS_ALL: ClassVar[frozenset[int] | None] = None
    #: Optional cheap regex on the lowercased text; no match skips ``detect``.
    GATE: ClassVar[str | None] = None
    #: Optional words (``[a-z]+`` runs of the lowercased text) of which one must occur; faster
    #: than a regex alternation of many words.
    GATE_WORDS: ClassVar[frozenset[str] | None] = None
    #: RE2 patterns on the lowercased ASCII text, one of which matches wherever :meth:`detect` finds anything (a
    #: necessary condition, like a pre-check): the scrubber matches every detector's triggers in one pass
    #: (:mod:`~filters.hipaa_scrub.prefilter`) and skips the detectors none of whose triggers occur. None: the
    #: detector has no triggers and is never skipped by the prefilter. Write ``WS`` for ``\s``; no look-arounds
    #: or back-references (RE2 has none): drop a look-ahead, write a one-character look-behind at the start as
    #: ``(?:^|[^...])`` and a back-reference as what its group matches.
    TRIGGERS: ClassVar[tuple[str, ...] | None] = None

    def __init__(self) -> None:
        self.compiled = tuple((p.name, re.compile(p.regex, self.FLAGS)) for p in self.PATTERNS)
        #: the same, for ASCII lowercased text (see :func:`ascii_variant`)
        self.compiled_ascii = tuple((name, ascii_variant(rx)) for name, rx in self.compiled)
        self.gate = re.compile(self.GATE) if self.GATE else None

    def trigger_patterns(self) -> tuple[str, ...] | None:
        """``TRIGGERS``, or this detector's own when its options narrow them."""
        return self.TRIGGERS

    def has_prefilter(self) -> bool:
        """False when :meth:`prefilter` always passes (the scrubber then skips the call)."""
        return type(self).prefilter is not Detector.prefilter or self.gate is not None or self.GATE_WORDS is not None

    def prefilter(self, text: str, lower: str, words: list[str], runs: frozenset[int]) -> bool:
        """Cheap pre-check: ``GATE`` matches or one of ``GATE_WORDS`` occurs (either, when both are set).

        ``words`` are the ``[a-z]+`` runs of ``lower``, ``runs`` the lengths of its digit runs.
        A pre-check must be a necessary condition: it may let through texts with nothing to find,
        never block one where ``detect`` finds something.
        """
        if self.GATE_WORDS is not None and not self.GATE_WORDS.isdisjoint(words):
            return True
        return self.gate is not None and self.gate.search(lower) is not None

    def wants(self, lower: str, words: list[str]) -> bool:
        """Word-based pre-check (``NEEDS = "alpha"`` detectors): False skips ``detect``."""
        return True

    def precheck(self) -> Callable[[str, list[str]], bool]:
        """What the scrubber's plans call for :meth:`wants` (a detector whose check runs elsewhere gives that
        callable itself, saving a call)."""
        return self.wants

    def trigger_words(self) -> frozenset[str] | None:
        """Words of which one must occur for :meth:`wants` to pass (None: no such set). The scrubber
        skips every word-based detector at once when a text has none of their trigger words."""
        return None

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        raise NotImplementedError  # abstract: every detector defines it


_ESCAPE = re.compile(r"\\.|\(\?P[<=]")  # escapes (``\d``, ``\S``) and named-group syntax are not letters


def ascii_variant(rx: re.Pattern[str]) -> re.Pattern[str]:
    """``rx`` without ``IGNORECASE`` when that changes nothing on ASCII lowercase text (no letter of
    the pattern outside escapes is uppercase), else ``rx`` itself. Case-insensitive matching is
    markedly slower in ``re``; use the variant only on ``lower`` when ``lower.isascii()``."""
    if not rx.flags & re.IGNORECASE or any(c.isupper() for c in _ESCAPE.sub("", rx.pattern)):
        return rx
    return re.compile(rx.pattern, rx.flags & ~re.IGNORECASE)


_LUHN_DOUBLE = {str(d): (2 * d if d < 5 else 2 * d - 9) for d in range(10)}


def luhn_ok(digits: str) -> bool:
    """Luhn checksum (cards, IMEI)."""
    if digits.isascii():  # the usual case, in C: every other digit from the right, doubled
        return (sum(map(int, digits[-1::-2])) + sum(map(_LUHN_DOUBLE.__getitem__, digits[-2::-2]))) % 10 == 0
    total = 0  # other Unicode digits count by code point, as they always have
    for i, ch in enumerate(reversed(digits)):
        d = ord(ch) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def context_before(lower: str, start: int, words: re.Pattern[str], window: int = 24) -> bool:
    """True when a context word occurs in the ``window`` characters before ``start``."""
    return words.search(lower, max(0, start - window), start) is not None
