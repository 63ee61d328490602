"""Numeric identifiers: SSN, phone and fax numbers, payment cards, IMEI, ZIP codes, other long numbers."""

from __future__ import annotations

import re

from filters.hipaa_scrub.detectors import WS, Detector, Pattern, Span, ascii_variant, context_before, luhn_ok
from filters.hipaa_scrub.geo import zip3

_NON_DIGIT = re.compile(r"\D")
_DIGIT_BYTES = b"0123456789"


def _digit_count(text: str) -> int:
    """``sum(map(str.isdigit, text))``, in C for ASCII text (where only 0-9 are digits)."""
    if text.isascii():
        raw = text.encode()
        return len(raw) - len(raw.translate(None, _DIGIT_BYTES))
    return sum(map(str.isdigit, text))


class SsnDetector(Detector):
    """US social security numbers with the SSA validity rules (no 000/666/9xx area, 00 group, 0000 serial),
    written with dashes, spaces or dots; and IRS individual taxpayer identification numbers (ITIN), which
    are SSN-shaped but start with 9 and have a group number in 50-65, 70-88, 90-92 or 94-99."""

    KINDS = ("ssn",)
    MIN_DIGITS = 9
    RUNS = frozenset({3, 9})  # the area number, or the bare 9 digits
    PRIORITY = 10
    PATTERNS = (
        Pattern("ssn_separated", r"(?<![\w.-])(\d{3})([- .])(\d{2})\2(\d{4})(?![\w-]|\.\d)"),
        Pattern("ssn_bare", r"(?<![\w.-])(\d{3})()(\d{2})(\d{4})(?![\w-]|\.\d)"),
    )
    CONTEXT = re.compile(r"\b(?:ssn|ss#|ss no|soc(?:ial)?\s*sec(?:urity)?(?:\s*(?:number|no|num|#))?)\b|ss#")
    # separated groups; 9 digits after a cue (every cue has ``ss`` or ``soc``)
    TRIGGERS = (r"\d{3}[- .]\d{2}[- .]\d{4}", r"(?:ss|soc).*\d{9}")
    INVALID = frozenset({"078051120", "219099999", "123456789"})  # famous published/sample numbers

    def prefilter(self, text: str, lower: str, words: list[str], runs: frozenset[int]) -> bool:
        """Both patterns are bounded digit runs: runs of 3, 2 and 4, or 9 digits after a cue (which
        has ``ss`` or ``soc``)."""
        return (4 in runs and 2 in runs and 3 in runs) or (9 in runs and ("ss" in lower or "soc" in lower))

    ITIN_GROUPS = frozenset(f"{g:02d}" for g in (*range(50, 66), *range(70, 89), *range(90, 93), *range(94, 100)))
    """IRS ITIN group numbers (digits 4-5)."""

    @classmethod
    def valid(cls, area: str, group: str, serial: str) -> bool:
        """An SSN by the SSA rules, or an ITIN (area 9xx with an ITIN group number)."""
        if area[0] == "9":
            return group in cls.ITIN_GROUPS
        return not (area in ("000", "666") or group == "00" or serial == "0000" or area + group + serial in cls.INVALID)

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        (_, sep), (_, bare) = self.compiled
        for m in sep.finditer(text):
            if self.valid(m.group(1), m.group(3), m.group(4)):
                out.append(Span(m.start(), m.end(), "ssn", self.PRIORITY))
        for m in bare.finditer(text):
            if context_before(lower, m.start(), self.CONTEXT, 30) and self.valid(m.group(1), m.group(3), m.group(4)):
                out.append(Span(m.start(), m.end(), "ssn", self.PRIORITY))


