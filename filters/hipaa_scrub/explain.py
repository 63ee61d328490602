"""``querylog scrub --explain``: each finding with the rule that made it, its confidence and the operator applied.

Records hold types, offsets, names, scores and policies, never the values: they are for a person checking the
scrubber, written to stdout, never logged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from filters.hipaa_scrub.detectors import Span

if TYPE_CHECKING:
    from filters.hipaa_scrub.scrubber import Scrubber

MAX_PASSES = 64


def detect_attributed(scrubber: Scrubber, text: str) -> list[tuple[Span, str]]:
    """:meth:`Scrubber.detect` without pre-checks (the same spans: pre-checks are necessary conditions), each kept
    span with the name of its detector (a custom recognizer's own name)."""
    from filters.hipaa_scrub.scrubber import resolve

    lower = text.lower()
    detectors = list(scrubber.alpha)
    if not text.replace(" ", "").isalpha():
        detectors += scrubber.digit
        if "@" in text:
            detectors += scrubber.at
        if "." in text or ":" in text or "-" in text:
            detectors += scrubber.net
    found: list[Span] = []
    source: dict[int, str] = {}
    for d in detectors:
        before = len(found)
        d.detect(text, lower, found)
        spec = getattr(d, "spec", None)
        for span in found[before:]:
            source[id(span)] = spec.name if spec is not None else type(d).__name__
    found = scrubber.screen(lower, found)
    kept = found if len(found) <= 1 else resolve(found)
    return [(span, source[id(span)]) for span in kept]


def explain(scrubber: Scrubber, text: str) -> tuple[str, list[dict[str, object]]]:
    """The scrubbed text (as :meth:`Scrubber.scrub` gives it) and one record per finding: ``type``, ``start``,
    ``end``, ``detector``, ``score``, ``policy`` (the operator applied) and ``pass``. Spans of pass 1 index
    ``text``; a later pass (a rescan after a change) indexes the text as the previous pass left it."""
    findings: list[dict[str, object]] = []
    for n in range(min(MAX_PASSES, text.count(" ") + 2)):
        attributed = detect_attributed(scrubber, text)
        if not attributed:
            break
        for span, detector in attributed:
            findings.append(
                {
                    "type": span.kind,
                    "start": span.start,
                    "end": span.end,
                    "detector": detector,
                    "score": span.score,
                    "policy": scrubber.policies[span.kind],
                    "pass": n + 1,
                }
            )
        new = scrubber.apply(text, [span for span, _ in attributed], {})
        if new == text:
            break
        text = new
        if not text or text.isspace():
            break
    return text, findings
