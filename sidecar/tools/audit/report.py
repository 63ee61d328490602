"""The audit: matcher, de-anonymizers and utility over two logs; JSON result and HTML report."""

from __future__ import annotations

import base64
import html
import io
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sidecar.codecs import SchemaConfig
from sidecar.tools.audit import deanon, matcher, utility
from sidecar.tools.audit import dp as dp_audit
from sidecar.tools.audit.logs import Record, empty_queries, read_log

Categorise = Callable[[list[str]], list[str | None]]
UNKNOWN = "unknown"
PAPER_BEST = 0.0189  # paper 001: best de-anonymizer, lowest k, full AOL log


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


def categories_of(records: list[Record], categorise: Categorise, cache: dict[str, str]) -> list[str]:
    """The category of each record's query; an empty query (nothing but spaces) is ``unknown`` without asking
    ``categorise``, which may assume a query has a word."""
    for r in records:
        if r.query not in cache and not r.query.strip():
            cache[r.query] = UNKNOWN
    todo = sorted({r.query for r in records if r.query not in cache})
    for i in range(0, len(todo), 5000):
        chunk = todo[i : i + 5000]
        for q, c in zip(chunk, categorise(chunk)):
            cache[q] = c if c else UNKNOWN
    return [cache[r.query] for r in records]


def run_audit(
    original_path: str,
    protected_path: str,
    *,
    categorise: Categorise,
    k: int = 5,
    delta: float = 1.2,
    seed: int = 0,
    schema: SchemaConfig | None = None,
    cache: dict[str, str] | None = None,
    instance_field: str | None = None,
) -> dict[str, Any]:
    """Everything the audit measures, as one JSON-able dict (``jsd_values`` kept for the HTML plots).

    ``cache``: query -> category, filled here; pass one to reuse the categories in later calls.
    ``instance_field``: a field that identifies each query event and travels with
    the query (a request id); with it the attacks are also scored per record
    (a query put back with its own sender).
    """
    original, bad_o = read_log(original_path, schema, instance_field)
    protected, bad_p = read_log(protected_path, schema, instance_field)
    if instance_field and all(r.instance is None for r in original):
        raise AuditInputError(f"--instance-field {instance_field}: no original record has this field")
    cache = {} if cache is None else cache
    cat_o = categories_of(original, categorise, cache)
    cat_p = categories_of(protected, categorise, cache)
    result: dict[str, Any] = {
        "records_original": len(original),
        "records_protected": len(protected),
        "undecodable_lines": {"original": bad_o, "protected": bad_p},
        "empty_queries": {"original": empty_queries(original), "protected": empty_queries(protected)},
        "classified_share": sum(c != UNKNOWN for c in cat_o) / len(cat_o) if cat_o else 0.0,
        "attacker": {"k": k, "delta": delta, "knowledge_base": "same as the sidecar (paper 001 worst case)"},
    }
    result.update(matcher.match(original, protected))
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
    util = utility.compare(
        utility.profiles((r.user, c) for r, c in zip(original, cat_o)),
        utility.profiles((r.user, c) for r, c in zip(protected, cat_p)),
    )
    result.update(util)
    result["category_counts"] = {"original": dict(Counter(cat_o)), "protected": dict(Counter(cat_p))}
    return result


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
    """The result without the per-user value list (for --json)."""
    return {key: value for key, value in result.items() if key != "jsd_values"}


