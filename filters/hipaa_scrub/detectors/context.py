"""Numbers that are identifiers because of the words before them: medical record, health plan,
account, certificate/license, device serial and vehicle plate numbers; and VINs (check digit).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from filters.hipaa_scrub.detectors import PRECHECKS, Detector, Pattern, Span, ascii_variant, scan_from_starts

_NUM = (
    r"(?:\s*(?:number|numbers|num|no\.?|nbr|#|id|code))?"
    # a few words may come between the cue and its value: "account number for my checking 1234-567",
    # "member id on the card xk8842" (a preposition, then one or two words)
    r"(?:\s+(?:for|of|on|from|at|with|in|to)(?:\s+[a-z']+){1,2}?)?"
    r"\s*(?:is|=|:|#)?\s*"
)
VALUE = (
    r"(?P<v>\d{2,4}(?: \d{2,4}){1,4}(?![\w-])"  # digit groups: "123 456 789" (7+ digits, checked at detect)
    r"|(?=[a-z0-9-]*\d)[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){3,24}(?![\w-]))"
)


CUE_STARTS = (
    "plate|tag|lic|mrn|med|patient|chart|hospital|member|subscriber|polic|health|insurance|group|beneficiary|"
    "hicn|mbi|claim|acc|a/c|bank|routing|aba|iban|customer|loan|card|driver|dl|cert|npi|dea|permit|passport|"
    "registration|badge|serial|s/n|sn|imei|meid|esn|device|udid|model"
)
"""Prefixes of every cue of :class:`ContextNumberDetector` (``lic`` covers license, licence, lic)."""


def _cue(words: str) -> str:
    return rf"(?<![\w])(?:{words}){_NUM}{VALUE}"


class ContextNumberDetector(Detector):
    """A value right after an identifier cue (``mrn 00123456``), or after the cue, a colon or a preposition
    and one or two words (``account number for my checking 4471-2233``): 3+ digits, a 6+ character code mixing
    letters and digits (``member id: 4hhk4ldmzsz``), digit groups of 7+ digits (``123 456 789``); plates 2+
    digits."""

    KINDS = ("mrn", "health_plan", "account", "license", "device", "vehicle")
    MIN_DIGITS = 1
    PRIORITY = 35
    PATTERNS = (
        Pattern("vehicle", _cue(r"license\s+plate|licence\s+plate|plate|tag")),
        Pattern("mrn", _cue(r"mrn|medical\s+record|med\s*rec|patient|chart|hospital\s+(?:number|id)")),
        Pattern(
            "health_plan",
            _cue(
                r"member|subscriber|policy|policyholder|health\s+plan|insurance|insurance\s+card|group|medicaid|"
                r"medicare|beneficiary|hicn|mbi|claim"
            ),
        ),
        Pattern("account", _cue(r"account|acct|acc|a/c|bank\s+account|routing|aba|iban|customer|loan|card")),
        Pattern(
            "license",
            _cue(
                r"driver'?s?\s+licen[cs]e|drivers?\s+lic|licen[cs]e|lic|dl|certificate|cert|npi|dea|permit|"
                r"passport|registration|badge"
            ),
        ),
        Pattern("device", _cue(r"serial|s/n|sn|imei|meid|esn|device|udid|model\s+serial")),
    )
    GATE_WORDS = frozenset(
        [
            "plate",
            "tag",
            "mrn",
            "medical",
            "med",
            "patient",
            "chart",
            "hospital",
            "member",
            "subscriber",
            "policy",
            "policyholder",
            "health",
            "plan",
            "insurance",
            "group",
            "medicaid",
            "medicare",
            "beneficiary",
            "hicn",
            "mbi",
            "claim",
            "account",
            "acct",
            "acc",
            "bank",
            "routing",
            "aba",
            "iban",
            "customer",
            "loan",
            "card",
            "driver",
            "drivers",
            "license",
            "licence",
            "lic",
            "dl",
            "certificate",
            "cert",
            "npi",
            "dea",
            "permit",
            "passport",
            "registration",
            "badge",
            "serial",
            "sn",
            "imei",
            "meid",
            "esn",
            "device",
            "udid",
            "model",
            # the ``c`` of ``a/c`` and the ``n`` of ``s/n``: with them the cue words are the whole pre-check, a
            # set test the scrubber makes in C (a code with a lone ``c`` or ``n`` runs ``detect`` for nothing)
            "c",
            "n",
        ]
    )
    SKIP = re.compile(r"^(?:19|20)\d\d$|^\d{1,3}$")
    TRIGGERS = (r"\d",)  # every value has a digit; the cue words are checked apart (``GATE_WORDS``)

    @staticmethod
    def code(v: str) -> bool:
        """A value of 6+ characters mixing letters and digits (``xk8842``, ``4hhk4ldmzsz``): a code, even with
        fewer than 3 digits."""
        return len(v) >= 6 and not v.isdigit() and v.isalnum()

    def __init__(self) -> None:
        super().__init__()
        # one scan for all cues: the alternatives become named groups (kind_v holds the value)
        parts = [p.regex.replace("(?P<v>", f"(?P<{p.name}_v>") for p in self.PATTERNS]
        self.combined = re.compile("|".join(f"(?:{r})" for r in parts), self.FLAGS)
        # every cue starts with one of these: a cheap scan finds the places worth trying the full pattern
        self.starts = re.compile(rf"(?<![\w])(?:{CUE_STARTS})", self.FLAGS)
        self.ascii = (ascii_variant(self.starts), ascii_variant(self.combined))

    def matches(self, lower: str) -> list[re.Match[str]]:
        """The matches of ``combined.finditer(lower)``, trying the full pattern only where a cue starts."""
        if lower.isascii():
            return scan_from_starts(*self.ascii, lower)
        return scan_from_starts(self.starts, self.combined, lower)

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        if lower.isascii():  # the usual case: scan and value checks in one loop (compiled when built)
            for start, end, kind in cue_values(*self.ascii, lower, self.SKIP):
                out.append(Span(start, end, kind, self.PRIORITY))
            return
        for cued in self.matches(lower):
            self._take(cued, out)

    def _take(self, m: re.Match[str], out: list[Span]) -> None:
        """Append the span of a cue match's value unless the value is too small to be an identifier."""
        group = m.lastgroup
        if group is None:
            return
        v = m.group(group)
        digits = sum(map(str.isdigit, v))
        if self.SKIP.match(v) or (digits < 2 if group == "vehicle_v" else digits < 3 and not self.code(v)):
            return  # a year, a small number, "49cc": plates may be short, other numbers are not
        if " " in v and digits < 7:
            return  # digit groups make one number only when long enough ("123 456 789")
        out.append(Span(m.start(group), m.end(group), group[:-2], self.PRIORITY))


