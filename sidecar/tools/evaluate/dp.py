"""``querylog eval dp``: paper 004's utility evaluation (Figures 2-4) with the shipped mechanism.

The evaluation set (paper 004 §4: "we have selected those queries that belong
to four general topics"): every query of the log is mapped to concepts exactly
as ``dp_replace`` maps them (:mod:`filters.dp_replace.mapping`, sense choice
restricted to the four domains), and the concepts under *disease*, *scientific
discipline* (``science.n.01``), *sport* or *social event* are kept.

**The 19 profile topics** (:data:`TOPICS19`) partition those four domains, so
that rho (eq. 6) puts every evaluation concept in exactly one topic, as the
paper's profiling does. The paper names some of its 19 (respiratory and genetic
diseases, natural and social science, contact and water sports, shows,
competitions) but not all, and WordNet's children of the four domains do not
cover them (disease has 39 children; the six largest hold 60% of it). So each
domain's topics are its largest children (the paper's named ones included) plus
the domain itself as a residual topic ("other diseases": the domain's concepts
under none of its listed children; a deeper listed synset wins). *This is our
choice where the paper is silent*; the earlier list (19 children only) left
22% of the domains' concepts in no topic, which made Setting A lose profile mass
to replacements the profiles could not place.

Utility loss (eq. 9-11): the mean over users of the Jensen-Shannon divergence
(base 2) between the user's topic profile from the original concepts and from
the protected ones. **A protected concept outside every profile topic** counts
in one extra ``other`` bin (default): a replacement that leaves the profile
topics is a loss of profile mass. This is the reading under which the paper's
statements on HBDP hold (Setting C about as bad as B, because the histograms are
the same size; B worse than A); with ``--drop-other`` such concepts are left out
of the profile instead (a user left with an empty profile counts as JSD 1), and
HBDP then scores the same in A and B and better in C than in B, contradicting
the paper. ``docs/DP_EVAL.md`` has both tables. Settings (paper Figure 1):

* **A** — D(q) = the input's domain among the four; profiles over the 19 topics;
* **B** — D(q) = ``abstraction.n.06`` for all; profiles over the 19 topics;
* **C** — D(q) = ``abstraction.n.06``; profiles over the four domains;
* **D(q)=P** — the domains are the profile topics (19 for A/B, 4 for C).

Methods: SQC1, SQC2 (rho = the profile topics), NSQC — each through the
filter's own class sampler (:class:`filters.dp_replace.sampler.Sampler`) — and
HBDP, the histogram baseline (§4): per user, a histogram over every concept of
the query domains (all of them at once: "one bin per concept"), two-sided
geometric (discrete Laplace) noise of scale Delta/eps on every bin with Delta =
the largest number of concepts of a user (the paper: "the maximum number of
queries of any log in the data set"), the whole histogram released with eps
("we can use the same eps to distort the counting of each bin"), negative counts
clipped to 0 (a released count; the paper does not say), the profile summed from
the noisy bins through rho. The bins without a query are summed exactly without
drawing each one: the number that come out positive is binomial, their sum a
negative binomial.

**Staying in the topic** (:func:`stay_rates`): for a sample of evaluation
concepts, the share of draws of each criterion that land in the input's profile
topic and in any profile topic, per eps per concept, beside the bound every
exponential mechanism obeys whatever its quality function: with all weights in
``[1, e^(eps/2)]``, a set of ``t`` of ``N`` candidates is hit with probability at
most ``t e^(eps/2) / (t e^(eps/2) + N - t)``. This is what decides Settings B/C.

Budget (``--budget``): ``user`` (Proposition 3: eps/m per concept, m the user's
concepts in the evaluation set) or ``query`` (eps per concept). HBDP spends eps
per user either way. Randomness: a seeded generator (this is a measurement, not a
release); each figure is the mean of ``--runs`` runs (3 in the paper). The tables, plots and page:
:mod:`.dp_report`.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

EPSILONS: tuple[float, ...] = (0.1, 0.5, 1.0, 2.0, 5.0, 10.0)
DOMAINS4: tuple[str, ...] = ("disease.n.01", "science.n.01", "sport.n.01", "social_event.n.01")
TOPICS19: tuple[str, ...] = (
    # disease.n.01: the residual topic (other diseases) and five children, the paper's respiratory and genetic ones
    "disease.n.01",
    "communicable_disease.n.01",
    "skin_disease.n.01",
    "genetic_disease.n.01",
    "malignancy.n.01",
    "respiratory_disease.n.01",
    # science.n.01 (scientific discipline): residual, natural and social science (the paper's), two more
    "science.n.01",
    "natural_science.n.01",
    "social_science.n.01",
    "mathematics.n.01",
    "linguistics.n.01",
    # sport.n.01: residual, contact and water sports (the paper's), two more
    "sport.n.01",
    "contact_sport.n.01",
    "water_sport.n.01",
    "athletic_game.n.01",
    "outdoor_sport.n.01",
    # social_event.n.01: residual (it and affair.n.03), shows and competitions (the paper's)
    "social_event.n.01",
    "show.n.03",
    "contest.n.01",
)
ABSTRACTION = "abstraction.n.06"
METHODS: tuple[str, ...] = ("SQC1", "SQC2", "NSQC", "HBDP")


@dataclass(frozen=True)
class Setting:
    name: str  # "A", "B", "C"
    domains: tuple[str, ...] | None  # None: the single domain ABSTRACTION
    profile: tuple[str, ...]


SETTINGS: dict[str, Setting] = {
    "A": Setting("A", DOMAINS4, TOPICS19),
    "B": Setting("B", None, TOPICS19),
    "C": Setting("C", None, DOMAINS4),
}
#: The D(q)=P variant of each figure: the domains are the profile topics.
EQUAL = {
    "A": Setting("A=P", TOPICS19, TOPICS19),
    "B": Setting("B=P", TOPICS19, TOPICS19),
    "C": Setting("C=P", DOMAINS4, DOMAINS4),
}


def jsd(p: npt.NDArray[np.float64], q: npt.NDArray[np.float64]) -> float:
    """Jensen-Shannon divergence, base 2, of two count vectors (eq. 9-10); 1.0 when exactly one is empty.

    scipy's ``jensenshannon`` is the distance (the square root): squared here, as paper 004 uses the divergence.
    """
    from scipy.spatial.distance import jensenshannon  # type: ignore[import-untyped]  # scipy ships no stubs

    sp, sq = float(p.sum()), float(q.sum())
    if sp <= 0 or sq <= 0:
        return 0.0 if sp == sq else 1.0
    return max(0.0, min(1.0, float(jensenshannon(p, q, base=2.0)) ** 2))


@dataclass
class EvalSet:
    """Users' concepts (nodes) under the four domains (= the 19 topics), in log order."""

    users: list[list[int]]
    queries: int  # records read
    mapped_queries: int  # records with at least one concept in the evaluation set
    concepts: int