# --- HTML ----------------------------------------------------------------------------


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _plots(result: dict[str, Any]) -> list[tuple[str, str]]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = []
    k = result["attacker"]["k"]
    names = list(result["deanonymizers"])
    shares = [100 * result["deanonymizers"][n]["recovered_share"] for n in names]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    if "best_records_deanonymizer" in result:
        x = range(len(names))
        ax.bar([i - 0.2 for i in x], shares, width=0.4, color="#4c72b0", label="pairs")
        ax.bar(
            [i + 0.2 for i in x],
            [100 * result["deanonymizers"][n]["recovered_records_share"] for n in names],
            width=0.4,
            color="#dd8452",
            label="records (own sender)",
        )
        ax.set_xticks(list(x), names)
    else:
        ax.bar(names, shares, color="#4c72b0")
    ax.axhline(100 / k, color="#c44e52", linestyle="--", label=f"1/k = {100 / k:.1f}%")
    ax.axhline(
        100 * result["chance_share"],
        color="#999999",
        linestyle="-.",
        label=f"blind guess, pairs = {100 * result['chance_share']:.1f}%",
    )
    if "chance_records_share" in result:
        ax.axhline(
            100 * result["chance_records_share"],
            color="#dd8452",
            linestyle="-.",
            linewidth=0.8,
            label=f"blind guess, records = {100 * result['chance_records_share']:.1f}%",
        )
    ax.axhline(100 * PAPER_BEST, color="#55a868", linestyle=":", label="paper 001 best attack, lowest k: 1.89%")
    ax.set_ylabel("original pairs / records recovered (%)")
    ax.set_title("How many original (user, query) pairs / records each attack puts back")
    ax.tick_params(axis="x", rotation=30)
    ax.legend()
    out.append(("De-anonymization (paper 001 attacks 1-4, +T = time-ordered)", _png(fig)))
    plt.close(fig)

    values = result.get("jsd_values") or []
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.hist(values, bins=40, range=(0, 1), color="#8172b2")
    ax.set_xlabel("Jensen-Shannon divergence of a user's category profile (0 = unchanged)")
    ax.set_ylabel("users")
    ax.set_title("Utility: how much each user's interests moved")
    out.append(("Per-user profile change", _png(fig)))
    plt.close(fig)

    cats = sorted(set(result["category_counts"]["original"]) | set(result["category_counts"]["protected"]))
    o = [result["category_counts"]["original"].get(c, 0) for c in cats]
    p = [result["category_counts"]["protected"].get(c, 0) for c in cats]
    fig, ax = plt.subplots(figsize=(8, 3.6))
    x = range(len(cats))
    ax.bar([i - 0.2 for i in x], o, width=0.4, label="original")
    ax.bar([i + 0.2 for i in x], p, width=0.4, label="protected")
    ax.set_xticks(list(x), cats, rotation=45, ha="right")
    ax.set_ylabel("records")
    ax.legend()
    ax.set_title("Records per category")
    out.append(("Categories before and after", _png(fig)))
    plt.close(fig)
    return out


def verdict(result: dict[str, Any], k: int) -> tuple[bool, str]:
    """Pass/attention and one sentence: per record when the audit has an instance key, else per pair.

    For a differentially private release (``dp`` in the result) the guarantee is the budget, not 1/k: the
    verdict is whether every user stayed within epsilon (a replacement may equal the original query).
    """
    dp = result.get("dp")
    if dp is not None:
        over = dp["user_windows_over_budget"]
        if over:
            return False, f"Attention: {over:,} user budget(s) exceed epsilon = {dp['epsilon']} in the ledger."
        return True, (
            f"Every user stayed within epsilon = {dp['epsilon']} (largest spent: "
            f"{dp['epsilon_spent_per_user_window']['max']:.4g}). Protected records that equal an original "
            f"({result['matching_records']:,}) are allowed: the mechanism may return the input concept."
        )
    best = result["best_deanonymizer"]
    rec = result.get("best_records_deanonymizer")
    if result["matching_records"]:
        return False, "Attention: protected records re-create original (user, query) pairs (see below)."
    if rec is not None:
        share = rec["recovered_records_share"]
        if share > 1 / k:
            return False, (
                f"Attention: an attack puts {100 * share:.2f}% of the queries back with their own "
                f"sender, more than 1/k = {100 / k:.2f}%."
            )
        text = (
            f"No protected record re-creates an original (user, query) pair, and no attack puts more than "
            f"1/k of the queries back with their own sender (best: {100 * share:.2f}%)."
        )
        if best["recovered_share"] > 1 / k:
            text += (
                f" Counted by pairs, the best attack reaches {100 * best['recovered_share']:.2f}%, against"
                f" {100 * result['chance_share']:.2f}% for a blind guess: users of this log share many"
                " query texts, so a user is often given a text they also typed themselves."
            )
        return True, text
    if best["recovered_share"] <= 1 / k:
        return True, (
            "No protected record re-creates an original (user, query) pair, and no attack does better than 1/k."
        )
    text = "Attention: an attack recovers more than 1/k of the original (user, query) pairs (see below)."
    if best["recovered_share"] <= result["chance_share"]:
        text += (
            " It recovers no more than a blind guess: users of this log share many query texts, so even a"
            " guess that ignores the protected log matches that often. Audit with --instance-field to score"
            " each record against its own sender."
        )
    return False, text


