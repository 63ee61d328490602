"""Identifiers left in a log: the hipaa_scrub detectors over every query, counts per type (never a value).

The detectors run with the scrubber's default policies (every type wanted), on the query text only: the
other fields (a clicked URL, a time) are not looked at. Each distinct query is checked once and its
findings weighted by how often it occurs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any


def identifier_counts(queries: Iterable[str]) -> dict[str, Any]:
    """Per identifier type: detections and records with at least one; records checked and records with any."""
    from filters.hipaa_scrub.scrubber import Scrubber

    scrubber = Scrubber()
    texts = Counter(q for q in queries if q.strip())
    found: Counter[str] = Counter()
    records: Counter[str] = Counter()
    with_any = 0
    for text, n in texts.items():
        kinds = Counter(span.kind for span in scrubber.detect(text))
        if kinds:
            with_any += n
        for kind, c in kinds.items():
            found[kind] += c * n
            records[kind] += n
    return {
        "records_checked": sum(texts.values()),
        "records_with_identifier": with_any,
        "found": dict(sorted(found.items())),
        "records_by_type": dict(sorted(records.items())),
    }
