"""Identifiers left in a log: the hipaa_scrub detectors over every query, counts per type (never a value).

The detectors run with the scrubber's default policies (every type wanted), on the query text, and on every
other field of a record that plays no role (:class:`FieldScan`: a JSON key, a TSV column, an access log's
referer or user agent): an application's new field (an address, an e-mail) is found by name. Each distinct
text is checked once and its findings weighted by how often it occurs.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote_plus

from sidecar.api import SchemaConfig


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


ORIGINS = ("own", "copied", "introduced")
"""Where a released identifier's text comes from: the same user's original queries (a leak about them),
another user's only (copied between users, e.g. by aggregation), or no original query (the protection drew
it, e.g. a WordNet person name a DP mechanism picked: not a disclosure about the user)."""


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def identifier_origins(original: Iterable[tuple[str, str]], protected: Iterable[tuple[str, str]]) -> dict[str, Any]:
    """Protected (user, query) records holding an identifier, by the identifier's origin (:data:`ORIGINS`).

    An identifier is a detected span's text (lower case, spaces collapsed); it comes from a user's queries when
    the detectors found the same text in one of them (a word the detectors do not call an identifier in the
    user's own query, "lincoln" of a car model, is not that user's identifier). A record counts once, under
    its most serious origin (own, then copied, then introduced). Protected users must be original ids (kept,
    or linked by the linkage attack). Counts per origin and type only, never a value.
    """
    from filters.hipaa_scrub.scrubber import Scrubber

    scrubber = Scrubber()
    spans: dict[str, list[tuple[str, str]]] = {}

    def found(query: str) -> list[tuple[str, str]]:
        if query not in spans:
            spans[query] = [(s.kind, _norm(query[s.start : s.end])) for s in scrubber.detect(query)]
        return spans[query]

    owners: dict[str, set[str]] = {}
    for user, query in original:
        for _, value in found(query) if query.strip() else ():
            owners.setdefault(value, set()).add(user)
    records: Counter[str] = Counter()
    by_type: dict[str, Counter[str]] = {o: Counter() for o in ORIGINS}
    for user, query in protected:
        hits = found(query) if query.strip() else []
        origins = []
        for kind, value in hits:
            who = owners.get(value, set())
            origin = "own" if user in who else "copied" if who else "introduced"
            origins.append(origin)
            by_type[origin][kind] += 1
        if origins:
            records[min(origins, key=ORIGINS.index)] += 1
    return {
        "records_by_origin": {o: records[o] for o in ORIGINS},
        "found_by_origin": {o: dict(sorted(by_type[o].items())) for o in ORIGINS},
    }


class FieldScan:
    """The non-role fields of a log's records (fed by :func:`sidecar.tools.audit.logs.read_log`), then checked
    by the detectors: records with an identifier in a field, by field name and identifier type (counts only)."""

    def __init__(self) -> None:
        self.values: Counter[tuple[str, str]] = Counter()

    def add(self, name: str, value: str) -> None:
        """One field of the current record (a field's value counted once a record)."""
        if value.strip() and value != "-":
            self.values[(name, value)] += 1

    def counts(
        self, records: int, pseudonymous: frozenset[str] = frozenset(), original: FieldScan | None = None
    ) -> dict[str, Any]:
        """``records_checked`` (``records``, the log's), ``fields_checked`` (field names seen),
        ``field_values_with_identifier`` (fields holding one, counted once a record and field), ``by_field``: field
        -> type -> records.

        ``pseudonymous``: fields the config pseudonymizes (``hash``, ``ip_encrypt``): a detection there is a
        keyed pseudonym (a hex token, an address), counted in ``pseudonyms`` by field, unless the same value is
        in that field of the ``original`` log (then the policy did not change it: a leak like any other)."""
        from filters.hipaa_scrub.scrubber import Scrubber

        scrubber = Scrubber()
        by_field: dict[str, Counter[str]] = {}
        pseudonyms: Counter[str] = Counter()
        names: set[str] = set()
        with_any = 0
        for (name, value), n in self.values.items():
            names.add(name)
            kinds = {span.kind for span in scrubber.detect(_url_decoded(value))}
            if kinds and name in pseudonymous and (original is None or (name, value) not in original.values):
                pseudonyms[name] += n
            elif kinds:
                with_any += n
                found = by_field.setdefault(name, Counter())
                for kind in kinds:
                    found[kind] += n
        return {
            "records_checked": records,
            "fields_checked": sorted(names),
            "field_values_with_identifier": with_any,
            "by_field": {f: dict(sorted(c.items())) for f, c in sorted(by_field.items())},
            "pseudonyms": dict(sorted(pseudonyms.items())),
        }


def _url_decoded(value: str) -> str:
    """A field's text with URL encoding undone (a referer's ``%40``, ``+``), as a reader of the log would."""
    return unquote_plus(value) if "%" in value or "+" in value else value


def pseudonymous_fields(schema: SchemaConfig | None) -> frozenset[str]:
    """The fields a schema's policies turn into keyed pseudonyms (``hash``, ``ip_encrypt``)."""
    policies = (schema.fields or {}) if schema is not None else {}
    return frozenset(
        name for name, p in policies.items() if (p if isinstance(p, str) else p.policy) in ("hash", "ip_encrypt")
    )
