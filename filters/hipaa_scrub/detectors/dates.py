"""Dates tied to a person (all elements but the year) and ages over 89.

A full date (day, month and year) is taken as a personal date (birth, death,
admission): queries rarely spell out other full dates. A year alone
(``1999 honda civic``) or a month and year (``march 2006 calendar``) is not a
date of a person. Day and month without a year count only after a cue such as
``born`` or ``dob``.
"""

from __future__ import annotations

import re

from filters.hipaa_scrub.detectors import WS, Detector, Pattern, Span, ascii_variant, scan_from_starts

MONTHS = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|"
    r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)\.?"
)
DAY = r"(?:[12]\d|3[01]|0?[1-9])(?:st|nd|rd|th)?"
YEAR = r"(?:1[89]\d\d|20\d\d)"
CUE = (
    r"(?:born|birth\s*day|birthday|birth\s*date|birthdate|dob|d\.o\.b\.?|died|death|deceased|passed\s+away|"
    r"admitted|discharged|admission|discharge)(?:\s+(?:on|date|of))?\s*:?\s*"
)


class DateDetector(Detector):
    """Numeric (US m/d/y, ISO y-m-d) and written dates; generalized to the year."""

    KINDS = ("date",)
    GATE = r"\d[/.-]\d"
    GATE_WORDS = frozenset(
        [
            "jan",
            "january",
            "feb",
            "february",
            "mar",
            "march",
            "apr",
            "april",
            "may",
            "jun",
            "june",
            "jul",
            "july",
            "aug",
            "august",
            "sep",
            "sept",
            "september",
            "oct",
            "october",
            "nov",
            "november",
            "dec",
            "december",
        ]
    )
    MIN_DIGITS = 1
    # every pattern has a day or month of 1-2 digits standing alone (bounded by separators, spaces,
    # a suffix or the cue): a digit run of 1 or 2
    RUNS = frozenset({1, 2})
    PRIORITY = 25
    NEEDS = "digit"
    PATTERNS = (
        Pattern("numeric", r"(?<![\w/.-])(\d{1,2})([/.-])(\d{1,2})\2(\d{4}|\d{2})(?![\w/-]|\.\d)"),
        Pattern("iso", r"(?<![\w/.-])(\d{4})([/.-])(\d{1,2})\2(\d{1,2})(?![\w/-]|\.\d)"),
        Pattern("month_day_year", rf"(?<![\w])({MONTHS})\s+({DAY}),?\s+({YEAR})(?!\w)"),
        Pattern("day_month_year", rf"(?<![\w])({DAY})\s+(?:of\s+)?({MONTHS}),?\s+({YEAR})(?!\w)"),
        Pattern(
            "cue_no_year",
            rf"(?<![\w]){CUE}(({MONTHS})\s+({DAY})|({DAY})\s+(?:of\s+)?({MONTHS})|(\d{{1,2}})/(\d{{1,2}}))(?![\w/]|,?\s+{YEAR})",
        ),
    )

    _sep = re.compile(r"\d[/.-]\d")
    _CUE3 = r"(?:born|birth|dob|d\.o\.b|died|death|deceased|passed|admi|discharg)"
    # numeric and ISO dates (``_mid``), the written patterns, a cue's start
    TRIGGERS = (
        r"(?:^|[^\w/.-])(?:\d{1,2}|\d{4})[/.-]\d\d?[/.-]\d",
        rf"{MONTHS}{WS}+{DAY},?{WS}+{YEAR}",
        rf"{DAY}{WS}+(?:of{WS}+)?{MONTHS},?{WS}+{YEAR}",
        _CUE3,
    )
    CUE_WORDS = frozenset(
        {"born", "birth", "birthday", "birthdate", "dob", "d", "died", "death", "deceased", "passed", "admitted"}
        | {"discharged", "admission", "discharge"}
    )

    def prefilter(self, text: str, lower: str, words: list[str], runs: frozenset[int]) -> bool:
        """Numeric and ISO dates have a digit run of 1 or 2 between separators; written dates a month
        word and either a 4-digit year or a cue word (``born march 3``). Past these, the checks
        :meth:`detect` makes before each of its scans: one of them must pass."""
        # a numeric date, and the separator test below, need a separator
        one_two = (1 in runs or 2 in runs) and ("-" in lower or "/" in lower or "." in lower)
        if one_two and self._mid.search(lower) is not None:
            return True  # numeric or ISO: a 1-2 digit run between two separators
        if not self.GATE_WORDS.isdisjoint(words):
            if not (
                4 in runs or not self.CUE_WORDS.isdisjoint(words) or (one_two and self._sep.search(lower) is not None)
            ):
                return False
        elif not (one_two and self._sep.search(lower) is not None):
            return False
        elif lower.isascii():
            # no month word: in ASCII text a written date (its month is a whole word) cannot match,
            # only a cued day and month (``born 3/15``)
            return self._cue_part.search(lower) is not None
        month = self._month.search(lower) is not None
        if (
            month
            and self._year.search(lower) is not None
            and (self._day_year.search(lower) is not None or self._day_month.search(lower) is not None)
        ):
            return True
        return (month or self._sep.search(lower) is not None) and self._cue_part.search(lower) is not None

    _month = re.compile(r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)")

    # numeric and ISO dates: a 1-2 (or 4) digit group at a boundary, then a 1-2 digit group between two
    # separators (the start of both patterns)
    _mid = re.compile(r"(?<![\w/.-])(?:\d{1,2}|\d{4})([/.-])\d\d?\1\d")
    _year = re.compile(r"(?:1[89]|20)\d\d")
    # where a written date (month first) or a cue can start: the full patterns are tried there only
    _month_start = re.compile(r"(?<![\w])(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)", re.IGNORECASE)
    _cue_start = re.compile(
        r"(?<![\w])(?:born|birth|dob|d\.o\.b|died|death|deceased|passed|admi|discharg)", re.IGNORECASE
    )
    _CUE_PARTS = ("born", "birth", "dob", "d.o.b", "died", "death", "deceased", "passed", "admi", "discharg")
    _cue_part = re.compile("|".join(map(re.escape, _CUE_PARTS)))  # one search instead of ten ``in`` tests
    # necessary conditions of the written patterns, cheaper than trying them at every position:
    # month-day-year has a day (digits, ordinal suffix) then the year; day-month-year a day then a month
    _day_year = re.compile(r"\d(?:st|nd|rd|th)?,?\s+(?:1[89]|20)\d\d", re.IGNORECASE)
    _day_month = re.compile(
        r"\d(?:st|nd|rd|th)?\s+(?:of\s+)?(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)", re.IGNORECASE
    )

    def __init__(self) -> None:
        super().__init__()
        # case-sensitive variants for ASCII text (see ``ascii_variant``)
        self.starts_ascii = (ascii_variant(self._month_start), ascii_variant(self._cue_start))
        self.gates_ascii = (ascii_variant(self._day_year), ascii_variant(self._day_month))

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        is_ascii = lower.isascii()
        numeric, iso, mdy, dmy, cue = (rx for _, rx in (self.compiled_ascii if is_ascii else self.compiled))
        month_start, cue_start = self.starts_ascii if is_ascii else (self._month_start, self._cue_start)
        day_year, day_month = self.gates_ascii if is_ascii else (self._day_year, self._day_month)
        if self._mid.search(lower) is not None:
            for m in numeric.finditer(lower):
                a, sep, b, y = int(m.group(1)), m.group(2), int(m.group(3)), m.group(4)
                if not ((1 <= a <= 12 and 1 <= b <= 31) or (1 <= b <= 12 and 1 <= a <= 31)):
                    continue
                if len(y) == 2 and sep == ".":
                    continue  # 1.2.80 reads as a version
                year = y if len(y) == 4 else None
                if year is not None and not 1800 <= int(year) <= 2099:
                    continue
                out.append(Span(m.start(), m.end(), "date", self.PRIORITY, general=year or ""))
            for m in iso.finditer(lower):
                y, mo, d = int(m.group(1)), int(m.group(3)), int(m.group(4))
                if 1800 <= y <= 2099 and 1 <= mo <= 12 and 1 <= d <= 31:
                    out.append(Span(m.start(), m.end(), "date", self.PRIORITY, general=m.group(1)))
        month = self._month.search(lower) is not None
        if month and self._year.search(lower) is not None:
            if day_year.search(lower) is not None:
                for m in scan_from_starts(month_start, mdy, lower):
                    out.append(Span(m.start(), m.end(), "date", self.PRIORITY, general=m.group(3)))
            if day_month.search(lower) is not None:
                for m in dmy.finditer(lower):
                    out.append(Span(m.start(), m.end(), "date", self.PRIORITY, general=m.group(3)))
        if (month or self._sep.search(lower) is not None) and self._cue_part.search(lower) is not None:
            for m in scan_from_starts(cue_start, cue, lower):
                out.append(Span(m.start(1), m.end(1), "date", self.PRIORITY, general=""))


