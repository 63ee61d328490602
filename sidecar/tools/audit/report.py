"""The audit: matcher, de-anonymizers, utility and microaggregation measures over two logs; JSON result.

The HTML page is :mod:`~sidecar.tools.audit.html` (re-exported here as :func:`render_html`), the verdicts
:mod:`~sidecar.tools.audit.verdicts`, the provenance (files, hashes, version)
:mod:`~sidecar.tools.audit.provenance`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from sidecar.codecs import SchemaConfig
from sidecar.tools.audit import deanon, linkage, matcher, measures_microagg, provenance, texts, utility
from sidecar.tools.audit.html import render_html
from sidecar.tools.audit.identifiers import FieldScan, identifier_counts, identifier_origins, pseudonymous_fields
from sidecar.tools.audit.logs import Record, empty_queries, read_log
from sidecar.tools.audit.verdicts import PAPER_BEST, verdict

Categorise = Callable[[list[str]], Sequence[str | tuple[str, ...] | None]]
"""Queries -> a category name, a category path L1..L5 (tuple) or None (uncategorisable), per query."""
UNKNOWN = "unknown"
__all__ = ["PAPER_BEST", "AuditInputError", "json_view", "render_html", "run_audit", "verdict"]


class AuditInputError(ValueError):
    """The logs cannot serve the audit asked for (the message names options, never values)."""


def classifier_categorise(kb_path: Path | None = None) -> Categorise:
    """The project's classifier (same knowledge base as the sidecar: paper 001's worst case)."""
    from knowledge.classifier import Classifier

    clf = Classifier.load(kb_path)
    many = getattr(clf, "classify_many", None)

    def categorise(queries: list[str]) -> list[str | None]:
        results = many(queries) if many is not None else [clf.classify(q) for q in queries]
        return [r.category if r is not None else None for r in results]

    return categorise


def classifier_paths(kb_path: Path | None = None) -> Categorise:
    """The project's classifier giving each query's category path L1..L5 (for SRP and the clusterings)."""
    from knowledge.classifier import Classifier

    clf = Classifier.load(kb_path)

    def paths(queries: list[str]) -> list[str | tuple[str, ...] | None]:
        return [r.path if r is not None else None for r in clf.classify_many(queries)]

    return paths


def paths_of(records: list[Record], categorise: Categorise, cache: dict[str, tuple[str, ...]]) -> list[tuple[str, ...]]:
    """The category path of each record's query (``()`` when uncategorisable; a plain category name is a
    one-level path); an empty query (nothing but spaces) gets ``()`` without asking ``categorise``, which
    may assume a query has a word."""
    for r in records:
        if r.query not in cache and not r.query.strip():
            cache[r.query] = ()
    todo = sorted({r.query for r in records if r.query not in cache})
    for i in range(0, len(todo), 5000):
        chunk = todo[i : i + 5000]
        for q, c in zip(chunk, categorise(chunk)):
            cache[q] = (c,) if isinstance(c, str) else tuple(c) if c else ()
    return [cache[r.query] for r in records]


def categories_of(records: list[Record], categorise: Categorise, cache: dict[str, str]) -> list[str]:
    """The category (L1) of each record's query, ``unknown`` when it has none; ``cache`` maps query ->
    category and is filled here."""
    todo = [r for r in records if r.query not in cache]
    for r, p in zip(todo, paths_of(todo, categorise, {})):
        cache[r.query] = p[0] if p else UNKNOWN
    return [cache[r.query] for r in records]


def run_audit(
    original_path: str,
    protected_path: str,
    *,
    categorise: Categorise,
    k: int | None = None,
    delta: float = 1.2,
    seed: int = 0,
    schema: SchemaConfig | None = None,
    cache: dict[str, str] | None = None,
    instance_field: str | None = None,
    config_file: str | None = None,
    params: dict[str, str] | None = None,
    identifiers: bool = True,
    include_texts: bool = False,
    state_dir: str | Path | None = None,
) -> dict[str, Any]:
    """Everything the audit measures, as one JSON-able dict (``jsd_values``, ``pel_values`` and ``ilr_values``
    kept for the HTML plots).

    ``cache``: query -> category, filled here; pass one to reuse the categories in later calls.
    ``instance_field``: a field that identifies each query event and travels with the query (a request id); with
    it the attacks are also scored per record (a query put back with its own sender).
    ``config_file`` / ``params``: the chain's config or the protection's parameters (``method``, ``k``,
    ``seed``...), recorded in ``provenance``; ``params["k"]`` draws the 1/k lines of the microaggregation
    measures. The microaggregation measures are computed for every pair of logs (they are cheap);
    ``microaggregation.looks_microaggregated`` says whether the protected log looks microaggregated
    (no user alone with their protected query multiset), which decides which verdicts apply.
    ``identifiers``: run the scrubber's detectors over both logs' queries (counts per type) and over every
    non-role field of their records (counts by field name and type, ``identifiers.fields``).
    ``k``: the attacker's k (default: the release's k, ``release_k``: ``params["k"]``, else the config's
    ``category_buffer`` k, else 5). Texts sent by fewer than ``release_k`` distinct users lose their text in the
    result (:mod:`~sidecar.tools.audit.texts`) unless ``include_texts``.
    ``state_dir``: the protection run's state folder (default: the config's ``state_dir``).
    """
    scans = (FieldScan(), FieldScan()) if identifiers else None
    original, bad_o = read_log(original_path, schema, instance_field, scans[0].add if scans else None)
    protected, bad_p = read_log(protected_path, schema, instance_field, scans[1].add if scans else None)
    if instance_field and all(r.instance is None for r in original):
        raise AuditInputError(f"--instance-field {instance_field}: no original record has this field")
    path_o, path_p = _paths(original, protected, categorise, {} if cache is None else cache)
    cat_o = [p[0] if p else UNKNOWN for p in path_o]
    cat_p = [p[0] if p else UNKNOWN for p in path_p]
    prov = provenance.provenance(original_path, protected_path, config_file=config_file, params=params)
    rk, rk_source = provenance.release_k(params, prov["config"]["text"] if "config" in prov else None)
    k = rk if k is None else k
    result: dict[str, Any] = {
        "release_k": rk,
        "release_k_source": rk_source,
        "texts_included": include_texts,
        "records_original": len(original),
        "records_protected": len(protected),
        "undecodable_lines": {"original": bad_o, "protected": bad_p},
        "empty_queries": {"original": empty_queries(original), "protected": empty_queries(protected)},
        "classified_share": sum(c != UNKNOWN for c in cat_o) / len(cat_o) if cat_o else 0.0,
        "attacker": {"k": k, "delta": delta, "knowledge_base": "same as the sidecar (paper 001 worst case)"},
    }
    link = linkage.attack(original, protected)
    result["linkage"] = link.summary
    # ids replaced (pseudonyms, random strings): the pair attacks and profiles compare under the linked ids
    attacked = protected if link.summary["ids_comparable"] else link.relabel(protected)
    result.update(matcher.match(original, attacked))
    _attacks(result, original, attacked, cat_o, cat_p, instance_field, k=k, delta=delta, seed=seed)
    util = utility.compare(
        utility.profiles((r.user, c) for r, c in zip(original, cat_o)),
        utility.profiles((r.user, c) for r, c in zip(attacked, cat_p)),
    )
    result.update(util)
    result["category_counts"] = {"original": dict(Counter(cat_o)), "protected": dict(Counter(cat_p))}
    result["provenance"] = prov
    result["microaggregation"] = _microaggregation(original, protected, path_o, path_p, seed, params)
    _guard_texts(result["microaggregation"], original, rk, include_texts)
    if scans:
        result["identifiers"] = _identifiers_with_fields(original, protected, attacked, scans, schema)
    result["events"] = provenance.events_accounting(result)
    if config_file is not None and "category_buffer" in result["events"]["filters"]:
        from sidecar.tools.audit.held import held_in_state

        result["events"]["held_in_state"] = held_in_state(config_file, state_dir)
    return result


def _identifiers_with_fields(
    original: list[Record],
    protected: list[Record],
    attacked: list[Record],
    scans: tuple[FieldScan, FieldScan],
    schema: SchemaConfig | None,
) -> dict[str, Any]:
    """The identifiers in the queries (by origin) and in every other field (``fields``) of both logs."""
    found = _identifiers(original, protected, attacked)
    found["fields"] = {
        "original": scans[0].counts(len(original)),
        "protected": scans[1].counts(len(protected), pseudonymous_fields(schema), scans[0]),
    }
    return found


def _paths(
    original: list[Record], protected: list[Record], categorise: Categorise, cache: dict[str, str]
) -> tuple[list[tuple[str, ...]], list[tuple[str, ...]]]:
    """Each record's category path in both logs; ``cache`` (query -> L1 category) is filled."""
    path_cache: dict[str, tuple[str, ...]] = {}
    path_o = paths_of(original, categorise, path_cache)
    path_p = paths_of(protected, categorise, path_cache)
    cache.update((q, p[0] if p else UNKNOWN) for q, p in path_cache.items())
    return path_o, path_p


