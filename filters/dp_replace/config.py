"""Options of ``dp_replace``, with the privacy consequence of each (see also the package docstring).

``epsilon`` has no default: the privacy budget is a policy decision an operator
writes down (``config/dp.yaml`` chooses and explains one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from filters.dp_replace.mechanism import MAX_EPSILON
from sidecar.api import ConfigValueError, FilterConfig, option


@dataclass(frozen=True)
class DpReplaceConfig(FilterConfig):
    """Options of ``dp_replace``."""

    epsilon: float = option(
        doc="Privacy budget per user (natural log; required, no default). `budget: batch`: the user's whole "
        "log is epsilon-DP (each of the user's m concepts gets epsilon/m, paper 004 Proposition 3). "
        "`budget: stream`: epsilon per user per window (each concept gets epsilon/max_queries).",
        gt=0.0,
        max=MAX_EPSILON,
    )
    budget: Literal["batch", "stream"] = option(
        "stream",
        "How a user's budget is split: `batch` = epsilon/m with m the user's concept count from a first pass "
        "(`replay --prescan`, on by default for a file; without it every query is suppressed), `stream` = "
        "epsilon/max_queries per concept, at most max_queries concepts per user per window. Spending is kept "
        "in the state store and survives restarts.",
    )
    max_queries: int = option(
        100,
        "`budget: stream`: concepts a user may have replaced per window; later ones are suppressed "
        "(a query of n concepts spends n).",
        min=1,
    )
    window_seconds: float | None = option(
        86_400.0,
        "`budget: stream`: length of the budget window (tumbling, wall clock); the guarantee is epsilon per "
        "user per window, k windows compose to k*epsilon. null: one window forever (a lifetime budget).",
        gt=0.0,
    )
    domain: Literal["single", "category", "topics"] = option(
        "single",
        "Candidates for replacement (paper 004 §3.5-3.6): `single` = every concept under `root` (reveals no "
        "topic), `category` = the concepts of the query's classify category (reveals the category), `topics` = "
        "the concepts under the input's nearest synset of `topics` (reveals that topic).",
    )
    root: str = option(
        "entity.n.01",
        "`domain: single`: the WordNet noun synset whose subtree is the domain (entity.n.01: all 82,115 nouns; "
        "abstraction.n.06: paper 004 Settings B/C). Concepts outside it are dropped as having no concept.",
    )
    topics: tuple[str, ...] = option(
        (),
        "WordNet noun synsets: the domains of `domain: topics` (paper 004 Setting A: disease.n.01, science.n.01, "
        "sport.n.01, social_event.n.01) and the topics of SQC2 (default there: the categories).",
    )
    criterion: Literal["sqc1", "sqc2", "nsqc"] = option(
        "sqc1",
        "Quality criterion: `sqc1` = semantic similarity (eq. 5, sensitivity max-min over the domain), `sqc2` = "
        "similarity within the input's topic, 0 across topics (eq. 6-7, sensitivity 1), `nsqc` = 1 for the "
        "input itself, 0 otherwise (eq. 12, the non-semantic baseline).",
    )
    surface: Literal["shape", "plain", "paper"] = option(
        "shape",
        "How a replaced query is written: `shape` = the replacement labels in the query's places, with its stop "
        "words and plural forms (other words, modifiers included, are left out); `plain` = only the labels (the "
        "strict form: nothing of the input but its number of concepts); `paper` = paper 004 §3.4, which also "
        "re-adds the modifiers and other words of the input as typed (those words are NOT protected).",
    )
    no_concept: Literal["drop", "empty", "keep"] = option(
        "drop",
        "A query with no concept in any domain (names, brands, typos, empty): `drop` the event, `empty` its "
        "query (and dependent fields), or `keep` it as it came (NOT protected). Counted either way.",
    )
    budget_spent: Literal["suppress", "empty"] = option(
        "suppress",
        "A query whose concepts exceed the user's remaining budget: `suppress` the event, or `empty` its query "
        "(and dependent fields). Counted either way.",
    )
    single_concept: Literal["drop", "release"] = option(
        "drop",
        "A concept whose domain holds it alone (the mechanism could only return it, revealing it): `drop` it "
        "from the query (a query left with none follows no_concept), or `release` it unchanged (spends budget).",
    )
    dependent_roles: tuple[Literal["url", "rank"], ...] = option(
        ("url",),
        "Roles that depend on the original query and are emptied on every event this filter passes (a clicked "
        "URL would reveal the original query). Emptied whatever the replacement, so emptiness reveals nothing.",
    )
    dependent_fields: tuple[str, ...] = option(
        (), "Non-role record fields (TSV columns / JSON keys) emptied the same way (e.g. a result title)."
    )
    kb_path: str | None = option(
        None, "Compiled KB file (relative to the config file); default $QUERYLOG_KB or ~/.cache/querylog/kb.qlkb."
    )
    rebuild: bool = option(True, "Build the KB at startup when it is missing, corrupt or stale (takes ~30 s).")
    cache_size: int = option(
        100_000, "Distinct queries (mappings) and concepts (class tables) kept in memory each.", min=0
    )

    def __post_init__(self) -> None:
        if self.domain == "topics" and not self.topics:
            raise ConfigValueError("topics", "domain: topics needs a non-empty list of WordNet noun synsets")
        if len(set(self.topics)) != len(self.topics):
            raise ConfigValueError("topics", "a synset is listed twice")
        if self.budget == "stream" and self.epsilon / self.max_queries <= 0.0:
            raise ConfigValueError("max_queries", "epsilon / max_queries is too small to be a float")
