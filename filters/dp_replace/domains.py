"""Domains D(q) (paper 004 §3.5-3.6), the topics of SQC2, and the sensitivity of each criterion.

A **domain** is a set of concepts of the taxonomy (:mod:`knowledge.concepts`);
its taxonomy tau(D) is everything below its least common subsumer (eq. 4),
depths and similarities are measured from that root. Three ways to give
every concept its domain (``domain`` option):

* ``single`` — one domain for everything: the subtree of ``root`` (default
  ``entity.n.01``, all 82,115 WordNet nouns; ``abstraction.n.06`` is paper 004's
  Settings B and C). The output reveals nothing about the topic of the input.
* ``category`` — one domain per category of the category taxonomy
  (``knowledge/data/categories.yaml``, the categories ``classify`` assigns): the
  domain of a category is the set of concepts the KB builder files under it
  (nearest anchor); a query's concepts are taken in the query's ``classify``
  category (:mod:`.mapping`), so D(q) is the query's category. Such a domain is
  not a subtree: tau(D) is everything below the least common subsumer of its
  concepts, candidates are its concepts only. The output reveals the category of
  each replaced query.
* ``topics`` — one domain per synset of the ``topics`` list (paper 004's
  Setting A: disease, science, sport, social event): a concept belongs to the
  nearest listed synset above it on its tree path. The output reveals that topic.

A concept outside every domain cannot be replaced: it counts as no concept.

**Topics of SQC2** (eq. 6, rho): the ``topics`` list when given, otherwise the
categories; concepts under no topic form one more group ("other"), which is a
topic like the others for eq. 6.

**Sensitivity** (``delta``): SQC1 ``max_sim - min_sim`` over two distinct
concepts of the domain (eq. 3; :meth:`.classes.MemberSet.min_similarity`),
SQC2 ``max_sim`` = 1 (eq. 7), NSQC 1 (eq. 12). Each is rounded up by a relative
2**-40, so that floating-point ties never make it smaller than a difference of
two computed qualities. A domain of one concept has no sensitivity: the
mechanism can only return its input (``single_concept`` says what happens then).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from filters.dp_replace.classes import Classes, MemberSet, TopicIndex, nsqc_classes, sqc1_classes, sqc2_classes
from knowledge.concepts import ConceptTree

Criterion = Literal["sqc1", "sqc2", "nsqc"]
DomainMode = Literal["single", "category", "topics"]
INFLATE = 1.0 + 2.0**-40


class UnknownSynset(ValueError):
    """A configured synset name is not a noun synset of the knowledge base."""

    def __init__(self, key: str, name: str) -> None:
        super().__init__(f"{name!r} is not a WordNet noun synset of the knowledge base (like sport.n.01)")
        self.key = key


def resolve(tree: ConceptTree, names: Sequence[str], key: str) -> list[int]:
    """Nodes of synset names; :class:`UnknownSynset` names the option (``key[i]``) of the first unknown one."""
    out = []
    for i, name in enumerate(names):
        node = tree.node(name)
        if node is None:
            raise UnknownSynset(f"{key}[{i}]", name)
        out.append(node)
    return out


def topic_labels(tree: ConceptTree, roots: Sequence[int]) -> npt.NDArray[np.int32]:
    """``label[node]`` = index of the nearest listed root above or at it (tree path), -1 under none."""
    label = np.full(len(tree), -1, dtype=np.int32)
    for i in sorted(range(len(roots)), key=lambda k: int(tree.depth[roots[k]])):  # deeper roots win
        r = roots[i]
        label[r : r + int(tree.size[r])] = i
    return label


@dataclass(frozen=True)
class DomainInfo:
    """What the docs, stats and checks say about one domain (no query data)."""

    name: str
    concepts: int
    root: str


class Domains:
    """The domain of every concept, each domain's candidate set, SQC2's topics, and the sensitivities."""

    def __init__(
        self,
        tree: ConceptTree,
        mode: DomainMode,
        root: str = "entity.n.01",
        topics: Sequence[str] = (),
        sqc2_topics: Sequence[str] | None = None,
    ) -> None:
        self.tree = tree
        self.mode = mode
        if mode == "single":
            r = tree.node(root)
            if r is None:
                raise UnknownSynset("root", root)
            self.label = np.full(len(tree), -1, dtype=np.int32)
            self.label[r : r + int(tree.size[r])] = 0
            self.names: list[str] = [root]
        elif mode == "category":
            self.label = tree.category.astype(np.int32)
            self.names = list(tree.categories)
        else:
            roots = resolve(tree, topics, "topics")
            self.label = topic_labels(tree, roots)
            self.names = list(topics)
        rho = topics if sqc2_topics is None else sqc2_topics
        if rho:
            self.topic = topic_labels(tree, resolve(tree, rho, "topics"))
        else:
            self.topic = tree.category.astype(np.int32)
        self._sets: dict[int, MemberSet] = {}
        self._same: dict[tuple[int, int], MemberSet] = {}
        self._topic_index: dict[int, TopicIndex] = {}
        self._min_sim: dict[int, float] = {}
        self._sizes = np.bincount(self.label[self.label >= 0], minlength=len(self.names))

    # --- lookups ---------------------------------------------------------------------

    def of(self, node: int) -> int:
        """The domain of ``node``, -1 when it is in none."""
        return int(self.label[node])

    def size(self, t: int) -> int:
        return int(self._sizes[t])

    def members(self, t: int) -> MemberSet:
        ms = self._sets.get(t)
        if ms is None:
            ms = self._sets[t] = MemberSet(self.tree, self.label == t)
        return ms

    def same_topic(self, t: int, topic: int) -> MemberSet:
        key = (t, topic)
        ms = self._same.get(key)
        if ms is None:
            ms = self._same[key] = MemberSet(self.tree, (self.label == t) & (self.topic == topic))
        return ms

    def topic_index(self, t: int) -> TopicIndex:
        ti = self._topic_index.get(t)
        if ti is None:
            ti = self._topic_index[t] = TopicIndex(self.members(t), self.topic)
        return ti

    def info(self) -> list[DomainInfo]:
        """Name, size and root synset of each non-empty domain (built lazily: costs a pass per domain)."""
        out = []
        for t, name in enumerate(self.names):
            if self._sizes[t]:
                ms = self.members(t)
                out.append(DomainInfo(name, ms.n, self.tree.names[ms.root]))
        return out

    def single_concept_domains(self) -> int:
        """Domains that hold exactly one concept (the mechanism can only return it)."""
        return int((self._sizes == 1).sum())

    # --- sensitivity and classes ---------------------------------------------------------

    def min_similarity(self, t: int) -> float:
        v = self._min_sim.get(t)
        if v is None:
            v = self._min_sim[t] = self.members(t).min_similarity()
        return v

    def delta(self, t: int, criterion: Criterion) -> float:
        """The sensitivity of ``criterion`` in domain ``t`` (0.0: one concept, no mechanism)."""
        if self.size(t) < 2:
            return 0.0
        if criterion == "sqc1":
            return (1.0 - self.min_similarity(t)) * INFLATE
        return 1.0 * INFLATE

    def classes(self, t: int, criterion: Criterion, node: int) -> Classes:
        """The classes of input ``node`` (a member of domain ``t``)."""
        domain = self.members(t)
        if criterion == "sqc1":
            return sqc1_classes(domain, node)
        if criterion == "nsqc":
            return nsqc_classes(domain, node)
        return sqc2_classes(domain, self.same_topic(t, int(self.topic[node])), node)
