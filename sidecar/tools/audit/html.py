"""The audit report as one self-contained HTML page (inline CSS, PNG plots as data URIs).

Sections: what was audited (files with size and SHA-256, date, version, config or parameters), the
verdict per guarantee with its figure, the facts, events held or dropped, identifiers left, the attacks,
the microaggregation measures and the plots. Every measure carries its method and paper in plain words.
"""

from __future__ import annotations

from html import escape
from typing import Any

from sidecar.tools.audit import dp as dp_audit
from sidecar.tools.audit import glossary, plots, texts
from sidecar.tools.audit.html_micro import micro_section, named
from sidecar.tools.audit.verdicts import PAPER_BEST, guarantees, headline

_CSS = """
body { font-family: system-ui, sans-serif; max-width: 64em; margin: 2em auto; color: #222; }
table { border-collapse: collapse; margin: 1em 0; } th, td { border: 1px solid #ccc; padding: .3em .6em; }
th { text-align: left; background: #f4f4f4; vertical-align: top; } .ok { color: #256029; } .warn { color: #a12; }
.info { color: #555; } img { max-width: 100%; } pre { background: #f8f8f8; padding: .6em; overflow-x: auto; }
td.num { text-align: right; } .words { color: #555; font-size: .92em; } code { word-break: break-all; }
"""


def _table(rows: list[tuple[str, str]]) -> str:
    """(label, HTML value) rows; labels are escaped here, values are HTML already."""
    return "<table>" + "".join(f"<tr><th>{escape(a)}</th><td>{b}</td></tr>" for a, b in rows) + "</table>"


def _audited(result: dict[str, Any]) -> str:
    prov = result.get("provenance")
    if not prov:
        return ""
    rows = [
        ("Date of this audit", escape(prov["date"])),
        ("Product", f"{escape(prov['product'])} {escape(prov['version'])}"),
    ]
    for role in ("original", "protected"):
        f = prov[role]
        rows.append(
            (
                f"{role.capitalize()} log",
                f"{escape(f['name'])} — {f['bytes']:,} bytes — SHA-256 <code>{f['sha256']}</code>"
                f"<br><span class='words'>{escape(f['path'])}</span>",
            )
        )
    params = prov.get("params") or {}
    if params:
        rows.append(
            (
                "Protection parameters (as stated with --params)",
                ", ".join(f"{escape(k)} = {escape(v)}" for k, v in params.items()),
            )
        )
    if "config" in prov:
        c = prov["config"]
        rows.append(
            (
                "Chain config",
                f"{escape(c['name'])} — {c['bytes']:,} bytes — SHA-256 <code>{c['sha256']}</code>"
                f"<br><span class='words'>{escape(c['path'])}; its full text is at the end of this report</span>",
            )
        )
    elif not params:
        rows.append(("Chain config / parameters", "not given (audit with --config or --params to record them)"))
    rk = result.get("release_k", texts.DEFAULT_K)
    rows.append(("Release k", f"{rk} ({escape(result.get('release_k_source', 'the default'))})"))
    a = result["attacker"]
    rows.append(
        ("Attacker model (paper 001)", f"k = {a['k']}, δ = {a['delta']}, knowledge base: {escape(a['knowledge_base'])}")
    )
    return "<h2>What was audited</h2>" + _table(rows)


def _guarantees(result: dict[str, Any]) -> str:
    words = {"ok": "met", "attention": "attention", "not_applicable": "not applicable"}
    css = {"ok": "ok", "attention": "warn", "not_applicable": "info"}
    rows = "".join(
        f"<tr><td>{escape(g['guarantee'])}</td><td class='{css[g['status']]}'>"
        f"<strong>{words[g['status']]}</strong></td><td>{escape(g['figure'])}</td><td>{escape(g['why'])}</td></tr>"
        for g in guarantees(result)
    )
    return (
        "<h2>Verdict per guarantee</h2><table><tr><th>guarantee</th><th>verdict</th><th>figure it rests on</th>"
        f"<th>why</th></tr>{rows}</table>"
    )


def _facts(result: dict[str, Any]) -> str:
    k = result.get("release_k", result["attacker"]["k"])
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
        *_attack_facts(result),
        ("Reference: 1/k", f"{100 / k:.2f}% (the release's k = {k})"),
        ("Reference: paper 001, best attack at its lowest k", f"{100 * PAPER_BEST:.2f}%"),
        (
            "Mean per-user profile divergence (Jensen-Shannon divergence of category profiles, paper 004 eq. 9-11, "
            "in bits: 0 = same interests, 1 = nothing in common)",
            f"{result['profile_jsd']:.4f}",
        ),
        ("Users whose profile is unchanged", f"{100 * result['profile_unchanged_share']:.1f}%"),
        ("Users with no record in the protected log (all held)", f"{result['users_missing_in_protected']:,}"),
        ("Queries the classifier could categorise", f"{100 * result['classified_share']:.1f}%"),
    ]
    if "dp" in result:
        facts += dp_audit.html_facts(result["dp"])
    return (
        "<h2>Facts</h2>"
        + "<table>"
        + "".join(f"<tr><th>{escape(a)}</th><td>{b}</td></tr>" for a, b in facts)
        + "</table>"
    )


