"""``dp_replace``: epsilon-differentially private query replacement (paper 004), per-user budget.

Every query is mapped to concepts of the WordNet noun taxonomy (paper 004 §3.4,
:mod:`.mapping`); each concept is replaced by one drawn with the **exponential
mechanism** from its domain D(q) (§3.5-3.6, :mod:`.domains`) with probability
proportional to ``exp(eps_q * u(c, o) / (2 * Delta))`` for the configured quality
criterion ``u`` (SQC1 eq. 5, SQC2 eq. 6-7, NSQC eq. 12) and its sensitivity
``Delta``; the query is written back from the replacements (:mod:`.surface`).
The record keeps its schema: only the query and the configured dependent fields
(the clicked URL by default) change. ``filters/dp_replace/README.md`` is the
operator's page; what follows are the decisions behind it.

**Privacy unit and guarantee.** A user (the ``user`` role). With ``budget:
batch`` the user's whole log is epsilon-DP w.r.t. replacing any of the user's
concepts by another concept *of the same domain* (Proposition 3: each of the
user's m concepts gets epsilon/m; users compose in parallel, Proposition 1).
With ``budget: stream`` each concept gets epsilon/max_queries and a user may
spend at most epsilon per window. **Not protected**, as in the paper: which users
exist, how many records each has, their times, ranks and other fields (only the
dependent ones are emptied), how many concepts each query has, which domain each
replacement comes from (with ``domain: category`` / ``topics``: the topic of the
original), and which queries had no concept when those are dropped (the count of
records changes). The ``surface`` option decides what else of the input's wording
is kept (:mod:`.surface`).

**Sampling (exact up to a documented float bound).** Candidates are grouped in
classes of equal quality (:mod:`.classes`: per ancestor and depth on the
tree); a class is drawn with integer weights and an exact CSPRNG integer draw,
then a member uniformly (:mod:`.mechanism`): no floating-point CDF walk, no
output with probability zero. The float error is bounded: the implemented
mechanism is (eps_q + overrun)-DP per query with overrun = 9.8e-14 at eps_q = 1
(:func:`.mechanism.overrun`). Randomness: ``BuildContext.token_bytes``
(``secrets``) unless a test or benchmark gave a seed.

**Multiple inheritance.** WordNet is a DAG; the KB keeps each synset's deepest
parent (:mod:`knowledge.concepts`), and similarity, domains and sensitivity are
computed on that tree.

**Budget.** Exact fractions in a SQLite ledger of its own (:mod:`.budget`),
committed *before* a batch is released, so a crash or a failed delivery (after
which the runtime processes the same events again, with fresh draws) can waste
budget but never let a user spend more than epsilon; spent budget ->
``budget_spent`` (suppressed by default), counted.

**Empty queries** (``""`` or only spaces) have no concept: they follow
``no_concept`` (dropped by default) and are counted as ``empty_query`` too; a
query is never invented for them.

Modules: :mod:`.config` (options), :mod:`.filter` (the filter), :mod:`.mapping`,
:mod:`.domains`, :mod:`.classes`, :mod:`.mechanism`, :mod:`.sampler`,
:mod:`.rand`, :mod:`.surface`, :mod:`.budget`.
"""

from filters.dp_replace.config import DpReplaceConfig
from filters.dp_replace.filter import DpReplaceFilter

NAME = "dp_replace"

__all__ = ["NAME", "DpReplaceConfig", "DpReplaceFilter"]
