"""Verdicts: the headline sentence (:func:`verdict`) and one verdict per guarantee with the figure it rests on.

A guarantee's status is ``ok``, ``attention`` or ``info`` (a figure that does not apply to this kind of
release, with the reason). The report's headline is green only when :func:`verdict` passes *and* no
guarantee needs attention: a best attack far above a published reference line, identifiers left in the
output or a PEL above 1/k all turn it red, and the guarantee says why.
"""

from __future__ import annotations

from typing import Any

PAPER_BEST = 0.0189  # paper 001: best de-anonymizer, lowest k, full AOL log
PAPER_USERS = 650_000  # the AOL release the paper's figures come from
PEL_SLACK = 1.1
"""Mean PEL may exceed 1/k by 10% before it needs attention: paper 003 calls its PEL "very close" to 1/k,
and the overlap coupling adds ``(1 - 1/k) log2(k / (k - 1)) / H(φ)`` above 1/k for a user with few queries."""


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


def _g(guarantee: str, status: str, figure: str, why: str) -> dict[str, str]:
    return {"guarantee": guarantee, "status": status, "figure": figure, "why": why}


def microaggregation_k(result: dict[str, Any]) -> tuple[int | None, str]:
    """The microaggregation's k and where it comes from: ``--params k=...``, else the smallest group of
    identical protected profiles when the log looks microaggregated, else None."""
    params = result.get("provenance", {}).get("params", {})
    if "k" in params:
        return int(params["k"]), "from --params"
    micro = result.get("microaggregation")
    if micro and micro.get("looks_microaggregated"):
        return int(micro["identical_groups"]["smallest"]), "the smallest group of identical profiles"
    return None, ""


def _attack_guarantees(result: dict[str, Any], micro: bool) -> list[dict[str, str]]:
    k = result["attacker"]["k"]
    best = result["best_deanonymizer"]
    share = best["recovered_share"]
    chance = result["chance_share"]
    if micro:
        why = (
            "paper 001's attacks rebuild its category buffers; microaggregation keeps every user's own queries in "
            "their cluster's aggregate by design (paper 003), so (user, query) pairs are recovered at about 1/k "
            "of each profile. PEL and the groups of identical profiles are its guarantees (below)."
        )
        return [
            _g("No original (user, query) pair re-created", "info", f"{result['matching_records']:,} records", why),
            _g("Attacks no better than 1/k (paper 001)", "info", f"best {100 * share:.2f}% of pairs", why),
        ]
    out = [
        _g(
            "No original (user, query) pair re-created (paper 001 log matcher)",
            "ok" if not result["matching_records"] else "attention",
            f"{result['matching_records']:,} protected records ({100 * result['matching_share']:.3f}%)",
            "a re-created pair puts a query back with a user who sent it"
            if result["matching_records"]
            else "every released query went to a user who never sent that text",
        )
    ]
    rec = result.get("best_records_deanonymizer")
    if rec is not None:
        r = rec["recovered_records_share"]
        out.append(
            _g(
                f"No attack puts more than 1/k = {100 / k:.2f}% of queries back with their own sender",
                "ok" if r <= 1 / k else "attention",
                f"best per record {100 * r:.2f}% (blind guess {100 * result['chance_records_share']:.2f}%)",
                "scored per record through the instance field: a coincidence between users sharing a text "
                "does not count",
            )
        )
    else:
        why = "the best attack stays at or below 1/k"
        if share > 1 / k:
            why = (
                "no better than a blind guess: users of this log share many query texts"
                if share <= chance
                else "the attacks recover more pairs than chance would"
            )
        out.append(
            _g(
                f"No attack recovers more than 1/k = {100 / k:.2f}% of (user, query) pairs",
                "ok" if share <= 1 / k else "attention",
                f"best {100 * share:.2f}% ({best['name']}); blind guess {100 * chance:.2f}%",
                why,
            )
        )
    out.append(_paper_line_guarantee(result, share, chance))
    return out


def _paper_line_guarantee(result: dict[str, Any], share: float, chance: float) -> dict[str, str]:
    """The best attack's share of pairs against paper 001's published line (its best attack at its lowest k)."""
    if share <= PAPER_BEST:
        return _g(
            "Best attack at or below paper 001's published line",
            "ok",
            f"{100 * share:.2f}% vs {100 * PAPER_BEST:.2f}%",
            "the line is the paper's best attack at its lowest k on the AOL log",
        )
    users = result.get("users_original", 0)
    why = (
        f"the line ({100 * PAPER_BEST:.2f}%) is the paper's best attack at its lowest k on the AOL log of about "
        f"{PAPER_USERS:,} users, where a category buffer mixes many users; this log has {users:,} users, so a "
        "buffer's users are fewer and a guess lands more often"
    )
    if share <= chance:
        why += f"; here a blind guess already reaches {100 * chance:.2f}% (users share query texts)"
    return _g(
        "Best attack at or below paper 001's published line",
        "attention",
        f"{100 * share:.2f}% = {share / PAPER_BEST:.1f}x the paper's {100 * PAPER_BEST:.2f}% "
        "(drawn on the attack chart)",
        why,
    )