cue_values: Callable[[re.Pattern[str], re.Pattern[str], str, re.Pattern[str]], list[tuple[int, int, str]]] = (
    PRECHECKS.cue_values
)

_TRANSLIT = {
    **{str(d): d for d in range(10)},
    **dict(zip("ABCDEFGH", range(1, 9))),
    **dict(zip("JKLMN", range(1, 6))),
    "P": 7,
    "R": 9,
    **dict(zip("STUVWXYZ", range(2, 10))),
}
_WEIGHTS = (8, 7, 6, 5, 4, 3, 2, 10, 0, 9, 8, 7, 6, 5, 4, 3, 2)


def vin_check_ok(vin: str) -> bool:
    """The North American VIN check digit (position 9)."""
    vin = vin.upper()
    total = sum(_TRANSLIT[c] * w for c, w in zip(vin, _WEIGHTS))
    check = total % 11
    return vin[8] == ("X" if check == 10 else str(check))


class VinDetector(Detector):
    """17-character vehicle identification numbers (ISO 3779: letters but I, O, Q, and digits) with 3+
    digits and a valid check digit. After a ``vin`` cue any check digit will do: :class:`CuedVinDetector`."""

    KINDS = ("vin",)
    MIN_DIGITS = 3
    PRIORITY = 14
    PATTERNS = (Pattern("vin", r"(?<![a-z0-9])(?=[a-z0-9]*\d)(?=[0-9]*[a-z])[a-hj-npr-z0-9]{17}(?![a-z0-9])"),)
    CUE = re.compile(r"\bvin\b")
    TRIGGERS = (r"[a-hj-npr-z0-9]{17}",)
    RUN17 = re.compile(r"(?<![a-z0-9])[a-z0-9]{17}(?![a-z0-9])", re.IGNORECASE)

    RUN17_ASCII = ascii_variant(RUN17)

    def prefilter(self, text: str, lower: str, words: list[str], runs: frozenset[int]) -> bool:
        """A VIN is a bounded run of 17 letters and digits."""
        return len(lower) >= 17 and (self.RUN17_ASCII if lower.isascii() else self.RUN17).search(lower) is not None

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        for m in (self.compiled_ascii if lower.isascii() else self.compiled)[0][1].finditer(lower):
            if sum(map(str.isdigit, m.group())) >= 3 and vin_check_ok(m.group()):
                out.append(Span(m.start(), m.end(), "vin", self.PRIORITY))


