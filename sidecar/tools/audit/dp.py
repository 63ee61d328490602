"""The audit of a ``dp_replace`` release: epsilon spent per user and what became of the queries.

Read from the filter's budget ledger (``dp_ledger.db`` in the state folder; users are
keyed hashes there; the audit adds up a user's windows and shows distributions
and counts only, never a key). With ``budget: batch`` every user's spending is
at most epsilon by construction (epsilon/m per concept, m concepts); with
``budget: stream`` it is at most epsilon per window. The ledger is exact
(fractions), so "over budget" is an exact comparison and must be 0.
"""

from __future__ import annotations

import html
import sqlite3
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from filters.dp_replace.budget import LEDGER_FILE, OUTCOMES, read_ledger
from filters.dp_replace.mechanism import overrun

DB_NAME = "querylog.db"


class DpStateError(ValueError):
    """The state has no dp_replace ledger (the message names the path, never a value)."""


def dp_summary(state: str | Path) -> dict[str, Any]:
    """Epsilon spent per user (distribution), per window, and the outcome shares, from the ledger."""
    path = Path(state)
    if path.is_dir():
        path = path / DB_NAME
    if not path.is_file():
        raise DpStateError(f"{path}: no state database")
    meta: dict[str, str] = {}
    rows: list[tuple[bytes, int, Fraction, int, list[int]]] = []
    # the ledger's own database beside the state database; a first-version state kept it inside
    for candidate in (path.with_name(LEDGER_FILE), path):
        if candidate.is_file():
            conn = sqlite3.connect(f"file:{candidate}?mode=ro", uri=True)
            try:
                meta, rows = read_ledger(conn)
            finally:
                conn.close()
            if meta:
                break
    if not meta:
        raise DpStateError(f"{path}: no dp_replace budget ledger in this state")
    epsilon = Fraction(meta["epsilon"]) if "epsilon" in meta else None
    per_window = [spent for _, _, spent, _, _ in rows]
    totals: dict[bytes, Fraction] = {}
    windows: dict[bytes, int] = {}
    for user, _, spent, _, _ in rows:
        totals[user] = totals.get(user, Fraction(0)) + spent
        windows[user] = windows.get(user, 0) + 1
    outcomes = [sum(r[4][i] for r in rows) for i in range(len(OUTCOMES))]
    events = sum(outcomes)
    spent_user = np.array([float(v) for v in totals.values()]) if totals else np.zeros(0)
    spent_window = np.array([float(v) for v in per_window]) if per_window else np.zeros(0)
    concepts = sum(r[3] for r in rows)

    def dist(a: Any) -> dict[str, float]:
        if not len(a):
            return {"min": 0.0, "median": 0.0, "mean": 0.0, "max": 0.0}
        return {
            "min": float(a.min()),
            "median": float(np.median(a)),
            "mean": float(a.mean()),
            "max": float(a.max()),
        }

    over = sum(1 for v in per_window if epsilon is not None and v > epsilon)
    at = sum(1 for v in per_window if epsilon is not None and v == epsilon)
    budget = meta.get("budget", "")
    max_per_query = float(epsilon) if epsilon is not None else 0.0
    if budget == "stream" and epsilon is not None:
        max_per_query = float(epsilon / int(meta.get("max_queries", "1")))
    return {
        "config": meta,
        "epsilon": float(epsilon) if epsilon is not None else None,
        "budget": budget,
        "users": len(totals),
        "user_windows": len(rows),
        "concepts_charged": concepts,
        "epsilon_spent_per_user": dist(spent_user),
        "epsilon_spent_per_user_window": dist(spent_window),
        "user_windows_at_budget": at,
        "user_windows_over_budget": over,
        "users_with_several_windows": sum(1 for n in windows.values() if n > 1),
        "events": events,
        "outcomes": dict(zip(OUTCOMES, outcomes)),
        "shares": {name: (n / events if events else 0.0) for name, n in zip(OUTCOMES, outcomes)},
        "float_overrun_per_query_max": overrun(min(max_per_query, 50.0)) if max_per_query else 0.0,
        "spent_values": sorted(float(v) for v in spent_user),
    }