def _identifiers(original: list[Record], protected: list[Record], attacked: list[Record]) -> dict[str, Any]:
    """The scrubber's detections in both logs' queries (counts per type) and, per protected record under the
    linked ids, where its identifiers come from."""
    return {
        "original": identifier_counts(r.query for r in original),
        "protected": identifier_counts(r.query for r in protected),
        "protected_origin": identifier_origins(
            ((r.user, r.query) for r in original), ((r.user, r.query) for r in attacked)
        ),
    }


def _attacks(
    result: dict[str, Any],
    original: list[Record],
    protected: list[Record],
    cat_o: list[str],
    cat_p: list[str],
    instance_field: str | None,
    *,
    k: int,
    delta: float,
    seed: int,
) -> None:
    """Paper 001's de-anonymizers on the protected log, scored on (user, query) pairs, on identical records and
    (with an instance field) per record; the best of each and the blind guesses, into ``result``."""
    original_pairs = Counter((r.user, r.query) for r in original)
    stream = [(r.user, r.query, c, r.time) for r, c in zip(protected, cat_p)]
    extra: dict[str, tuple[list[Any], Counter[tuple[str, Any]]]] = {
        "identical": ([r.rest for r in protected], Counter((r.user, r.rest) for r in original))
    }
    if instance_field:
        extra["records"] = (
            [r.instance or "" for r in protected],
            Counter((r.user, r.instance) for r in original if r.instance is not None),
        )
        result["instance"] = _instance_summary(instance_field, original, protected)
    result["deanonymizers"] = deanon.run_all(stream, original_pairs, len(original), k, delta, seed, extra)
    best = max(result["deanonymizers"].items(), key=lambda kv: kv[1]["recovered_share"])
    result["chance_share"] = deanon.chance(
        [(r.user, r.query, c) for r, c in zip(original, cat_o)], original_pairs, seed
    )
    result["best_deanonymizer"] = {
        "name": best[0],
        "recovered_share": best[1]["recovered_share"],
        "over_chance": best[1]["recovered_share"] - result["chance_share"],
    }
    for name in extra:
        best = max(result["deanonymizers"].items(), key=lambda kv: kv[1][f"recovered_{name}_share"])
        result[f"best_{name}_deanonymizer"] = {
            "name": best[0],
            f"recovered_{name}_share": best[1][f"recovered_{name}_share"],
        }
    if "records" in extra:  # no blind guess for "identical": the attacker never sees the original's other fields
        keyed = [(r.user, r.instance, c) for r, c in zip(original, cat_o) if r.instance is not None]
        result["chance_records_share"] = deanon.chance(keyed, extra["records"][1], seed)