class PhoneDetector(Detector):
    """North American and international phone numbers; ``fax`` when a fax cue precedes."""

    KINDS = ("phone", "fax")
    MIN_DIGITS = 7
    PRIORITY = 20
    PATTERNS = (
        Pattern(
            "nanp",
            r"(?<![\w.+-])(?:\+?1[\s.-]?)?(?:\(\s*[2-9]\d\d\s*\)|[2-9]\d\d)[\s.-]?\d{3}[\s.-]?\d{4}"
            r"(?:\s*(?:x|ext\.?|extension)\s*\d{1,5})?(?![\w-]|\.\d)",
        ),
        Pattern("local", r"(?<![\w.+-])[2-9]\d\d[-.]\d{4}(?![\w-]|\.\d)"),
        Pattern("international", r"(?<![\w.+-])\+[2-9]\d{0,2}(?:[\s.-]?\(?\d{1,4}\)?){2,5}(?![\w-]|\.\d)"),
    )
    FAX = re.compile(r"\bfax(?:\s*(?:number|no|num|#))?\b")
    _END = r"(?:$|[^\w.-]|\.$|\.[^\d]|x|e)"  # the end look-ahead, or an extension
    _SEP = rf"(?:{WS}|[.-])?"
    TRIGGERS = (
        rf"(?:^|[^\w.+-])(?:\+?1{_SEP})?(?:\({WS}*[2-9]\d\d{WS}*\)|[2-9]\d\d){_SEP}\d{{3}}{_SEP}\d{{4}}{_END}",
        rf"(?:^|[^\w.+-])[2-9]\d\d[-.]\d{{4}}{_END}",
        r"(?:^|[^\w.+-])\+[2-9]",
    )
    LAST_RUNS = frozenset({4, 7, 10, 11})
    # how every NANP number (area code digits or ``)``, 3 digits, 4 digits) and local number ends
    TAIL = re.compile(r"[\d)][\s.-]?\d{3}[\s.-]?\d{4}|\d{3}[-.]\d{4}")

    def prefilter(self, text: str, lower: str, words: list[str], runs: frozenset[int]) -> bool:
        """A NANP or local number ends in a bounded digit run of 4 (after a separator), 7 (ddd-dddd
        after a separator), 10 or 11 (all joined), after 3 digits; an international one starts with ``+``.
        """
        return "+" in text or (not self.LAST_RUNS.isdisjoint(runs) and self.TAIL.search(text) is not None)

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        (_, nanp), (_, local), (_, international) = self.compiled
        fax = "fax" in lower  # the fax cue is tried only when the word occurs at all
        rxs = [nanp]
        if "-" in text or "." in text:
            rxs.append(local)  # its separator is one of them
        if "+" in text:
            rxs.append(international)
        for rx in rxs:
            for m in rx.finditer(text):
                start = m.start()
                if rx is international and not 8 <= sum(map(str.isdigit, m.group())) <= 15:
                    continue
                kind = "fax" if fax and context_before(lower, start, self.FAX, 20) else "phone"
                out.append(Span(start, m.end(), kind, self.PRIORITY))


class NationalPhoneDetector(Detector):
    """Telephone numbers in national forms outside North America: the trunk prefix ``0`` and an area code
    from 1-9 (``00`` dials abroad), bracketed or not, 9-12 digits in all with a separator (UK ``020 7946
    0958``, DE ``030 12345678``, FR ``01 23 45 67 89``, IT, NL, IN, AU, JP...); Spain's 9 digits from 6-9
    in groups (its plan has no trunk prefix). A national form is weaker evidence than a cue: a cued number of
    the same span keeps its type (``NATIONAL_PRIORITY``); joined digits are left to the long-number detector
    (an ``id``), and SSN and ZIP+4 shapes to theirs."""

    KINDS = ("phone", "fax")
    MIN_DIGITS = 9
    PRIORITY = 38
    PATTERNS = (
        Pattern(
            "trunk",
            r"(?<![\w.+/-])(?:\(0[1-9]\d{0,3}\)|0[1-9]\d{0,3})(?:[ ./-]?\d{2,8}){1,4}(?![\w-]|[./]\d)",
        ),
        Pattern(
            "es",
            r"(?<![\w.+-])[6-9]\d\d(?:([ .-])\d\d\d\1\d\d\d|([ .-])\d\d\2\d\d\2\d\d)(?![\w-]|\.\d)",
        ),
    )
    # where a trunk form (``0`` and a digit 1-9, maybe after ``(``) or a Spanish one can start. Each scan starts
    # with a literal or a small character class, which ``re`` skips ahead to in C, and checks the character before
    # by a look-behind after it: a scan that starts with a look-behind is tried at every position (3x slower).
    # ``(0`` passes whatever comes before the bracket: a little looser than the pattern, still a necessary condition
    TRUNK_GATE = re.compile(r"0(?<![\w.+/-]0)[1-9]")
    ES_GATE = re.compile(r"[6-9](?<![\w.+-][6-9])\d\d[ .-]\d\d")
    # a trunk form's start, a separator after it (a value of digits alone is left); a Spanish number
    TRIGGERS = (
        r"(?:^|[^\w.+/-])(?:\(0[1-9]\d{0,3}\)|0[1-9]\d*[ ./-]\d\d)",
        r"(?:^|[^\w.+-])[6-9]\d\d(?:[ .-]\d\d\d[ .-]\d\d\d|[ .-]\d\d[ .-]\d\d[ .-]\d\d)",
    )
    NOT_NATIONAL = re.compile(r"\d{3}([-. ])\d{2}\1\d{4}|\d{5}-\d{4}")  # SSN and ZIP+4 shapes
    FAX = PhoneDetector.FAX

    def prefilter(self, text: str, lower: str, words: list[str], runs: frozenset[int]) -> bool:
        """A trunk ``0`` and a digit 1-9 not inside a word or number (``(0`` too), or the start of a Spanish number
        (3 digits from 6-9, a separator, 2 digits)."""
        return ("0" in lower and self.TRUNK_GATE.search(lower) is not None) or self.ES_GATE.search(lower) is not None

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        (_, trunk), (_, spain) = self.compiled
        fax = "fax" in lower
        for rx in (trunk, spain):
            for m in rx.finditer(text):
                value = m.group()
                if rx is trunk and (
                    value.isdigit()
                    or not 9 <= sum(map(str.isdigit, value)) <= 12
                    or self.NOT_NATIONAL.fullmatch(value) is not None
                ):
                    continue
                kind = "fax" if fax and context_before(lower, m.start(), self.FAX, 20) else "phone"
                out.append(Span(m.start(), m.end(), kind, self.PRIORITY))