def build_eval_set(records: Sequence[tuple[str, str]], kb: Any) -> EvalSet:
    """Map (user, query) records to concepts under the four domains (sense choice restricted to them)."""
    from filters.dp_replace.domains import Domains
    from filters.dp_replace.mapping import Mapper
    from knowledge.concepts import concept_tree

    tree = concept_tree(kb)
    mapper = Mapper(kb, tree, Domains(tree, "topics", topics=DOMAINS4), 200_000, drop_single=False)
    by_user: dict[str, list[int]] = {}
    mapped = 0
    for user, query in records:
        parts = mapper.map(query).parts
        if parts:
            mapped += 1
            by_user.setdefault(user, []).extend(p.node for p in parts)
    users = [nodes for _, nodes in sorted(by_user.items())]
    return EvalSet(users, len(records), mapped, sum(len(u) for u in users))


class Evaluation:
    """Runs the methods of paper 004 §4 on an evaluation set."""

    def __init__(self, kb: Any, data: EvalSet, seed: int, other_bin: bool = True) -> None:
        from filters.dp_replace.domains import Domains
        from knowledge.concepts import concept_tree

        self.tree = concept_tree(kb)
        self.data = data
        self.seed = seed
        self.other_bin = other_bin
        self._domains: dict[tuple[tuple[str, ...] | None, tuple[str, ...]], Domains] = {}
        self._labels: dict[tuple[str, ...], npt.NDArray[np.int32]] = {}
        self.Domains = Domains

    def domains(self, setting: Setting) -> Any:
        key = (setting.domains, setting.profile)
        d = self._domains.get(key)
        if d is None:
            if setting.domains is None:
                d = self.Domains(self.tree, "single", ABSTRACTION, sqc2_topics=setting.profile)
            else:
                d = self.Domains(self.tree, "topics", topics=setting.domains, sqc2_topics=setting.profile)
            self._domains[key] = d
        return d

    def labels(self, profile: tuple[str, ...]) -> npt.NDArray[np.int32]:
        """Profile topic of every node; ``len(profile)`` for none (the ``other`` bin)."""
        lab = self._labels.get(profile)
        if lab is None:
            from filters.dp_replace.domains import resolve, topic_labels

            lab = topic_labels(self.tree, resolve(self.tree, profile, "profile"))
            lab = np.where(lab < 0, len(profile), lab).astype(np.int32)
            self._labels[profile] = lab
        return lab

    def profile(self, nodes: Sequence[int], lab: npt.NDArray[np.int32], k: int) -> npt.NDArray[np.float64]:
        counts = np.bincount(lab[np.asarray(nodes, dtype=np.int64)], minlength=k + 1).astype(np.float64)
        return self.cut(counts, k)

    def cut(self, counts: npt.NDArray[np.float64], k: int) -> npt.NDArray[np.float64]:
        """The profile over the ``k`` topics, plus the ``other`` bin when it counts."""
        return counts if self.other_bin else counts[:k]

    def em(self, setting: Setting, criterion: str, eps: float, budget: str, run: int) -> float:
        """Mean JSD of one exponential-mechanism run."""
        from filters.dp_replace.rand import RandomPool
        from filters.dp_replace.sampler import Sampler

        d = self.domains(setting)
        rng = random.Random(f"{self.seed}/{setting.name}/{criterion}/{eps}/{budget}/{run}")
        sampler = Sampler(d, criterion, RandomPool(rng.randbytes))  # type: ignore[arg-type]  # a criterion name
        lab = self.labels(setting.profile)
        k = len(setting.profile)
        values = []
        for nodes in self.data.users:
            eps_q = eps / len(nodes) if budget == "user" else eps
            out = [sampler.draw(x, eps_q).node for x in nodes]
            values.append(jsd(self.profile(nodes, lab, k), self.profile(out, lab, k)))
        return float(np.mean(values))

    def hbdp(self, setting: Setting, eps: float, run: int) -> float:
        """Mean JSD of one run of the histogram baseline (discrete Laplace on every bin)."""
        d = self.domains(setting)
        lab = self.labels(setting.profile)
        k = len(setting.profile)
        bins = np.flatnonzero(d.label >= 0)  # every concept of the query domains
        per_topic = np.bincount(lab[bins], minlength=k + 1)
        sensitivity = max(len(u) for u in self.data.users)
        alpha = math.exp(-eps / sensitivity)
        gen = np.random.default_rng(random.Random(f"{self.seed}/{setting.name}/HBDP/{eps}/{run}").getrandbits(64))
        p_pos = alpha / (1.0 + alpha)
        values = []
        for nodes in self.data.users:
            counts = Counter(nodes)
            uniq = np.fromiter(counts, dtype=np.int64)
            c = np.fromiter(counts.values(), dtype=np.int64)
            # the user's own bins: max(0, c + Z), Z two-sided geometric
            z = (gen.geometric(1.0 - alpha, len(c)) - 1) - (gen.geometric(1.0 - alpha, len(c)) - 1)
            own = np.maximum(0, c + z).astype(np.float64)
            mine = np.bincount(lab[uniq], weights=own, minlength=k + 1)
            # the empty bins of each topic: K of them positive (binomial), their sum K + NegBin(K, 1 - alpha)
            empty = per_topic - np.bincount(lab[uniq], minlength=k + 1)
            positive = gen.binomial(empty, p_pos)
            extra = positive + np.where(positive > 0, gen.negative_binomial(np.maximum(positive, 1), 1.0 - alpha), 0)
            noisy: npt.NDArray[np.float64] = (mine + extra).astype(np.float64)
            values.append(jsd(self.profile(nodes, lab, k), self.cut(noisy, k)))
        return float(np.mean(values))


