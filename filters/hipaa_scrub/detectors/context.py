"""Numbers that are identifiers because of the words before them: medical record, health plan,
account, certificate/license, device serial and vehicle plate numbers; and VINs (check digit).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from filters.hipaa_scrub.detectors import Detector, Pattern, Span, ascii_variant, scan_from_starts

_NUM = r"(?:\s*(?:number|numbers|num|no\.?|nbr|#|id|code))?\s*(?:is|=|:|#)?\s*"
VALUE = r"(?P<v>(?=[a-z0-9-]*\d[a-z0-9-]*\d)[a-z0-9](?:[a-z0-9]|-(?=[a-z0-9])){3,24})(?![\w-])"


CUE_STARTS = (
    "plate|tag|lic|mrn|med|patient|chart|hospital|member|subscriber|polic|health|insurance|group|beneficiary|"
    "hicn|mbi|claim|acc|a/c|bank|routing|aba|iban|customer|loan|card|driver|dl|cert|npi|dea|permit|passport|"
    "registration|badge|serial|s/n|sn|imei|meid|esn|device|udid|model"
)
"""Prefixes of every cue of :class:`ContextNumberDetector` (``lic`` covers license, licence, lic)."""


def _cue(words: str) -> str:
    return rf"(?<![\w])(?:{words}){_NUM}{VALUE}"


class ContextNumberDetector(Detector):
    """An alphanumeric value with 2+ digits right after an identifier cue (``mrn 00123456``)."""

    KINDS = ("mrn", "health_plan", "account", "license", "device", "vehicle")
    MIN_DIGITS = 2
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
        ]
    )
    SKIP = re.compile(r"^(?:19|20)\d\d$|^\d{1,3}$")

    def prefilter(self, text: str, lower: str, words: list[str], runs: frozenset[int]) -> bool:
        """A cue word, or ``a/c`` / ``s/n`` (one-letter words are too common in codes to gate on)."""
        return not self.GATE_WORDS.isdisjoint(words) or "a/c" in lower or "s/n" in lower

    def __init__(self) -> None:
        super().__init__()
        # one scan for all cues: the alternatives become named groups (kind_v holds the value)
        parts = [p.regex.replace("(?P<v>", f"(?P<{p.name}_v>") for p in self.PATTERNS]
        self.combined = re.compile("|".join(f"(?:{r})" for r in parts), self.FLAGS)
        # every cue starts with one of these: a cheap scan finds the places worth trying the full pattern
        self.starts = re.compile(rf"(?<![\w])(?:{CUE_STARTS})", self.FLAGS)
        self.ascii = (ascii_variant(self.starts), ascii_variant(self.combined))

    def matches(self, lower: str) -> Iterator[re.Match[str]]:
        """The matches of ``combined.finditer(lower)``, trying the full pattern only where a cue starts."""
        if lower.isascii():
            return scan_from_starts(*self.ascii, lower)
        return scan_from_starts(self.starts, self.combined, lower)

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        for m in self.matches(lower):
            group = m.lastgroup
            if group is None:
                continue
            v = m.group(group)
            if self.SKIP.match(v) or (group != "vehicle_v" and sum(map(str.isdigit, v)) < 3):
                continue  # a year, a small number, "49cc": plates may be short, other numbers are not
            out.append(Span(m.start(group), m.end(group), group[:-2], self.PRIORITY))


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
    """17-character vehicle identification numbers: valid check digit, or a ``vin`` cue."""

    KINDS = ("vin",)
    MIN_DIGITS = 3
    PRIORITY = 14
    PATTERNS = (Pattern("vin", r"(?<![a-z0-9])(?=[a-z0-9]*\d)(?=[0-9]*[a-z])[a-hj-npr-z0-9]{17}(?![a-z0-9])"),)
    CUE = re.compile(r"\bvin\b")
    RUN17 = re.compile(r"(?<![a-z0-9])[a-z0-9]{17}(?![a-z0-9])", re.IGNORECASE)

    RUN17_ASCII = ascii_variant(RUN17)

    def prefilter(self, text: str, lower: str, words: list[str], runs: frozenset[int]) -> bool:
        """A VIN is a bounded run of 17 letters and digits."""
        return len(lower) >= 17 and (self.RUN17_ASCII if lower.isascii() else self.RUN17).search(lower) is not None

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        for m in (self.compiled_ascii if lower.isascii() else self.compiled)[0][1].finditer(lower):
            if vin_check_ok(m.group()) or self.CUE.search(lower, max(0, m.start() - 16), m.start()):
                out.append(Span(m.start(), m.end(), "vin", self.PRIORITY))