class AgeDetector(Detector):
    """Ages of 90 and over (``age 93``, ``93 years old``, ``93 yo``); generalized to ``90+``."""

    KINDS = ("age",)
    GATE_WORDS = frozenset(["age", "aged", "ages", "yr", "yrs", "year", "years", "yo", "y"])
    # an age word, then 90-125 (maybe a 0 before it); 90-125 then a word starting with y
    TRIGGERS = (rf"age[ds]?{WS}*:?{WS}*0?(?:9\d|1[0-2]\d)", rf"(?:9\d|1[0-2]\d){WS}*-?{WS}*y")
    MIN_DIGITS = 2
    RUNS = frozenset({2, 3})  # the age is a bounded run of 2-3 digits
    PRIORITY = 26
    PATTERNS = (
        Pattern("age_before", r"(?<![\w])(?:age|aged|ages)\s*:?\s*(\d{2,3})(?![\d+]|\s*(?:%|percent|dollars?|mph))"),
        Pattern(
            "age_after",
            r"(?<![\w.])(\d{2,3})(?![\d+])\s*-?\s*(?:years?|yrs?|y/o|yo|y\.o\.)(?:\s*-?\s*old|\s+of\s+age)?(?!\w)",
        ),
    )

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        for name, rx in self.compiled_ascii if lower.isascii() else self.compiled:
            for m in rx.finditer(lower):
                age = int(m.group(1))
                if not 90 <= age <= 125:
                    continue
                if name == "age_after" and not re.search(r"old|of age|y/?o|y\.o", m.group()):
                    # "95 years" alone is a duration unless an age word follows
                    continue
                out.append(Span(m.start(1), m.end(1), "age", self.PRIORITY, general="90+"))