def run_evaluation(
    kb: Any,
    records: Sequence[tuple[str, str]],
    *,
    epsilons: Sequence[float] = EPSILONS,
    settings: Sequence[str] = ("A", "B", "C"),
    budgets: Sequence[str] = ("user", "query"),
    runs: int = 3,
    seed: int = 0,
    other_bin: bool = True,
    stay_epsilons: Sequence[float] = (1.0, 5.0, 10.0, 20.0, 50.0),
    stay_sample: int = 200,
) -> dict[str, Any]:
    """Every figure's table: ``{budget: {setting: {variant: {method: [mean JSD per eps]}}}}`` plus the data set."""
    data = build_eval_set(records, kb)
    if not data.users:
        raise ValueError("no query of the log maps to a concept under the four domains of paper 004 §4")
    ev = Evaluation(kb, data, seed, other_bin)
    tables: dict[str, Any] = {}
    for budget in budgets:
        tables[budget] = {}
        for name in settings:
            fig: dict[str, dict[str, list[float]]] = {}
            for variant, setting in (("D>P", SETTINGS[name]), ("D=P", EQUAL[name])):
                rows: dict[str, list[float]] = {}
                for method in METHODS:
                    row = []
                    for eps in epsilons:
                        if method == "HBDP":
                            vals = [ev.hbdp(setting, eps, r) for r in range(runs)]
                        else:
                            vals = [ev.em(setting, method.lower(), eps, budget, r) for r in range(runs)]
                        row.append(float(np.mean(vals)))
                    rows[method] = row
                fig[variant] = rows
            tables[budget][name] = fig
    m = [len(u) for u in data.users]
    stay = {}
    if stay_sample:
        stay = {name: stay_rates(ev, SETTINGS[name], stay_epsilons, stay_sample) for name in settings}
    return {
        "epsilons": list(epsilons),
        "runs": runs,
        "other_bin": other_bin,
        "data": {
            "records": data.queries,
            "records_with_an_evaluation_concept": data.mapped_queries,
            "users": len(data.users),
            "concepts": data.concepts,
            "concepts_per_user": {"mean": float(np.mean(m)), "median": float(np.median(m)), "max": int(max(m))},
        },
        "topics19": list(TOPICS19),
        "domains4": list(DOMAINS4),
        "tables": tables,
        "stay_epsilons": list(stay_epsilons),
        "stay": stay,
    }