def _linkage_fact(link: dict[str, Any]) -> str:
    """The linkage attack's figures (HTML): linked shares against chance, which evidence, ids kept or replaced."""
    exact = link["reidentified_share"]
    ids = "ids kept" if link["ids_comparable"] else "ids replaced: the pair rows below are scored on the linked ids"
    shown = f"{100 * exact:.1f}% of users re-identified; " if exact is not None else ""
    return (
        f"{shown}{100 * link['confident_share']:.1f}% linked with confidence, by "
        f"{escape('+'.join(link['evidence']))}; chance {100 * link['chance']:.2f}% "
        f"(1 in {link['users_original']:,}); {ids}"
    )


def _attack_facts(result: dict[str, Any]) -> list[tuple[str, str]]:
    """The log matcher's and the attacks' rows of the facts table (values are HTML)."""
    best = result["best_deanonymizer"]
    best_rec = result.get("best_records_deanonymizer")
    facts = [
        (
            "Protected records re-creating an original (user, query) — log matcher, paper 001 §3.3.3",
            f"{result['matching_records']:,} ({100 * result['matching_share']:.3f}%)",
        ),
        ("Protected records identical to an original record", f"{result['matching_full_records']:,}"),
    ]
    link = result.get("linkage")
    if link is not None:
        facts.insert(0, ("User linkage attack (ids linked by queries, times, click hosts)", _linkage_fact(link)))
    if "matching_own_sender_records" in result:
        facts.append(
            (
                "Protected records carrying their own sender's query (same event)",
                f"{result['matching_own_sender_records']:,}",
            )
        )
    facts += [
        (
            "Best attack",
            f"{escape(best['name'])}: {100 * best['recovered_share']:.3f}% of original pairs"
            f"<br><span class='words'>{escape(glossary.attack(best['name']))}</span>",
        ),
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
            f"{escape(ident['name'])}: {100 * ident['recovered_identical_share']:.3f}% of original records",
        )
    )
    if best_rec is not None:
        inst = result["instance"]
        facts += [
            (
                "Best attack, per record (a query put back with its own sender)",
                f"{escape(best_rec['name'])}: {100 * best_rec['recovered_records_share']:.3f}% of original "
                f"records (blind guess {100 * result['chance_records_share']:.3f}%)",
            ),
            (
                "Record key",
                f"{escape(inst['field'])}: on {100 * inst['present_share']['original']:.1f}% / "
                f"{100 * inst['present_share']['protected']:.1f}% of records, unique on "
                f"{100 * inst['unique_share']:.1f}%",
            ),
        ]
    return facts


def _events(result: dict[str, Any]) -> str:
    ev = result.get("events")
    if ev is None:
        return ""
    rows = [
        ("Records missing from the protected log (held or dropped)", f"{ev['missing']:,}"),
        ("Records added in the protected log", f"{ev['added']:,}"),
        ("Users with no record left (all their events held or dropped)", f"{ev['users_missing']:,}"),
        ("Protected records with an empty query (scrubbed to nothing, kept)", f"{ev['empty_queries_protected']:,}"),
        (
            "Undecodable lines left out of this audit (original / protected)",
            f"{ev['undecodable']['original']:,} / {ev['undecodable']['protected']:,}",
        ),
        ("Filters in the chain", escape(", ".join(ev["filters"])) if ev["filters"] else "unknown (no --config)"),
    ]
    state = ev.get("held_in_state")
    if state is not None:
        if "held_events" in state:
            cats = ", ".join(f"{escape(c)} {n:,}" for c, n in state["by_category"].items()) or "none"
            value = (
                f"{state['held_events']:,} events ({state['held_user_halves']:,} user halves still owed a query); "
                f"by category: {cats}<br><span class='words'>read from {escape(state['database'])}: what the "
                "state holds now, which may include other runs into the same state_dir</span>"
            )
        else:
            value = f"no readable state database at {escape(state['database'])}"
        rows.append(("Events still held by category_buffer (its state database)", value))
    why = "".join(f"<li>{escape(r)}</li>" for r in ev["reasons"]) or (
        "<li>no config or parameters given: the logs alone cannot tell held events from dropped ones</li>"
    )
    return (
        "<h2>Events held or dropped, and why</h2>"
        + _table(rows)
        + f"<p>What can explain the difference:</p><ul>{why}</ul>"
        + "<p class='words'>Counted from the two logs; events still held live in the sidecar's state (SQLite) "
        "and are released only when their buffer reaches k.</p>"
    )