def _microaggregation(
    original: list[Record],
    protected: list[Record],
    path_o: list[tuple[str, ...]],
    path_p: list[tuple[str, ...]],
    seed: int,
    params: dict[str, str] | None,
) -> dict[str, Any]:
    """The microaggregation measures (papers 003, 002), ``params["k"]`` drawing their 1/k lines, and whether the
    protected log looks microaggregated."""
    micro_k = int(params["k"]) if params and "k" in params else None
    micro = measures_microagg.measures(
        [(r.user, r.query, p) for r, p in zip(original, path_o)],
        [(r.user, r.query, p) for r, p in zip(protected, path_p)],
        seed=seed,
        k=micro_k,
    )
    micro["looks_microaggregated"] = measures_microagg.looks_microaggregated(micro["identical_groups"])
    return micro


def _guard_texts(micro: dict[str, Any], original: list[Record], k: int, include_texts: bool) -> None:
    """The top-10 query and word tables, each row marked with its distinct original senders and hidden (count
    and length only) when fewer than ``k`` (:mod:`~sidecar.tools.audit.texts`)."""
    queries, words = micro["top_queries"], micro["top_words"]
    pairs = [(r.user, r.query) for r in original]
    texts.guard_table(queries, texts.senders(pairs, texts.table_texts(queries)), k, include_texts)
    senders = texts.word_senders(pairs, texts.table_texts(words), measures_microagg.words)
    texts.guard_table(words, senders, k, include_texts)


def _instance_summary(field: str, original: list[Record], protected: list[Record]) -> dict[str, Any]:
    """How usable the instance key is: present on how many records, unique on how many original ones."""
    seen = Counter(r.instance for r in original if r.instance is not None)
    n_o, n_p = len(original), len(protected)
    return {
        "field": field,
        "present_share": {
            "original": sum(seen.values()) / n_o if n_o else 0.0,
            "protected": sum(r.instance is not None for r in protected) / n_p if n_p else 0.0,
        },
        "unique_share": sum(1 for c in seen.values() if c == 1) / n_o if n_o else 0.0,
    }


def json_view(result: dict[str, Any]) -> dict[str, Any]:
    """The result without the per-user value lists and the config text (for --json), with the verdicts."""
    from sidecar.tools.audit.verdicts import guarantees, headline

    out = {key: value for key, value in result.items() if key != "jsd_values"}
    if "microaggregation" in out:
        out["microaggregation"] = {
            k: v for k, v in out["microaggregation"].items() if k not in ("pel_values", "ilr_values")
        }
    if "config" in out.get("provenance", {}):
        out["provenance"] = out["provenance"] | {
            "config": {k: v for k, v in out["provenance"]["config"].items() if k != "text"}
        }
    ok, text = headline(result)
    out["verdicts"] = {"headline": {"ok": ok, "text": text}, "guarantees": guarantees(result)}
    return out