def stay_rates(ev: Evaluation, setting: Setting, epsilons: Sequence[float], sample: int, draws: int = 50) -> Any:
    """Where replacements land, per eps *per concept*: the share of draws in the input's profile topic
    (``same``) and in any profile topic (``in_P``) for each criterion, over ``sample`` evaluation concepts
    (``draws`` each), beside the bound of any exponential mechanism with weights in ``[1, e^(eps/2)]``: the
    topics' ``t`` concepts among the domain's ``N`` are hit with probability at most
    ``t e^(eps/2) / (t e^(eps/2) + N - t)`` (``bound_in_P``, for the input's domain; mean over the sample)."""
    from filters.dp_replace.rand import RandomPool
    from filters.dp_replace.sampler import Sampler

    d = ev.domains(setting)
    lab = ev.labels(setting.profile)
    k = len(setting.profile)
    nodes = [x for u in ev.data.users for x in u]
    rng = random.Random(f"{ev.seed}/stay/{setting.name}")
    chosen = rng.sample(nodes, min(sample, len(nodes)))
    out: dict[str, Any] = {}
    for criterion in ("sqc1", "sqc2", "nsqc"):
        sampler = Sampler(d, criterion, RandomPool(rng.randbytes))
        same_row, in_row = [], []
        for eps in epsilons:
            same = inside = total = 0
            for x in chosen:
                for _ in range(draws):
                    o = sampler.draw(x, eps).node
                    same += int(lab[o] == lab[x])
                    inside += int(lab[o] < k)
                    total += 1
            same_row.append(same / total)
            in_row.append(inside / total)
        out[criterion.upper()] = {"same": same_row, "in_P": in_row}
    bounds = []
    for eps in epsilons:
        vals = []
        for x in chosen:
            t_dom = d.of(x)
            members = d.members(t_dom).members
            n_all = len(members)
            t = int(np.count_nonzero(lab[members] < k))
            g = math.exp(eps / 2.0)
            vals.append(t * g / (t * g + n_all - t))
        bounds.append(float(np.mean(vals)))
    out["bound_in_P"] = bounds
    return out