def render_html(result: dict[str, Any]) -> str:
    """A self-contained page (inline CSS, PNG plots as data URIs) for a privacy officer."""
    k = result["attacker"]["k"]
    best = result["best_deanonymizer"]
    best_rec = result.get("best_records_deanonymizer")
    verdict_ok, verdict_text = verdict(result, k)
    per_record = best_rec is not None
    rows = "".join(
        f"<tr><td>{html.escape(name)}</td><td>{v['guesses']:,}</td><td>{v['recovered']:,}</td>"
        f"<td>{100 * v['recovered_share']:.3f}%</td>"
        + (
            f"<td>{v['recovered_records']:,}</td><td>{100 * v['recovered_records_share']:.3f}%</td>"
            if per_record
            else ""
        )
        + "</tr>"
        for name, v in result["deanonymizers"].items()
    )
    facts = [
        ("Records (original / protected)", f"{result['records_original']:,} / {result['records_protected']:,}"),
        (
            "Of which with an empty query (original / protected)",
            f"{result['empty_queries']['original']:,} / {result['empty_queries']['protected']:,}",
        ),
        (
            "Undecodable lines, left out (original / protected)",
            f"{result['undecodable_lines']['original']:,} / {result['undecodable_lines']['protected']:,}",
        ),
        (
            "Protected records re-creating an original (user, query)",
            f"{result['matching_records']:,} ({100 * result['matching_share']:.3f}%)",
        ),
        ("Protected records identical to an original record", f"{result['matching_full_records']:,}"),
        *(
            [
                (
                    "Protected records carrying their own sender's query (same event)",
                    f"{result['matching_own_sender_records']:,}",
                )
            ]
            if "matching_own_sender_records" in result
            else []
        ),
        ("Best attack", f"{html.escape(best['name'])}: {100 * best['recovered_share']:.3f}% of original pairs"),
        (
            "Reference: a blind guess (users shuffled within each category)",
            f"{100 * result['chance_share']:.3f}% — pairs 'recovered' by coincidence when users share query texts",
        ),
    ]
    ident = result["best_identical_deanonymizer"]
    facts.append(
        (
            "Best attack, identical records "
            "(paper 001's measure: the guessed record equals an original in every field)",
            f"{html.escape(ident['name'])}: {100 * ident['recovered_identical_share']:.3f}% of original records",
        )
    )
    if best_rec is not None:
        inst = result["instance"]
        facts += [
            (
                "Best attack, per record (a query put back with its own sender)",
                f"{html.escape(best_rec['name'])}: {100 * best_rec['recovered_records_share']:.3f}% of original "
                f"records (blind guess {100 * result['chance_records_share']:.3f}%)",
            ),
            (
                "Record key",
                f"{html.escape(inst['field'])}: on {100 * inst['present_share']['original']:.1f}% / "
                f"{100 * inst['present_share']['protected']:.1f}% of records, unique on "
                f"{100 * inst['unique_share']:.1f}%",
            ),
        ]
    facts += [
        ("Reference: 1/k", f"{100 / k:.2f}% (k = {k})"),
        ("Reference: paper 001, best attack at its lowest k", f"{100 * PAPER_BEST:.2f}%"),
        ("Mean per-user profile divergence (JSD, base 2)", f"{result['profile_jsd']:.4f}"),
        ("Users whose profile is unchanged", f"{100 * result['profile_unchanged_share']:.1f}%"),
        ("Users with no record in the protected log (all held)", f"{result['users_missing_in_protected']:,}"),
        ("Queries the classifier could categorise", f"{100 * result['classified_share']:.1f}%"),
    ]
    if "dp" in result:
        facts += dp_audit.html_facts(result["dp"])
    facts_html = "".join(f"<tr><th>{html.escape(a)}</th><td>{b}</td></tr>" for a, b in facts)
    figures = _plots(result)
    if "dp" in result:
        figures += dp_audit.plot(result["dp"], _png)
    plots = "".join(
        f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' src='data:image/png;base64,{data}'>"
        for title, data in figures
    )
    per_record_note = (
        " Per record, a guess counts only when it puts a query back with its own sender,"
        f" the record being identified by its {html.escape(result['instance']['field'])} field."
        if per_record
        else ""
    )
    record_heads = "<th>correct records</th><th>share of original records</th>" if per_record else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Query log privacy audit</title>
<style>
body {{ font-family: system-ui, sans-serif; max-width: 60em; margin: 2em auto; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }} th, td {{ border: 1px solid #ccc; padding: .3em .6em; }}
th {{ text-align: left; background: #f4f4f4; }} .ok {{ color: #256029; }} .warn {{ color: #a12; }}
img {{ max-width: 100%; }}
</style></head><body>
<h1>Query log privacy audit</h1>
<p class="{"ok" if verdict_ok else "warn"}"><strong>{verdict_text}</strong></p>
<p>The attacks are paper 001's de-anonymizers 1-4: the attacker has the protected log and the same
knowledge base as the sidecar (the worst case), rebuilds the category buffers with k = {k} and
δ = {result["attacker"]["delta"]}, and pairs users with queries by chance (1), by how often a user
appears in a buffer (2), by the user's history in the category (3), or both (4); "+T" replays the log
in time order. The share is of all original (user, query) pairs: a guess counts when the user ever sent
that text.{per_record_note}</p>
<table>{facts_html}</table>
<h2>Attacks</h2>
<table><tr><th>attack</th><th>guesses</th><th>correct</th><th>share of original pairs</th>{record_heads}</tr>
{rows}</table>
{plots}
</body></html>
"""
