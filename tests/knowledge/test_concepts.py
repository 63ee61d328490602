"""The WordNet noun taxonomy compiled into the KB (knowledge/concepts.py): a tree over pre-order ids."""

from __future__ import annotations

import numpy as np
from helpers.kb import kb_file

from knowledge import load_kb
from knowledge.concepts import concept_tree, tree_from_parents


def test_the_tree_holds_every_noun_synset_in_pre_order() -> None:
    """82,115 noun synsets under entity.n.01; every parent id is smaller than its child's and every subtree is
    the id range [n, n + size): the class sampler's binary searches rely on it."""
    tree = concept_tree(load_kb(kb_file(), build_if_needed=False))
    n = len(tree)
    assert n == 82_115 and tree.names[0] == "entity.n.01" and int(tree.parent[0]) == -1
    kids = np.arange(1, n)
    parents = tree.parent[1:]
    assert (parents < kids).all()
    assert (kids < parents + tree.size[parents]).all()  # each child inside its parent's range
    assert int(tree.size[0]) == n and (tree.depth[kids] == tree.depth[parents] + 1).all()
    assert tree.multi_parent == 2213


def test_multiple_inheritance_keeps_the_deepest_parent_and_senses_keep_wordnet_order() -> None:
    """person.n.01 (hypernyms causal_agent.n.01 and organism.n.01) stays under organism, the longer path to the
    root; a lemma key's senses come most frequent first; keys_of inverts senses."""
    tree = concept_tree(load_kb(kb_file(), build_if_needed=False))
    person = tree.node("person.n.01")
    assert person is not None
    assert tree.names[int(tree.parent[person])] == "organism.n.01"
    assert [tree.names[s] for s in tree.senses("apple")] == ["apple.n.01", "apple.n.02"]
    assert [tree.names[s] for s in tree.senses("flu")] == ["influenza.n.01"]
    assert "flu" in tree.keys_of(tree.senses("flu")[0]) and tree.senses("no such key") == ()
    assert tree.ancestors(person)[0] == 0 and tree.ancestors(person)[-1] == person


def test_small_trees_for_tests() -> None:
    """tree_from_parents builds the same structure from a parent map (pre-order, children by name)."""
    t = tree_from_parents({"r": None, "b": "r", "a": "r", "c": "a"}, keys={"x": ["c", "b"]})
    assert t.names == ("r", "a", "c", "b")
    assert t.size.tolist() == [4, 2, 1, 1] and t.depth.tolist() == [0, 1, 2, 1]
    assert [t.names[s] for s in t.senses("x")] == ["c", "b"]
