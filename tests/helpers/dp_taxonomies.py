"""Small taxonomies for the dp_replace tests, and paper 004's formulas restated from sets (brute force)."""

from __future__ import annotations

import math
import random

from knowledge.concepts import ConceptTree, tree_from_parents


def random_tree(seed: int, n: int = 40, categories: int = 3) -> ConceptTree:
    """A random tree of ``n + 1`` concepts (``root``, ``n0``...), each with a category ``i % categories``."""
    rng = random.Random(seed)
    parents: dict[str, str | None] = {"root": None}
    names = ["root"]
    for i in range(n):
        # prefer recent nodes now and then, so the tree has some depth
        p = rng.choice(names[-5:]) if rng.random() < 0.4 else rng.choice(names)
        name = f"n{i}.n.01"
        parents[name] = p
        names.append(name)
    cats = tuple(f"C{i}" for i in range(categories))
    return tree_from_parents(parents, category={m: i % categories for i, m in enumerate(names)}, categories=cats)


def subsumers(tree: ConceptTree, node: int, root: int) -> set[int]:
    """S(node): its ancestors in the taxonomy under ``root``, itself included (paper 004 §3.5)."""
    path = tree.ancestors(node)
    return set(path[path.index(root) :])


def sim(tree: ConceptTree, x: int, y: int, root: int) -> float:
    """Eq. 5 from the subsumer sets."""
    a, b = subsumers(tree, x, root), subsumers(tree, y, root)
    return 1.0 - math.log2(1.0 + (len(a | b) - len(a & b)) / len(a | b))


def quality(tree: ConceptTree, criterion: str, x: int, o: int, root: int, topic: list[int]) -> float:
    """SQC1 (eq. 5), SQC2 (eq. 6) or NSQC (eq. 12) of output ``o`` for input ``x``."""
    if criterion == "sqc1":
        return sim(tree, x, o, root)
    if criterion == "nsqc":
        return 1.0 if o == x else 0.0
    return sim(tree, x, o, root) if topic[x] == topic[o] else 0.0


def exponential(
    tree: ConceptTree, criterion: str, x: int, members: list[int], root: int, topic: list[int], eps: float
) -> dict[int, float]:
    """Eq. 2 by brute force over every candidate, with the sensitivity of eq. 3 / 7 / 12 from all pairs."""
    delta = 1.0
    if criterion == "sqc1":  # eq. 3: max_sim (1) - min_sim over distinct pairs
        delta -= min(sim(tree, u, v, root) for u in members for v in members if u != v)
    w = {o: math.exp(eps * quality(tree, criterion, x, o, root, topic) / (2.0 * delta)) for o in members}
    z = sum(w.values())
    return {o: v / z for o, v in w.items()}