def _micro_guarantees(result: dict[str, Any]) -> list[dict[str, str]]:
    m = result["microaggregation"]
    k, source = microaggregation_k(result)
    out = []
    groups = m["identical_groups"]
    if k is not None:
        ok = groups["smallest"] >= k and groups["users_alone"] == 0
        out.append(
            _g(
                f"User k-anonymity, k = {k} ({source})",
                "ok" if ok else "attention",
                f"smallest group of identical protected profiles: {groups['smallest']} users; "
                f"{groups['users_alone']:,} users alone",
                "every user's protected queries are identical to those of at least k-1 others"
                if ok
                else "a group smaller than k lets its users be told apart",
            )
        )
        p = m["pel"]
        out.append(
            _g(
                f"PEL close to the 1/k line = {100 / k:.1f}% (paper 003 Fig. 3; at most {PEL_SLACK:.1f}/k)",
                "ok" if p["mean"] <= PEL_SLACK / k else "attention",
                f"mean PEL {100 * p['mean']:.1f}% over {p['users']:,} users (median {100 * p['median']:.1f}%, "
                f"max {100 * p['max']:.1f}%)",
                "paper 003 finds the mean PEL close to 1/k (50% at k=2, 10% at k=10)"
                if p["mean"] <= PEL_SLACK / k
                else "users with more queries than their clustermates fill more than 1/k of the aggregate "
                "(paper 003's aggregation apportions by query count), so their profile shows through more",
            )
        )
        low = [lvl for lvl in ("L1", "L2", "L3") if lvl in m["srp"] and m["srp"][lvl]["mean"] < 1 / k]
        figures = ", ".join(f"{lvl} {100 * v['mean']:.1f}%" for lvl, v in m["srp"].items() if lvl <= "L3")
        out.append(
            _g(
                f"SRP above the 1/k random-partition bound = {100 / k:.1f}% at L1..L3 (paper 002 eq. 5)",
                "attention" if low else "ok",
                figures or "no classified queries",
                f"below the bound at {', '.join(low)}: clusters no more alike in topic than a random grouping"
                if low
                else "the clusters keep more of each user's topics than a random grouping would",
            )
        )
    return out


def guarantees(result: dict[str, Any]) -> list[dict[str, str]]:
    """One verdict per guarantee, each with its status, the figure it rests on and why."""
    micro = bool(result.get("microaggregation", {}).get("looks_microaggregated")) or "k" in result.get(
        "provenance", {}
    ).get("params", {})
    dp = result.get("dp")
    out: list[dict[str, str]] = []
    if dp is not None:
        over = dp["user_windows_over_budget"]
        out.append(
            _g(
                f"Every user within epsilon = {dp['epsilon']} (paper 004)",
                "ok" if not over else "attention",
                f"{over:,} user-windows over budget; largest spent {dp['epsilon_spent_per_user_window']['max']:.4g}",
                "read from the dp_replace budget ledger (exact fractions)",
            )
        )
    else:
        out += _attack_guarantees(result, micro)
    if "microaggregation" in result:
        out += _micro_guarantees(result)
    ids = result.get("identifiers")
    if ids is not None:
        left = ids["protected"]["records_with_identifier"]
        types = ", ".join(f"{t} {n:,}" for t, n in ids["protected"]["records_by_type"].items()) or "none"
        out.append(
            _g(
                "No identifier left in the protected queries (hipaa_scrub detectors)",
                "ok" if not left else "attention",
                f"{left:,} of {ids['protected']['records_checked']:,} records; by type: {types}",
                f"the original had {ids['original']['records_with_identifier']:,} such records; detections are "
                "the scrubber's (names, places, dates... can be false alarms), values are never shown",
            )
        )
    return out


def headline(result: dict[str, Any]) -> tuple[bool, str]:
    """The report's headline: :func:`verdict`, turned to attention when any guarantee needs it."""
    ok, text = verdict(result, result["attacker"]["k"])
    attention = [g for g in guarantees(result) if g["status"] == "attention"]
    micro = result.get("microaggregation", {}).get("looks_microaggregated")
    if micro and result.get("dp") is None:
        ok, text = True, "A microaggregated release: paper 001's pair measures do not apply (see the guarantees)."
    if attention:
        names = "; ".join(g["guarantee"] for g in attention)
        return False, f"Attention: {len(attention)} guarantee(s) not met — {names}. " + text.removeprefix("Attention: ")
    return ok, text
