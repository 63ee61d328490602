"""Custom recognizers from the config, Presidio style: regular expressions with an optional checksum, a deny list,
context words that raise or lower the confidence, and a type (a built-in one or a new one) whose policy applies.

```yaml
recognizers:
  - name: employee_id
    type: employee_id          # a new type: policies.employee_id, thresholds.employee_id apply
    patterns: ['\\bemp-\\d{6}\\b']
    score: 0.5                 # confidence of a bare match
    context: [employee, badge] # within 5 words before or 2 after: + context_boost
    negative_context: [sample] # likewise: - context_boost
    context_boost: 0.35
  - name: iban
    type: account
    patterns: ['\\b[a-z]{2}\\d{2}(?: ?[a-z0-9]{4}){3,7}(?: ?[a-z0-9]{1,3})?\\b']
    validator: iban            # a match failing the checksum is no finding
    score: 0.9
  - name: codenames
    type: name
    deny_list: [project bluebird] # these words, whole, case-insensitive
```

Patterns run on the lowercased text, case-insensitively (``[A-Z]{3}`` still matches). A finding's confidence is
``score`` plus ``context_boost`` when a context word is near, minus it when a negative one is (clamped to 0..1);
``thresholds`` drops findings below their type's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from filters.hipaa_scrub.detectors import Detector, Span, luhn_ok
from sidecar.api import ConfigValueError, option

Validator = Literal["none", "luhn", "vin", "iban", "aba", "npi"]
VALIDATORS: tuple[str, ...] = ("none", "luhn", "vin", "iban", "aba", "npi")
TYPE_NAME = re.compile(r"[a-z][a-z0-9_]{0,31}")
CONTEXT_BEFORE, CONTEXT_AFTER = 5, 2
"""Words before and after a match in which a context word counts."""
_WORD = re.compile(r"[a-z0-9]+")
_VIN_VALUES = {
    **{str(d): d for d in range(10)},
    **dict(zip("abcdefghjklmnprstuvwxyz", (*range(1, 9), *range(1, 6), 7, 9, *range(2, 10)), strict=True)),
}
_VIN_WEIGHTS = (8, 7, 6, 5, 4, 3, 2, 10, 0, 9, 8, 7, 6, 5, 4, 3, 2)


def _digits(value: str) -> str:
    return "".join(c for c in value if c.isdigit())


def _vin(value: str) -> bool:
    v = "".join(c for c in value.lower() if c.isalnum())
    if len(v) != 17 or any(c not in _VIN_VALUES for c in v):
        return False
    rest = sum(_VIN_VALUES[c] * w for c, w in zip(v, _VIN_WEIGHTS, strict=True)) % 11
    return v[8] == ("x" if rest == 10 else str(rest))


def _iban(value: str) -> bool:
    """ISO 13616: move the first four characters to the end, letters as 10..35, the number mod 97 is 1."""
    v = "".join(c for c in value.upper() if c.isalnum())
    if not 15 <= len(v) <= 34 or not v[:2].isalpha() or not v[2:4].isdigit():
        return False
    return int("".join(str(int(c, 36)) for c in v[4:] + v[:4])) % 97 == 1


def _aba(value: str) -> bool:
    """ABA routing number: 9 digits, 3-7-1 weighted sum divisible by 10."""
    d = _digits(value)
    return len(d) == 9 and sum(int(c) * w for c, w in zip(d, (3, 7, 1) * 3, strict=True)) % 10 == 0


def _npi(value: str) -> bool:
    """US National Provider Identifier: 10 digits, Luhn over the prefix 80840 and the number."""
    d = _digits(value)
    return len(d) == 10 and luhn_ok("80840" + d)


CHECKS = {
    "luhn": lambda v: luhn_ok(_digits(v)) and len(_digits(v)) >= 2,
    "vin": _vin,
    "iban": _iban,
    "aba": _aba,
    "npi": _npi,
}


@dataclass(frozen=True)
class CustomRecognizer:
    """One recognizer: patterns and/or a deny list, a validator, a base score, context words."""

    name: str = option(doc="The recognizer's name (shown by `scrub --explain`).")
    type: str = option(doc="Type of its findings: a built-in type or a new one (letters, digits, _).")
    patterns: tuple[str, ...] = option(
        (), "Regular expressions (Python syntax), matched on the lowercased text, case-insensitively."
    )
    deny_list: tuple[str, ...] = option((), "Words or phrases that are always findings (whole words, any case).")
    validator: Validator = option("none", "Checksum a pattern match must pass: luhn, vin, iban, aba, npi, none.")
    score: float = option(0.8, "Confidence of a finding without context.", min=0.0, max=1.0)
    context: tuple[str, ...] = option((), "Words that raise the confidence when near a match.")
    negative_context: tuple[str, ...] = option((), "Words that lower the confidence when near a match.")
    context_boost: float = option(0.35, "How much a (negative) context word raises (lowers) it.", min=0.0, max=1.0)

    def __post_init__(self) -> None:
        if not TYPE_NAME.fullmatch(self.type):
            raise ConfigValueError("type", "a type is 1-32 lower-case letters, digits or _, starting with a letter")
        if not self.patterns and not self.deny_list:
            raise ConfigValueError("patterns", "a recognizer needs patterns or a deny_list")
        for i, pattern in enumerate(self.patterns):
            try:
                rx = re.compile(pattern)
            except re.error as exc:
                raise ConfigValueError(f"patterns[{i}]", f"not a regular expression: {exc}") from None
            if rx.search("") is not None:
                raise ConfigValueError(f"patterns[{i}]", "matches the empty text: it would find nothing useful")
        for i, word in enumerate(self.deny_list):
            if not word.strip():
                raise ConfigValueError(f"deny_list[{i}]", "must hold a word")


class CustomDetector(Detector):
    """Runs one :class:`CustomRecognizer` (every text: no pre-check)."""

    PRIORITY = 30

    def __init__(self, spec: CustomRecognizer) -> None:
        super().__init__()
        self.spec = spec
        self.rx = [re.compile(p, re.IGNORECASE) for p in spec.patterns]  # on lowercased text: [A-Z] too
        if spec.deny_list:
            words = sorted({" ".join(w.lower().split()) for w in spec.deny_list}, key=len, reverse=True)
            self.rx.append(
                re.compile(r"(?<!\w)(?:" + "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in words) + r")(?!\w)")
            )
        self.deny_index = len(spec.patterns)  # matches of rx[deny_index] skip the validator
        self.check = CHECKS.get(spec.validator)
        self.context = frozenset(w.lower() for w in spec.context)
        self.negative = frozenset(w.lower() for w in spec.negative_context)

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        spec = self.spec
        for i, rx in enumerate(self.rx):
            for m in rx.finditer(lower):
                if m.end() == m.start():
                    continue
                if self.check is not None and i < self.deny_index and not self.check(m.group()):
                    continue
                out.append(
                    Span(m.start(), m.end(), spec.type, self.PRIORITY, score=self._score(lower, m.start(), m.end()))
                )

    def _score(self, lower: str, start: int, end: int) -> float:
        score = self.spec.score
        if self.context or self.negative:
            near = set(_WORD.findall(lower, 0, start)[-CONTEXT_BEFORE:]) | set(
                _WORD.findall(lower, end)[:CONTEXT_AFTER]
            )
            if not self.context.isdisjoint(near):
                score += self.spec.context_boost
            if not self.negative.isdisjoint(near):
                score -= self.spec.context_boost
        return round(min(1.0, max(0.0, score)), 4)