class CardDetector(Detector):
    """Payment card numbers: 13-19 digits in groups, issuer prefix and Luhn checksum; or 13-19 digits next
    to a card word (``visa``, ``credit card``) whatever the prefix and checksum: a mistyped card number is
    still an account number."""

    KINDS = ("card", "device")
    MIN_DIGITS = 13
    PRIORITY = 15
    PATTERNS = (Pattern("digits", r"(?<![\w.-])\d(?:[ -]?\d){12,18}(?![\w-]|\.\d)"),)
    TRIGGERS = (r"\d(?:[ -]?\d){12}",)
    PREFIX = re.compile(r"4|5[1-5]|2(?:2[2-9]|[3-6]\d|7[01]|720)|3[47]|6(?:011|5|4[4-9])|3(?:0[0-5]|[68])|35")

    CARD_WORD = r"(?:visa|master\s?card|amex|american\s+express|discover|diners|jcb|maestro|credit|debit|card|cc)\b"
    BEFORE = re.compile(r"\b" + CARD_WORD)
    AFTER = re.compile(r"[\s,]*" + CARD_WORD)

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        for m in self.compiled[0][1].finditer(text):
            digits = _NON_DIGIT.sub("", m.group())
            if luhn_ok(digits):
                if len(digits) == 15 and not digits.startswith(("34", "37")) and " " not in m.group():
                    out.append(Span(m.start(), m.end(), "device", self.PRIORITY))  # IMEI: 15 digits, Luhn
                    continue
                if self.PREFIX.match(digits):
                    out.append(Span(m.start(), m.end(), "card", self.PRIORITY))
                    continue
            if self.BEFORE.search(lower, max(0, m.start() - 24), m.start()) or self.AFTER.match(lower, m.end()):
                out.append(Span(m.start(), m.end(), "card", self.PRIORITY))


