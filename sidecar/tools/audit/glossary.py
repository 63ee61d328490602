"""Plain-words names of the audit's measures: what each computes and which paper it comes from.

The report shows these beside every figure, so a reader never meets ``deanonymizer_1+T`` or
"JSD, base 2" alone.
"""

from __future__ import annotations

_ATTACKS = {
    "deanonymizer_1": "pairs a random user of the rebuilt buffer with a random query",
    "deanonymizer_2": "pairs the user appearing most often in the rebuilt buffer with a random query",
    "deanonymizer_3": "pairs the user with the most earlier queries in that category (history) with a random query",
    "deanonymizer_4": "pairs the user with the highest history count times appearances with a random query",
}

MEASURES: dict[str, tuple[str, str]] = {
    "matcher": (
        "Log matcher",
        "paper 001 §3.3.3: counts protected records that put a query back with a user who sent that text",
    ),
    "chance": (
        "Blind guess",
        "baseline of this audit: users shuffled at random within each category; what coincidences 'recover'",
    ),
    "jsd": (
        "Profile divergence (Jensen-Shannon)",
        "paper 004 eq. 9-11: how far a user's category profile moved, from 0 (same interests) to 1 "
        "(nothing in common), computed in bits",
    ),
    "pel": (
        "Profile Exposure Level (PEL)",
        "paper 003 §4.1: the share of a user's query information an observer of the protected profile learns "
        "(mutual information of original and protected queries over the original's entropy); lower = more private",
    ),
    "ilr": (
        "Information Loss Ratio (ILR)",
        "paper 003 §4.2: how much the entropy of a user's queries changed, relative to the original; "
        "lower = more utility kept",
    ),
    "srp": (
        "Semantic Remain Percentage (SRP)",
        "paper 002 eq. 4: the share of a user's original queries whose topic (taxonomy level L1..L5) is still "
        "in their protected queries; a random grouping of users keeps 1/k (eq. 5)",
    ),
    "rand": (
        "Rand index of clusterings",
        "paper 003 §4.4: the share of user pairs that k-means groups the same way (together or apart) in the "
        "original and the protected log; 1 = same grouping",
    ),
    "jaccard": (
        "Jaccard index of clusterings",
        "paper 003 §4.4: of the user pairs grouped together in either log, the share grouped together in both",
    ),
    "top": (
        "Frequency tables",
        "paper 003 §4.5: the 10 most frequent queries and words (stop words out), counted in both logs",
    ),
    "groups": (
        "Groups of identical profiles",
        "user k-anonymity (papers 003, 002): users whose protected queries are the same multiset; the smallest "
        "group is the k the log shows",
    ),
    "identifiers": (
        "Identifiers left",
        "the hipaa_scrub detectors (paper 001's classifier step, HIPAA Safe Harbor types) run over every "
        "protected query; counts per type, never the values",
    ),
}


def attack(name: str) -> str:
    """``deanonymizer_3+T`` -> plain words (paper 001 Algorithm 3, §4.2.2)."""
    base, timed = name.removesuffix("+T"), name.endswith("+T")
    number = base.rpartition("_")[2]
    what = _ATTACKS.get(base, "an attack")
    order = "the protected log replayed in time order" if timed else "the protected log in file order"
    return f"De-anonymizer {number} (paper 001 Algorithm 3): {what}; {order}"


def label(key: str) -> str:
    """``Name — what it is (paper)`` for a measure key of :data:`MEASURES`."""
    name, words = MEASURES[key]
    return f"{name} — {words}"


def hidden_texts(k: int) -> str:
    """The rule every table and chart of texts follows, in words."""
    return (
        f"A query or word sent by fewer than k = {k} distinct users of the original log (the release's k) is what "
        "the release protects: it is never printed, its row shows how many users sent it and its length only. A "
        "text absent from the original log counts no user."
    )