class CuedVinDetector(VinDetector):
    """A 17-character VIN with a digit after a ``vin`` cue, whatever its check digit (check digits are a
    North American rule, and a mistyped VIN still identifies a vehicle)."""

    MIN_DIGITS = 1
    GATE_WORDS = frozenset({"vin"})
    TRIGGERS = VinDetector.TRIGGERS  # the cue word is checked apart (``GATE_WORDS``)
    prefilter = Detector.prefilter  # the cue word is the whole pre-check (a set test the scrubber makes)

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        for m in (self.compiled_ascii if lower.isascii() else self.compiled)[0][1].finditer(lower):
            if self.CUE.search(lower, max(0, m.start() - 16), m.start()):
                out.append(Span(m.start(), m.end(), "vin", self.PRIORITY))


_MBI_LETTER = "[ac-hjkmnp-rt-y]"  # A-Z without S, L, O, I, B, Z
_MBI_ALNUM = "[ac-hjkmnp-rt-y0-9]"


class MbiDetector(Detector):
    """Medicare Beneficiary Identifiers (CMS MBI format): 11 characters, position 1 a digit 1-9, 2, 5, 8
    and 9 letters (no S, L, O, I, B, Z), 3 and 6 such a letter or a digit, 4, 7, 10 and 11 digits;
    printed with dashes after positions 4 and 7 or without, any case."""

    KINDS = ("health_plan",)
    MIN_DIGITS = 5
    # positions 10-11: a bounded run of 2 digits after the letter of position 9; position 1: a run of 1 digit (a
    # letter follows, and no word character or dash comes before)
    RUNS_ALL = frozenset({1, 2})
    PRIORITY = 16
    TRIGGERS = (rf"[1-9]{_MBI_LETTER}{_MBI_ALNUM}\d-?{_MBI_LETTER}{_MBI_ALNUM}\d-?{_MBI_LETTER}{_MBI_LETTER}\d\d",)
    PATTERNS = (
        Pattern(
            "mbi",
            rf"(?<![\w-])[1-9]{_MBI_LETTER}{_MBI_ALNUM}\d(-?){_MBI_LETTER}{_MBI_ALNUM}\d\1"
            rf"{_MBI_LETTER}{_MBI_LETTER}\d\d(?![\w-])",
        ),
    )

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        for m in (self.compiled_ascii if lower.isascii() else self.compiled)[0][1].finditer(lower):
            out.append(Span(m.start(), m.end(), "health_plan", self.PRIORITY))


class SerialDetector(Detector):
    """Serial numbers of mostly letters after a serial cue (``serial number xkcdqwpl``, ``s/n ab7cdefgh``):
    6-20 letters and digits that are not an English word (``serial number lookup`` stays). The cue is a whole
    word: ``snowboards`` is not ``sn`` + ``owboards``. Values with 3+ digits are :class:`ContextNumberDetector`'s."""

    KINDS = ("device",)
    NEEDS = "alpha"
    PRIORITY = 36
    PATTERNS = (
        Pattern(
            "serial",
            r"(?<![\w])(?:serial|s/n|sn)(?![a-z])(?:\s*(?:number|num|no\.?|nbr|#|code))?\s*(?:is|=|:|#)?\s*"
            r"(?P<v>[a-z0-9]{6,20})(?![\w-])",
        ),
    )

    def __init__(self, known_words: Mapping[str, float] | None = None) -> None:
        super().__init__()
        if known_words is None:
            from wordfreq import get_frequency_dict  # cached by wordfreq: the names data loads it anyway

            known_words = get_frequency_dict("en")
        self.known = known_words

    def trigger_words(self) -> frozenset[str]:
        """``serial``, ``sn``, or the ``s`` of ``s/n``."""
        return frozenset({"serial", "sn", "s"})

    def wants(self, lower: str, words: list[str]) -> bool:
        """A serial cue occurs."""
        return "serial" in lower or "s/n" in lower or "sn" in words

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        known = self.known
        for m in (self.compiled_ascii if lower.isascii() else self.compiled)[0][1].finditer(lower):
            v = m.group("v")
            if v.isdigit() or v in known:
                continue  # a plain number is not "mostly letters"; a word is a word
            out.append(Span(m.start("v"), m.end("v"), "device", self.PRIORITY))
