"""The report's microaggregation section (papers 003, 002): the measures with their method and paper, the
references, and the top-10 query and word tables, whose texts follow :mod:`~sidecar.tools.audit.texts`."""

from __future__ import annotations

from html import escape
from typing import Any

from sidecar.tools.audit import glossary, texts
from sidecar.tools.audit.plots import reference_k


def named(key: str) -> str:
    """A measure's name in bold and its method and paper in words (HTML)."""
    name, words = glossary.MEASURES[key]
    return f"<strong>{escape(name)}</strong><br><span class='words'>{escape(words)}</span>"


def _top(table: dict[str, Any], what: str) -> str:
    rows = "".join(
        f"<tr><td>{i}</td><td>{escape(texts.label(r))}</td><td class='num'>{r['original']:,}</td>"
        f"<td class='num'>{r['protected']:,}</td></tr>"
        for i, r in enumerate(table["rows"], 1)
    )
    return (
        f"<table><tr><th>#</th><th>{what} (original top 10)</th><th>original</th><th>protected</th></tr>{rows}</table>"
        f"<p>{table['kept_in_top']} of the original top 10 are also in the protected top 10.</p>"
    )


def micro_section(result: dict[str, Any]) -> str:
    m = result.get("microaggregation")
    if not m or not m["users_compared"]:
        return ""
    k, source = reference_k(result)
    ref = f"1/k = {100 / k:.1f}% (k = {k}, {escape(source)})" if k else "k unknown (give --params k=K)"
    p, i, g = m["pel"], m["ilr"], m["identical_groups"]
    rows = [
        (
            named("pel"),
            f"mean {100 * p['mean']:.1f}%, median {100 * p['median']:.1f}%, max {100 * p['max']:.1f}% "
            f"over {p['users']:,} users ({p['undefined_users']:,} with a single distinct query: undefined)",
            f"paper 003: close to 1/k (50% at k=2, 10% at k=10); here {ref}",
        ),
        (
            named("ilr"),
            f"mean {100 * i['mean']:.1f}%, median {100 * i['median']:.1f}% over {i['users']:,} users",
            "paper 003: about 10% at k=3, 50% at k=35",
        ),
    ]
    if m["srp"]:
        rows.append(
            (
                named("srp"),
                "<br>".join(
                    f"{lvl}: mean {100 * v['mean']:.1f}% over {v['users']:,} users" for lvl, v in m["srp"].items()
                ),
                f"random partition: {ref}; paper 002 Fig. 3: above it at every level",
            )
        )
    if m["clustering"]:
        cells = "".join(
            f"<tr><td class='num'>{c['kappa']}</td><td class='num'>{c['rand']:.3f}</td>"
            f"<td class='num'>{c['jaccard']:.3f}</td></tr>"
            for c in m["clustering"]
        )
        rows.append(
            (
                named("rand") + "<br>" + named("jaccard"),
                f"<table><tr><th>κ clusters</th><th>Rand</th><th>Jaccard</th></tr>{cells}</table>",
                "1 = the same partition of the users; paper 003 Fig. 5: both approach 1 as κ grows",
            )
        )
    rows.append(
        (
            named("groups"),
            f"{g['groups']:,} groups; smallest {g['smallest']}, largest {g['largest']}; "
            f"{g['users_alone']:,} users alone",
            "at least k in every group",
        )
    )
    body = "".join(f"<tr><td>{a}</td><td>{b}</td><td>{c}</td></tr>" for a, b, c in rows)
    note = (
        "<p class='words'>How these are computed: users present in both logs are compared (ids are kept by "
        f"microaggregation; {m['users_only_original']:,} users only in the original, {m['users_only_protected']:,} "
        "only in the protected log). PEL: the paper gives the two query distributions of a user but not their "
        "joint; this audit pairs each query with itself as far as both distributions share it and the rest "
        "independently (an unchanged profile gives 100%, a disjoint one 0%). SRP: a category at level l is its "
        "path L1..Ll. Clusterings: k-means (scipy kmeans2, k-means++ start, same seed on both sides) over each "
        "user's share of queries per L1 and per L2 category.</p>"
    )
    looks = (
        "The protected log looks microaggregated: no user is alone with their protected queries."
        if m.get("looks_microaggregated")
        else "The protected log does not look microaggregated (users alone with their protected queries): these "
        "measures are computed for every audit and read here as what this release kept of each user."
    )
    return (
        "<h2>Microaggregation measures (original vs protected)</h2>"
        f"<p>{looks}</p>"
        f"<table><tr><th>measure — method and paper</th><th>value</th><th>reference</th></tr>{body}</table>{note}"
        f"<h3>{escape(glossary.MEASURES['top'][0])}</h3><p class='words'>{escape(glossary.MEASURES['top'][1])}</p>"
        f"<p class='words'>{escape(glossary.hidden_texts(m['top_queries'].get('release_k', texts.DEFAULT_K)))}</p>"
        + _top(m["top_queries"], "query")
        + _top(m["top_words"], "word")
    )