def identifiers_section(result: dict[str, Any]) -> str:
    """The identifiers table: per type in the queries, then per field and type in the other fields."""
    ids = result.get("identifiers")
    if ids is None:
        return ""
    o, p = ids["original"], ids["protected"]
    kinds = sorted(set(o["records_by_type"]) | set(p["records_by_type"]))
    rows = "".join(
        f"<tr><td>{escape(t)}</td><td class='num'>{o['records_by_type'].get(t, 0):,}</td>"
        f"<td class='num'>{p['records_by_type'].get(t, 0):,}</td></tr>"
        for t in kinds
    )
    return (
        f"<h2>Identifiers left in the output</h2><p>{named('identifiers')}</p>"
        f"<p>Protected records with an identifier: <strong>{p['records_with_identifier']:,}</strong> of "
        f"{p['records_checked']:,} (original: {o['records_with_identifier']:,} of {o['records_checked']:,}).</p>"
        "<table><tr><th>identifier type</th><th>original records</th><th>protected records</th></tr>"
        f"{rows or '<tr><td colspan=3>none found</td></tr>'}{_field_rows(ids.get('fields'))}</table>"
    )


def _field_rows(fields: dict[str, Any] | None) -> str:
    """Rows of the identifiers table for the fields that play no role: field and type, counts only."""
    if fields is None:
        return ""
    o, p = fields["original"]["by_field"], fields["protected"]["by_field"]
    pairs = sorted({(f, t) for side in (o, p) for f, types in side.items() for t in types})
    head = (
        f"<tr><th>in a field besides the roles ({len(fields['protected']['fields_checked']):,} checked)</th>"
        "<th>original values</th><th>protected values</th></tr>"
    )
    rows = "".join(
        f"<tr><td>{escape(f)}: {escape(t)}</td><td class='num'>{o.get(f, {}).get(t, 0):,}</td>"
        f"<td class='num'>{p.get(f, {}).get(t, 0):,}</td></tr>"
        for f, t in pairs
    )
    return head + (rows or "<tr><td colspan=3>none found</td></tr>")


def _attacks(result: dict[str, Any]) -> str:
    per_record = "best_records_deanonymizer" in result
    rows = "".join(
        f"<tr><td><strong>{escape(name)}</strong><br><span class='words'>{escape(glossary.attack(name))}</span></td>"
        f"<td class='num'>{v['guesses']:,}</td><td class='num'>{v['recovered']:,}</td>"
        f"<td class='num'>{100 * v['recovered_share']:.3f}%</td>"
        + (
            f"<td class='num'>{v['recovered_records']:,}</td>"
            f"<td class='num'>{100 * v['recovered_records_share']:.3f}%</td>"
            if per_record
            else ""
        )
        + "</tr>"
        for name, v in result["deanonymizers"].items()
    )
    heads = "<th>correct records</th><th>share of original records</th>" if per_record else ""
    return (
        "<h2>Attacks</h2><table><tr><th>attack</th><th>guesses</th><th>correct</th><th>share of original pairs</th>"
        f"{heads}</tr>{rows}</table>"
    )


def _config_text(result: dict[str, Any]) -> str:
    c = result.get("provenance", {}).get("config")
    if not c:
        return ""
    return f"<h2>Chain config: {escape(c['name'])} (full text)</h2><pre>{escape(c['text'])}</pre>"


def render_html(result: dict[str, Any]) -> str:
    """A self-contained page (inline CSS, PNG plots as data URIs) for a privacy officer."""
    ok, text = headline(result)
    k = result["attacker"]["k"]
    figures = plots.all_plots(result)
    if "dp" in result:
        figures += dp_audit.plot(result["dp"], plots.png)
    images = "".join(
        f"<h2>{escape(title)}</h2><img alt='{escape(title)}' src='data:image/png;base64,{data}'>"
        for title, data in figures
    )
    per_record_note = (
        " Per record, a guess counts only when it puts a query back with its own sender,"
        f" the record being identified by its {escape(result['instance']['field'])} field."
        if "best_records_deanonymizer" in result
        else ""
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Query log privacy audit</title>
<style>{_CSS}</style></head><body>
<h1>Query log privacy audit</h1>
<p class="{"ok" if ok else "warn"}"><strong>{escape(text)}</strong></p>
{_audited(result)}
{_guarantees(result)}
<p>The attacks are paper 001's de-anonymizers 1-4: the attacker has the protected log and the same
knowledge base as the sidecar (the worst case), rebuilds the category buffers with k = {k} and
δ = {result["attacker"]["delta"]}, and pairs users with queries by chance (1), by how often a user
appears in a buffer (2), by the user's history in the category (3), or both (4); "+T" replays the log
in time order. The share is of all original (user, query) pairs: a guess counts when the user ever sent
that text.{per_record_note}</p>
{_facts(result)}
{_events(result)}
{identifiers_section(result)}
{_attacks(result)}
{micro_section(result)}
{images}
{_config_text(result)}
</body></html>
"""
