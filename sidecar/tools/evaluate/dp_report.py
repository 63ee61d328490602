"""``querylog eval dp``'s report: the figures of :func:`~sidecar.tools.evaluate.dp.run_evaluation` as Markdown
tables, PNG plots (Figures 2-4 of paper 004, one per budget), a self-contained HTML page and JSON."""

from __future__ import annotations

import base64
import io
import json
from typing import Any


def markdown(result: dict[str, Any]) -> str:
    """The tables as Markdown (one per budget and figure)."""
    eps = result["epsilons"]
    out = []
    d = result["data"]
    out.append(
        f"{d['records']:,} records, {d['records_with_an_evaluation_concept']:,} with a concept under the four domains; "
        f"{d['users']:,} users, {d['concepts']:,} concepts (per user: mean {d['concepts_per_user']['mean']:.1f}, "
        f"median {d['concepts_per_user']['median']:.0f}, max {d['concepts_per_user']['max']}); "
        f"mean of {result['runs']} runs; concepts outside the profile topics "
        + ("count in an `other` bin." if result["other_bin"] else "are left out of the profile (paper 004's rho).")
    )
    figure = {"A": "Figure 2 (Setting A)", "B": "Figure 3 (Setting B)", "C": "Figure 4 (Setting C)"}
    if result.get("stay"):
        se = result["stay_epsilons"]
        out.append("")
        out.append(
            "**Where replacements land** (eps per concept): share of draws in the input's profile topic / in any "
            "profile topic, and the bound on the latter for any exponential mechanism over the domain"
        )
        out.append("")
        out.append("| setting | criterion | " + " | ".join(f"eps={e:g}" for e in se) + " |")
        out.append("|---|---|" + "---:|" * len(se))
        for name, rows in result["stay"].items():
            for crit in ("SQC1", "SQC2", "NSQC"):
                cells = [f"{a:.2f} / {b:.2f}" for a, b in zip(rows[crit]["same"], rows[crit]["in_P"])]
                out.append(f"| {name} | {crit} | " + " | ".join(cells) + " |")
            out.append(f"| {name} | bound (in P) | " + " | ".join(f"{v:.2f}" for v in rows["bound_in_P"]) + " |")
    for budget, figs in result["tables"].items():
        label = "eps per user (eps/m per concept)" if budget == "user" else "eps per concept"
        for name, fig in figs.items():
            out.append("")
            out.append(f"**{figure[name]}, {label}** — mean JSD")
            out.append("")
            out.append("| method | D(q) | " + " | ".join(f"eps={e:g}" for e in eps) + " |")
            out.append("|---|---|" + "---:|" * len(eps))
            for variant, rows in fig.items():
                for method, row in rows.items():
                    out.append(f"| {method} | {variant} | " + " | ".join(f"{v:.4f}" for v in row) + " |")
    return "\n".join(out) + "\n"


def plot_png(result: dict[str, Any], budget: str) -> bytes:
    """Figures 2-4 side by side for one budget (symlog y, so that the D(q)=P zeros show)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figs = result["tables"][budget]
    eps = result["epsilons"]
    fig, axes = plt.subplots(1, len(figs), figsize=(5 * len(figs), 4), squeeze=False)
    colours = {"SQC1": "#4c72b0", "SQC2": "#55a868", "NSQC": "#dd8452", "HBDP": "#c44e52"}
    for ax, (name, f) in zip(axes[0], figs.items()):
        for variant, rows in f.items():
            for method, row in rows.items():
                ax.plot(
                    eps,
                    row,
                    marker="o" if variant == "D>P" else "x",
                    linestyle="-" if variant == "D>P" else ":",
                    color=colours[method],
                    label=f"{method} {variant}",
                )
        ax.set_xscale("log")
        ax.set_yscale("symlog", linthresh=1e-3)
        ax.set_ylim(0.0, 1.0)
        ax.set_xlabel("epsilon" + (" per user" if budget == "user" else " per concept"))
        ax.set_ylabel("utility loss (mean JSD, base 2)")
        ax.set_title(f"Setting {name}")
        ax.grid(True, alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110)
    plt.close(fig)
    return buf.getvalue()


def html_report(result: dict[str, Any]) -> str:
    """A self-contained page: the tables and a plot per budget."""
    import html

    parts = [
        "<!doctype html><html lang='en'><head><meta charset='utf-8'><title>DP utility evaluation</title>",
        "<style>body{font-family:system-ui,sans-serif;max-width:70em;margin:2em auto}"
        "pre{background:#f4f4f4;padding:1em;overflow:auto}img{max-width:100%}</style></head><body>",
        "<h1>dp_replace: utility loss (paper 004, Figures 2-4)</h1>",
        f"<pre>{html.escape(markdown(result))}</pre>",
    ]
    for budget in result["tables"]:
        data = base64.b64encode(plot_png(result, budget)).decode("ascii")
        parts.append(f"<h2>budget: {html.escape(budget)}</h2><img alt='plot' src='data:image/png;base64,{data}'>")
    parts.append("</body></html>")
    return "\n".join(parts)


def to_json(result: dict[str, Any]) -> str:
    return json.dumps(result, indent=2, sort_keys=True)
