"""The user linkage attack's verdict: linked users against 1/k for a chain that promises k, else chance.

The figures come from :mod:`~sidecar.tools.audit.linkage` (``result["linkage"]``); the row has the shape of every
guarantee row of :mod:`~sidecar.tools.audit.verdicts` (:func:`guarantee_row`).
"""

from __future__ import annotations

from typing import Any

DEFAULT_RELEASE_K = 5
LINKAGE_CONFIDENCE = 0.999
"""Without a k to promise, users are linkable "above chance" when more link than a binomial draw at chance
(1 / original users) would reach with this probability."""


def guarantee_row(guarantee: str, status: str, figure: str, why: str) -> dict[str, str]:
    """One verdict row: the guarantee, its status (ok, attention, info = not applicable), the figure, why."""
    return {"guarantee": guarantee, "status": status, "figure": figure, "why": why}


def _linkage_bound(result: dict[str, Any]) -> tuple[float, str]:
    """The share of linked users a release may show: 1/k when it promises k (a k-anonymous chain or a
    microaggregation), else what chance reaches (a binomial draw at 1 / original users)."""
    link = result["linkage"]
    micro = result.get("microaggregation", {}).get("looks_microaggregated")
    k_anonymous = micro or "k" in result.get("provenance", {}).get("params", {})
    k_anonymous = k_anonymous or "category_buffer" in result.get("events", {}).get("filters", [])
    if k_anonymous:
        k = int(result.get("release_k", DEFAULT_RELEASE_K))
        return 1 / k, f"1/k = {100 / k:.2f}% (k = {k})"
    n, p = link["users_protected"], link["chance"]
    bound = max(p, binomial_quantile(n, p, LINKAGE_CONFIDENCE) / n) if n else p
    return bound, f"chance ({100 * p:.2f}% = 1 in {link['users_original']:,}; {100 * bound:.2f}% with its spread)"


def binomial_quantile(n: int, p: float, q: float) -> int:
    """The smallest m with P(Binomial(n, p) <= m) >= q (pmf by recurrence from (1 - p)^n; p = 1/users keeps the
    mean near 1, so a few terms do)."""
    if p >= 1:
        return n
    pmf = (1 - p) ** n
    cdf, m = pmf, 0
    while cdf < q and m < n:
        pmf *= (n - m) / (m + 1) * p / (1 - p)
        m += 1
        cdf += pmf
    return m


def linkage_verdict(result: dict[str, Any]) -> dict[str, str] | None:
    """The user linkage attack's verdict (None when the audit did not run it).

    Ids kept: not applicable (an id already says who its user is; the pair attacks measure what it
    discloses), the linkage figures shown. Ids replaced: the share of protected users linked, exactly when
    the truth is known, else the confident share, against the bound of :func:`_linkage_bound`.
    """
    link = result.get("linkage")
    if link is None:
        return None
    title = "Users not linkable above chance (user linkage attack over queries, times, click hosts)"
    n = link["users_protected"]
    by = "+".join(link["evidence"])
    if link["ids_comparable"]:
        share = link["reidentified_share"] or 0.0
        return guarantee_row(
            title,
            "not_applicable",
            f"{100 * share:.1f}% of {n:,} protected ids link back to their own user by {by} "
            f"(chance {100 * link['chance']:.2f}%)",
            f"the release keeps user ids ({100 * link['ids_in_original_share']:.0f}% of the protected ids are "
            "original ids): an id already says who its user is, so linking adds nothing; what the release must "
            "hide is which queries are a user's own (the pair verdicts)",
        )
    exact = link["reidentified_share"]
    share = exact if exact is not None else link["confident_share"]
    bound, bound_text = _linkage_bound(result)
    what = "re-identified" if exact is not None else "linked to one original user with confidence"
    figure = (
        f"{100 * share:.1f}% of {n:,} protected users {what} by {by} (best of {len(link['by_evidence'])} "
        f"runs), against {bound_text}"
    )
    if share > bound:
        return guarantee_row(
            title,
            "attention",
            figure,
            "the release replaced the user ids but keeps each user's trail under one id that links back to "
            "its user (the AOL-2006 situation); the pair verdicts are scored on the linked ids",
        )
    return guarantee_row(title, "ok", figure, "no more protected users link to one original user than the bound allows")
