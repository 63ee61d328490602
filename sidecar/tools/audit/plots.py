"""The report's plots (matplotlib, Agg, inline PNG): legends below the axes, never over a line or bar; a
log scale wherever one value dwarfs the rest (the largest at least :data:`DWARF` times the median of the
positive values), with plain numbers on the log axis."""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence
from typing import Any

from sidecar.tools.audit import texts
from sidecar.tools.audit.verdicts import PAPER_BEST, microaggregation_k

DWARF = 10.0
Plot = tuple[str, str]


def reference_k(result: dict[str, Any]) -> tuple[int | None, str]:
    """The k of the 1/k reference lines of PEL and SRP: the microaggregation's (``--params k=``, else the smallest
    group of identical profiles of a microaggregated log), else the release's k when a config names it (never
    the default 5 for a release whose k nobody stated)."""
    k, source = microaggregation_k(result)
    if k is None and result.get("release_k_source", "the default") != "the default":
        return int(result["release_k"]), str(result["release_k_source"])
    return k, source


def png(fig: Any) -> str:
    """A figure as base64 PNG (tight bounding box, so a legend below the axes is kept)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def finish(title: str, fig: Any) -> Plot:
    """The report's ``(title, base64 PNG)`` of a figure, which is then closed."""
    out = (title, png(fig))
    _pyplot().close(fig)
    return out


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def needs_log(values: Sequence[float]) -> bool:
    """True when the largest positive value is at least :data:`DWARF` times the median positive one."""
    pos = sorted(v for v in values if v > 0)
    return bool(pos) and pos[-1] >= DWARF * pos[len(pos) // 2]


def log_y(ax: Any, label: str) -> None:
    """A log y axis labelled as such, its ticks written as plain numbers (``0.1``, ``20``, ``1,000``)."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.10g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel(f"{label}, log scale")


def legend_below(ax: Any, ncol: int = 2, offset: float = -0.18) -> None:
    """The legend under the axes (outside them), so it covers nothing."""
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, offset), ncol=ncol, frameon=False, fontsize="small")


def attacks(result: dict[str, Any]) -> Plot:
    plt = _pyplot()
    k = result.get("release_k", result["attacker"]["k"])
    names = list(result["deanonymizers"])
    shares = [100 * result["deanonymizers"][n]["recovered_share"] for n in names]
    fig, ax = plt.subplots(figsize=(8, 4))
    x = list(range(len(names)))
    values = list(shares)
    if "best_records_deanonymizer" in result:
        rec = [100 * result["deanonymizers"][n]["recovered_records_share"] for n in names]
        values += rec
        ax.bar([i - 0.2 for i in x], shares, width=0.4, color="#4c72b0", label="pairs")
        ax.bar([i + 0.2 for i in x], rec, width=0.4, color="#dd8452", label="records (own sender)")
    else:
        ax.bar(x, shares, color="#4c72b0", label="pairs recovered")
    ax.set_xticks(x, names)
    lines = [
        (100 / k, "#c44e52", "--", f"1/k = {100 / k:.1f}% (release k = {k})"),
        (100 * result["chance_share"], "#999999", "-.", f"blind guess, pairs = {100 * result['chance_share']:.1f}%"),
        (100 * PAPER_BEST, "#55a868", ":", f"paper 001 best attack, lowest k: {100 * PAPER_BEST:.2f}%"),
    ]
    if "chance_records_share" in result:
        c = 100 * result["chance_records_share"]
        lines.append((c, "#dd8452", "-.", f"blind guess, records = {c:.1f}%"))
    for y, color, style, text in lines:
        ax.axhline(y, color=color, linestyle=style, label=text)
    if needs_log(values + [y for y, *_ in lines]):
        log_y(ax, "recovered (%)")
    else:
        ax.set_ylabel("recovered (%)")
    best = result["best_deanonymizer"]["recovered_share"]
    ax.set_title(
        f"Share of original (user, query) pairs each attack puts back\n(release k = {k}, attacker's buffers at "
        f"k = {result['attacker']['k']}; best {best / PAPER_BEST:.1f}x paper 001)"
    )
    ax.tick_params(axis="x", rotation=30)
    legend_below(ax, offset=-0.32)
    return finish("De-anonymization: paper 001's attacks 1-4 (+T = replayed in time order)", fig)


def profile_change(result: dict[str, Any]) -> Plot:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.hist(result.get("jsd_values") or [], bins=40, range=(0, 1), color="#8172b2")
    ax.set_xlabel("Jensen-Shannon divergence of a user's category profile, bits (0 = unchanged, 1 = disjoint)")
    ax.set_ylabel("users")
    ax.set_title("Utility: how much each user's interests moved (paper 004 eq. 9-11)")
    return finish("Per-user profile change", fig)


def categories(result: dict[str, Any]) -> Plot:
    plt = _pyplot()
    counts = result["category_counts"]
    cats = sorted(set(counts["original"]) | set(counts["protected"]))
    o = [counts["original"].get(c, 0) for c in cats]
    p = [counts["protected"].get(c, 0) for c in cats]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    x = list(range(len(cats)))
    ax.bar([i - 0.2 for i in x], o, width=0.4, label="original")
    ax.bar([i + 0.2 for i in x], p, width=0.4, label="protected")
    ax.set_xticks(x, cats, rotation=45, ha="right")
    if needs_log(o + p):
        log_y(ax, "records")
    else:
        ax.set_ylabel("records")
    ax.set_title("Records per category (L1)")
    legend_below(ax, offset=-0.36)
    return finish("Categories before and after", fig)


def pel_ilr(result: dict[str, Any]) -> Plot:
    plt = _pyplot()
    m = result["microaggregation"]
    k, _ = reference_k(result)
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.4))
    fig.subplots_adjust(wspace=0.3)
    a.hist([100 * v for v in m["pel_values"]], bins=20, range=(0, 100), color="#4c72b0")
    a.axvline(100 * m["pel"]["mean"], color="#222222", linestyle="-", label=f"mean {100 * m['pel']['mean']:.1f}%")
    if k:
        a.axvline(100 / k, color="#c44e52", linestyle="--", label=f"1/k = {100 / k:.1f}% (paper 003 Fig. 3)")
    a.set_xlabel("PEL per user (%): profile exposed")
    a.set_ylabel("users")
    legend_below(a, ncol=1, offset=-0.22)
    ilr_histogram(b, [100 * v for v in m["ilr_values"]])
    b.axvline(100 * m["ilr"]["mean"], color="#222222", linestyle="-", label=f"mean {100 * m['ilr']['mean']:.1f}%")
    legend_below(b, ncol=1, offset=-0.22)
    fig.suptitle("Privacy (PEL, paper 003 §4.1) and information loss (ILR, §4.2) per user")
    return finish("PEL and ILR per user", fig)


ILR_FLOOR = 0.1
"""ILR per user (%) under which the histogram counts a user as unchanged (rounding noise of two equal entropies
is around 1e-13 %; on a log axis it would stretch the axis over a dozen empty decades)."""


def ilr_histogram(ax: Any, values: list[float]) -> None:
    """ILR per user (%) as a histogram whose bars split the users: ILR is unbounded, and a few users at hundreds of
    percent would squeeze everyone else into one bar of a linear axis, so when the largest value dwarfs the median
    (:func:`needs_log`) the x axis is logarithmic with bins evenly spaced on it from :data:`ILR_FLOOR` (users
    below it cannot sit on a log axis: the axis label counts them)."""
    import numpy as np
    from matplotlib.ticker import FuncFormatter

    label = "ILR per user (%): entropy lost or gained"
    drawn = [v for v in values if v >= ILR_FLOOR]
    ax.set_ylabel("users")
    if not needs_log(values) or len(drawn) < 2 or max(drawn) <= min(drawn):
        ax.hist(values, bins=20, color="#55a868")
        ax.set_xlabel(label)
        return
    ax.hist(drawn, bins=np.geomspace(min(drawn), max(drawn) * 1.0001, 25), color="#55a868")
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.10g}"))
    under = len(values) - len(drawn)
    ax.set_xlabel(f"{label},\nlog scale" + (f" ({under:,} users under {ILR_FLOOR:g}% not drawn)" if under else ""))


def srp(result: dict[str, Any]) -> Plot:
    plt = _pyplot()
    m = result["microaggregation"]
    k, _ = reference_k(result)
    levels = list(m["srp"])
    fig, ax = plt.subplots(figsize=(8, 3.4))
    ax.bar(levels, [100 * m["srp"][lvl]["mean"] for lvl in levels], color="#8172b2", label="mean SRP over users")
    if k:
        ax.axhline(100 / k, color="#c44e52", linestyle="--", label=f"random partition 1/k = {100 / k:.1f}% (eq. 5)")
    ax.set_ylim(0, 100)
    ax.set_ylabel("SRP (%)")
    ax.set_xlabel("taxonomy level")
    ax.set_title("Topics kept per taxonomy level (paper 002 eq. 4)")
    legend_below(ax)
    return finish("Semantic Remain Percentage per level", fig)


def clustering(result: dict[str, Any]) -> Plot | None:
    rows = result["microaggregation"]["clustering"]
    if not rows:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(8, 3.4))
    kappas = [r["kappa"] for r in rows]
    ax.plot(kappas, [r["rand"] for r in rows], "o-", label="Rand index")
    ax.plot(kappas, [r["jaccard"] for r in rows], "s--", label="Jaccard index")
    ax.set_xscale("log")
    ax.set_xticks(kappas, [str(c) for c in kappas])
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("k-means clusters (κ)")
    ax.set_ylabel("index (1 = same partition)")
    ax.set_title("Clustering the users: original vs protected (paper 003 §4.4)")
    legend_below(ax, offset=-0.22)
    return finish("Rand and Jaccard indices of k-means clusterings", fig)


def frequencies(result: dict[str, Any]) -> Plot:
    plt = _pyplot()
    m = result["microaggregation"]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, key, title in zip(axes, ("top_queries", "top_words"), ("queries", "words (stop words out)")):
        rows = m[key]["rows"][::-1]
        y = list(range(len(rows)))
        labels = [texts.label(r, 28) for r in rows]
        ax.barh([i + 0.2 for i in y], [r["original"] for r in rows], height=0.4, label="original")
        ax.barh([i - 0.2 for i in y], [r["protected"] for r in rows], height=0.4, label="protected")
        ax.set_yticks(y, labels, fontsize="small")
        ax.set_xlabel("occurrences")
        ax.set_title(f"10 most frequent {title}")
        legend_below(ax, offset=-0.14)
    fig.suptitle("Frequencies kept (paper 003 §4.5)")
    fig.tight_layout()
    return finish("Top-10 queries and words, original vs protected", fig)


def all_plots(result: dict[str, Any]) -> list[Plot]:
    """Every plot of the report, in order: attacks, profiles, categories, then the microaggregation ones."""
    out = [attacks(result), profile_change(result), categories(result)]
    if "microaggregation" in result and result["microaggregation"]["users_compared"]:
        out += [pel_ilr(result), srp(result)]
        c = clustering(result)
        if c is not None:
            out.append(c)
        out.append(frequencies(result))
    return out