def text_lines(dp: dict[str, Any]) -> list[str]:
    """The DP section of the audit's text output."""
    s, sh, w = dp["epsilon_spent_per_user"], dp["shares"], dp["epsilon_spent_per_user_window"]
    unit = "per user per window" if dp["budget"] == "stream" else "per user"
    return [
        f"dp_replace: epsilon {dp['epsilon']} {unit} ({dp['budget']} budget, criterion "
        f"{dp['config'].get('criterion')}, domain {dp['config'].get('domain')}); {dp['users']:,} users",
        f"  epsilon spent per user: min {s['min']:.4g}, median {s['median']:.4g}, max {s['max']:.4g}; per user and "
        f"window max {w['max']:.4g}; at budget {dp['user_windows_at_budget']:,}, over budget "
        f"{dp['user_windows_over_budget']:,}",
        f"  events: replaced {100 * sh['replaced']:.1f}%, suppressed (budget) {100 * sh['suppressed']:.1f}%, "
        f"dropped (no concept) {100 * sh['dropped']:.1f}%, unprotected {100 * sh['unprotected']:.1f}% "
        f"of {dp['events']:,}",
    ]


def html_facts(dp: dict[str, Any]) -> list[tuple[str, str]]:
    """(label, HTML value) rows of the DP section of the HTML report (configuration words escaped)."""
    s, sh, o = dp["epsilon_spent_per_user"], dp["shares"], dp["outcomes"]
    cfg = {k: html.escape(str(v)) for k, v in dp["config"].items()}
    unit = "per user and window" if dp["budget"] == "stream" else "per user (the whole log)"
    return [
        ("Budget", f"epsilon = {dp['epsilon']} {unit}; {html.escape(dp['budget'])} mode"),
        (
            "Mechanism",
            f"criterion {cfg.get('criterion')}, domain {cfg.get('domain')}, surface "
            f"{cfg.get('surface')}; float overrun per query at most {dp['float_overrun_per_query_max']:.1e}",
        ),
        ("Users in the ledger", f"{dp['users']:,} ({dp['user_windows']:,} user-windows)"),
        (
            "Epsilon spent per user",
            f"min {s['min']:.4g}, median {s['median']:.4g}, mean {s['mean']:.4g}, max {s['max']:.4g}",
        ),
        (
            "User-windows at / over budget",
            f"{dp['user_windows_at_budget']:,} / {dp['user_windows_over_budget']:,} (over must be 0)",
        ),
        ("Replaced", f"{o['replaced']:,} events ({100 * sh['replaced']:.1f}%), {dp['concepts_charged']:,} concepts"),
        ("Suppressed (budget spent)", f"{o['suppressed']:,} ({100 * sh['suppressed']:.1f}%)"),
        ("Dropped (no concept)", f"{o['dropped']:,} ({100 * sh['dropped']:.1f}%)"),
        ("Let through unprotected (no_concept: keep)", f"{o['unprotected']:,} ({100 * sh['unprotected']:.1f}%)"),
    ]


def plot(dp: dict[str, Any], fig_png: Any) -> list[tuple[str, str]]:
    """A histogram of the epsilon each user spent; ``fig_png`` turns a figure into base64 PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = dp.get("spent_values") or []
    fig, ax = plt.subplots(figsize=(8, 3.2))
    ax.hist(values, bins=40, color="#55a868")
    if dp["epsilon"] is not None:
        ax.axvline(dp["epsilon"], color="#c44e52", linestyle="--", label=f"epsilon = {dp['epsilon']}")
        ax.legend()
    ax.set_xlabel("epsilon spent by a user (all windows)")
    ax.set_ylabel("users")
    ax.set_title("Differential privacy: budget spent per user")
    out = [("Epsilon spent per user (dp_replace ledger)", fig_png(fig))]
    plt.close(fig)
    return out
