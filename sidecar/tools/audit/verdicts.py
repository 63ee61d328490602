"""Verdicts: the headline sentence (:func:`verdict`) and one verdict per guarantee with the figure it rests on.

A guarantee is what the chain promises: no original (user, query) pair re-created, no attack above 1/k,
epsilon per user, no identifier of a user's own queries left (nor copied to another user), k users per
cluster, users not linkable above chance. A guarantee's status is ``ok``, ``attention`` or ``not_applicable``
(with the reason: never "met"). A paper's empirical figure (paper 001's
best attack, 1.89% on the AOL log) is a reference shown beside the measurement, never a guarantee. The
report's headline is green only when :func:`verdict` passes *and* no guarantee needs attention.
"""

from __future__ import annotations

from typing import Any

from sidecar.tools.audit.linkage_verdict import guarantee_row as _g
from sidecar.tools.audit.linkage_verdict import linkage_verdict

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
    linked = linkage_verdict(result)
    if linked is not None and linked["status"] == "attention":
        return False, f"Attention: Users are linkable: {linked['figure']}."
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
            _g(
                "No original (user, query) pair re-created",
                "not_applicable",
                f"{result['matching_records']:,} records",
                why,
            ),
            _g("Attacks no better than 1/k (paper 001)", "not_applicable", f"best {100 * share:.2f}% of pairs", why),
        ]
    link = result.get("linkage")
    if link is not None and not link["ids_comparable"] and not link["linked_share"]:
        why = (
            "the release replaced every user id and no protected user links to an original one: (user, query) "
            "pairs cannot be scored"
        )
        return [
            _g("No original (user, query) pair re-created", "not_applicable", "not scored", why),
            _g("Attacks no better than 1/k (paper 001)", "not_applicable", "not scored", why),
        ]
    on = _scored_on(result)
    out = [
        _g(
            "No original (user, query) pair re-created (paper 001 log matcher)",
            "ok" if not result["matching_records"] else "attention",
            f"{result['matching_records']:,} protected records ({100 * result['matching_share']:.3f}%){on}",
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
                f"best per record {100 * r:.2f}% (blind guess {100 * result['chance_records_share']:.2f}%){on}"
                + _reference(result),
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
                f"best {100 * share:.2f}% ({best['name']}); blind guess {100 * chance:.2f}%{on}" + _reference(result),
                why,
            )
        )
    return out


def _scored_on(result: dict[str, Any]) -> str:
    """ " (on the linked ids)" when the release replaced its ids and the pair attacks ran on the linked ones."""
    link = result.get("linkage")
    return "" if link is None or link["ids_comparable"] else " (scored on the ids the linkage attack found)"


def _reference(result: dict[str, Any]) -> str:
    """Paper 001's best attack as a reference beside the measurement (never a guarantee)."""
    users = result.get("users_original", 0)
    return (
        f"; reference: paper 001's best attack at its lowest k, {100 * PAPER_BEST:.2f}% on the AOL log "
        f"of about {PAPER_USERS:,} users (this log: {users:,} users; fewer users per buffer, more lucky guesses)"
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
    link = linkage_verdict(result)
    if link is not None:
        out.insert(0, link)
    if "identifiers" in result:
        out += _identifier_guarantees(result)
        if "fields" in result["identifiers"]:
            out.append(_field_guarantee(result["identifiers"]["fields"]))
    return out


def _field_guarantee(fields: dict[str, Any]) -> dict[str, str]:
    """Identifiers in the fields that play no role (an address, an e-mail in a field nobody declared)."""
    p, o = fields["protected"], fields["original"]
    name = "No identifier left in any field (hipaa_scrub detectors)"
    if not p["fields_checked"]:
        return _g(name, "not_applicable", "the release has no field besides its roles", "nothing to scan")
    left = p["field_values_with_identifier"]
    where = "; ".join(f"{f}: {_types(t)}" for f, t in p["by_field"].items()) or "none"
    keyed = ", ".join(f"{f} {n:,}" for f, n in p.get("pseudonyms", {}).items())
    return _g(
        name,
        "ok" if not left else "attention",
        f"{left:,} field values in {len(p['by_field']):,} of {len(p['fields_checked']):,} fields ({where})",
        (
            "a field no policy covers (or one kept as it is) releases an identifier: give it a policy "
            "(schema.fields: drop, hash, ip_encrypt, scrub...; docs/FIELDS.md); "
            if left
            else "no field besides the roles holds a detected identifier; "
        )
        + f"the original had {o['field_values_with_identifier']:,} such field values"
        + (f"; keyed pseudonyms of a hash/ip_encrypt policy, not counted: {keyed}" if keyed else "")
        + "; values are never shown",
    )


def _types(counts: dict[str, int]) -> str:
    return ", ".join(f"{t} {n:,}" for t, n in counts.items()) or "none"


def _identifier_guarantees(result: dict[str, Any]) -> list[dict[str, str]]:
    """Identifiers in the released queries, by origin: the user's own queries (a leak), another user's
    (copied between users), or none (introduced by the protection: not a disclosure about a user)."""
    ids = result["identifiers"]
    checked = ids["protected"]["records_checked"]
    caveat = (
        f"the original had {ids['original']['records_with_identifier']:,} records with identifiers; detections "
        "are the scrubber's (names, places, dates... can be false alarms), values are never shown"
    )
    origin = ids.get("protected_origin")
    if origin is None:
        left = ids["protected"]["records_with_identifier"]
        return [
            _g(
                "No identifier left in the protected queries (hipaa_scrub detectors)",
                "ok" if not left else "attention",
                f"{left:,} of {checked:,} records; by type: {_types(ids['protected']['records_by_type'])}",
                caveat,
            )
        ]
    rec, found = origin["records_by_origin"], origin["found_by_origin"]
    own, copied, introduced = rec["own"], rec["copied"], rec["introduced"]
    dp = "dp" in result
    if dp:  # the mechanism draws from its concept domain, never from other users' queries: a coincidence
        introduced, copied = introduced + copied, 0
    drawn = (
        f"; {introduced:,} more hold identifiers the protection introduced (in no original query of their user"
        f"{'' if dp else ' nor of anyone'}: not a disclosure about a user)"
    )
    out = [
        _g(
            "No identifier from a user's own queries released (hipaa_scrub detectors)",
            "ok" if not own else "attention",
            f"{own:,} of {checked:,} records; by type: {_types(found['own'])}" + drawn,
            (
                "a released query holds an identifier that was in one of its user's original queries: a leak; "
                if own
                else "no released query holds an identifier its user had sent; "
            )
            + caveat,
        )
    ]
    if not dp:
        out.append(
            _g(
                "No identifier copied from one user to another",
                "ok" if not copied else "attention",
                f"{copied:,} of {checked:,} records; by type: {_types(found['copied'])}",
                "a user's identifying query reached other users' records (aggregation or re-pairing copies it "
                "to cluster- or bucket-mates): scrub before protecting (docs/MICROAGGREGATION.md)"
                if copied
                else "no released query holds an identifier that only other users had sent",
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