class ZipDetector(Detector):
    """5-digit ZIP and ZIP+4, unless the number reads as money, a quantity or a model number."""

    KINDS = ("zip",)
    MIN_DIGITS = 5
    RUNS = frozenset({5})  # the 5 digits are a bounded run (the whole pre-check)
    PRIORITY = 40
    PATTERNS = (Pattern("zip", r"(?<![\w$#.,/:-])(\d{5})(?:-(\d{4}))?(?![\w%/:-]|[.,]\d)"),)
    TRIGGERS = (r"(?:^|[^\w$#.,/:-])\d{5}(?:[^\w]|$)",)
    BEFORE = re.compile(
        r"(?:\$|#|\b(?:no|model|part|item|sku|page|pages|p|vol|room|rm|flight|route|rte|hwy|highway|i|interstate|"
        r"apt|suite|ste|unit|version|v|ver|build|case|order|invoice|ticket|price|for|over|under|about|sec|section|"
        r"code|statute|rule|form|chapter|ch|art|article|\u00a7)\.?)\s*$"
    )
    AFTER = re.compile(
        r"\s*(?:miles?|mi|km|kilometers?|feet|ft|foot|sq|square|acres?|dollars?|usd|k|lbs?|pounds?|kg|btu|rpm|mah|"
        r"mhz|ghz|watts?|w|volts?|v|gb|mb|bc|ad|bce|yen|euros?|people|calories|points|words|hours|years|b\.c)\b"
    )
    ZIP_CUE = re.compile(r"\bzip(?:\s*code)?\s*:?\s*$|\bzipcode\s*:?\s*$")

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        for m in self.compiled[0][1].finditer(text):
            z = m.group(1)
            head = lower[max(0, m.start() - 14) : m.start()]
            cue = self.ZIP_CUE.search(head) is not None
            if not cue:
                if z.startswith("000") or (z.endswith("000") and m.group(2) is None):
                    continue
                if self.BEFORE.search(head) or self.AFTER.match(lower, m.end()):
                    continue
            out.append(Span(m.start(), m.end(), "zip", self.PRIORITY, general=zip3(z)))


class LongNumberDetector(Detector):
    """Any other unique identifying number: 9+ digits not claimed by a more specific detector."""

    KINDS = ("id",)
    MIN_DIGITS = 8
    PRIORITY = 90
    # a match is a whole run of word characters and dashes (bounded by look-arounds on both sides: ``[\w.-]`` or
    # ``[\w-]`` before, ``[\w-]`` after) with 9+ digits (digits and dashes) or 8+ (the mixed form)
    TOKEN_DIGITS = 8
    PATTERNS = (
        Pattern(
            "long",
            r"(?<![\w.-])(?:\d{9,}|\d(?:-?\d){9,})(?![\w-]|\.\d)"
            r"|(?<![\w-])(?=[0-9-]*[a-z])(?=(?:[a-z-]*\d){8})[a-z0-9-]{9,}(?![\w-])",
        ),
    )

    # 9 joined digits, 10 with dashes, 8 in a run of letters, digits and dashes (the mixed form)
    TRIGGERS = (r"\d{9}", r"\d(?:-?\d){9}", r"\d(?:[a-z-]*\d){7}")

    def __init__(self) -> None:
        super().__init__()
        long_digits, mixed = self.PATTERNS[0].regex.split("|(?<![\\w-])(?=[0-9-]*[a-z])", 1)
        self.digits_only = re.compile(long_digits, self.FLAGS)
        self.mixed = re.compile("(?<![\\w-])(?=[0-9-]*[a-z])" + mixed, self.FLAGS)
        self.mixed_ascii = ascii_variant(self.mixed)
        # a letter touching a digit (``[a-z]\d|\d[a-z]``), written to start with the digit: faster in ``re``
        self.mixed_gate = re.compile(r"\d(?:(?<=[a-z]\d)|[a-z])")

    def prefilter(self, text: str, lower: str, words: list[str], runs: frozenset[int]) -> bool:
        """9+ joined digits, 10+ digits with dashes, or letters touching digits (the mixed form)."""
        return max(runs) >= 9 or ("-" in text and _digit_count(text) >= 10) or self.mixed_gate.search(lower) is not None

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        matches = list(self.digits_only.finditer(lower))
        if self.mixed_gate.search(lower):
            matches += (self.mixed_ascii if lower.isascii() else self.mixed).finditer(lower)
        for m in matches:
            if m.end() - m.start() >= 13:  # an ISBN-13 has 13 digits
                digits = _NON_DIGIT.sub("", m.group())
                if len(digits) == 13 and digits.startswith(("978", "979")) and _isbn13_ok(digits):
                    continue  # a book, not a person
            out.append(Span(m.start(), m.end(), "id", self.PRIORITY))


def _isbn13_ok(d: str) -> bool:
    return sum((1 if i % 2 == 0 else 3) * int(c) for i, c in enumerate(d)) % 10 == 0
