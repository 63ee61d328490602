"""The WordNet noun taxonomy as a tree, compiled into the KB: what ``dp_replace`` (paper 004) samples from.

The classifier needs only lemma -> category; the exponential mechanism of paper 004
needs the taxonomy itself: every noun synset, its ancestors, its depth, the
subtree below it, its label and the lemma keys that name it. The builder
(:func:`compile_concepts`, called by ``querylog kb build``) stores them in the KB
file's ``concepts`` section; :func:`concept_tree` turns that section into numpy
arrays on first use (about a tenth of a second, once per process).

**One parent per synset (WordNet's multiple inheritance).** WordNet 3.0 has
82,115 noun synsets under one root (``entity.n.01``); 2,213 of them have more than
one hypernym (instance hypernyms counted as hypernyms). The tree keeps, for each
synset, the parent with the **longest path to the root** (the most specific
parent: ``person.n.01`` stays under ``organism.n.01`` rather than under
``causal_agent.n.01``); ties go to the parent whose synset name sorts first. A
synset's ancestors, depth, subtree and domain membership are those of this
tree. This changes which concepts count as similar (the similarity of paper 004
eq. 5 is computed on the tree, not on the union of all hypernym paths), never a
privacy guarantee: the sensitivity is computed for the similarity actually used.

**Node order.** Nodes are stored in pre-order (children sorted by synset name),
so node ids *are* pre-order positions: the subtree of node ``n`` is the id range
``[n, n + size[n])`` and every parent id is smaller than its children's.

**Lemma keys.** ``senses(key)`` gives the synsets a lemma key (``key_of`` of a
WordNet lemma name: ``new_york`` -> ``new york``) names, in WordNet's sense order
(most frequent first), the same keys the classifier's semantic units match.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from knowledge.text import key_of

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from knowledge.store import KnowledgeBase

ROOT_NAME = "entity.n.01"


def _le(values: list[int], typecode: str) -> bytes:
    from array import array

    a = array(typecode, values)
    if sys.byteorder != "little":
        a.byteswap()
    return a.tobytes()


def _label(s: Any) -> str:
    name: str = s.lemmas()[0].name()
    return name.replace("_", " ")


def compile_concepts(wn: Any, category_of: Callable[[Any], int]) -> dict[str, Any]:
    """The ``concepts`` section of the KB payload from an nltk WordNet reader.

    ``category_of(synset)`` is the builder's category index of a synset (-1: none).
    Deterministic: equal WordNet files give equal bytes.
    """
    synsets = {s.name(): s for s in wn.all_synsets("n")}
    primary, multi = _primary_parents(synsets)
    order = _preorder(primary)
    ident = {name: i for i, name in enumerate(order)}
    parent = [-1 if primary[n] is None else ident[primary[n] or ""] for n in order]
    categories = [category_of(synsets[n]) for n in order]
    keys, sense_offsets, sense_nodes = _senses_by_key(wn, ident)
    return {
        "names": "\n".join(order),
        "labels": "\n".join(_label(synsets[n]) for n in order),
        "parent": _le(parent, "i"),
        "category": _le(categories, "b"),
        "keys": "\n".join(keys),
        "sense_offsets": _le(sense_offsets, "I"),
        "sense_nodes": _le(sense_nodes, "I"),
        "multi_parent": multi,
    }


def _primary_parents(synsets: dict[str, Any]) -> tuple[dict[str, str | None], int]:
    """Each synset's one parent in the tree (the deepest hypernym, ties to the first name; None for the root),
    and how many synsets have more than one hypernym."""
    parents_of = {
        name: sorted({p.name() for p in s.hypernyms() + s.instance_hypernyms()}) for name, s in sorted(synsets.items())
    }
    height: dict[str, int] = {}  # longest path to the root, in edges

    def longest(name: str) -> int:
        todo = [name]
        while todo:
            cur = todo[-1]
            if cur in height:
                todo.pop()
                continue
            missing = [p for p in parents_of[cur] if p not in height]
            if missing:
                todo.extend(missing)
                continue
            height[cur] = 1 + max((height[p] for p in parents_of[cur]), default=-1)
            todo.pop()
        return height[name]

    primary: dict[str, str | None] = {}
    multi = 0
    for name in sorted(synsets):
        ps = parents_of[name]
        if len(ps) > 1:
            multi += 1
        best: str | None = None  # the deepest parent (longest path to the root); ties: the first name
        for p in ps:  # sorted by name
            if best is None or longest(p) > longest(best):
                best = p
        primary[name] = best
    return primary, multi


def _preorder(primary: dict[str, str | None]) -> list[str]:
    """The synset names in pre-order of the tree under :data:`ROOT_NAME` (children by name)."""
    roots = [n for n, p in primary.items() if p is None]
    if roots != [ROOT_NAME]:
        raise ValueError(f"WordNet nouns should have the one root {ROOT_NAME}, found {len(roots)} roots")
    children: dict[str, list[str]] = {}
    for name, p in primary.items():
        if p is not None:
            children.setdefault(p, []).append(name)
    order: list[str] = []
    stack = [ROOT_NAME]
    while stack:
        cur = stack.pop()
        order.append(cur)
        stack.extend(sorted(children.get(cur, ()), reverse=True))  # pre-order, children by name
    if len(order) != len(primary):
        raise ValueError("the noun taxonomy is not a connected tree under its root")
    return order


def _senses_by_key(wn: Any, ident: dict[str, int]) -> tuple[list[str], list[int], list[int]]:
    """Lemma key -> nodes in WordNet's sense order (per lemma name: index.noun order; names merged in order), as
    the sorted keys, the offsets of each key's run and the runs of nodes."""
    by_key: dict[str, list[int]] = {}
    offsets = wn._lemma_pos_offset_map  # lemma name -> pos -> [offsets in sense order]
    for lemma_name in sorted(offsets):
        noun_offs = offsets[lemma_name].get("n")
        if not noun_offs:
            continue
        key = key_of(lemma_name)
        if not key:
            continue
        nodes = by_key.setdefault(key, [])
        for off in noun_offs:
            node = ident[wn.synset_from_pos_and_offset("n", off).name()]
            if node not in nodes:
                nodes.append(node)
    keys = sorted(by_key)
    sense_offsets = [0]
    sense_nodes: list[int] = []
    for k in keys:
        sense_nodes.extend(by_key[k])
        sense_offsets.append(len(sense_nodes))
    return keys, sense_offsets, sense_nodes


@dataclass(frozen=True, eq=False)
class ConceptTree:
    """The noun taxonomy as arrays over node ids (pre-order). See the module docstring."""

    names: tuple[str, ...]
    labels: tuple[str, ...]
    parent: npt.NDArray[np.int32]  # -1 for the root
    depth: npt.NDArray[np.int32]  # the root has depth 0
    size: npt.NDArray[np.int32]  # nodes in the subtree, the node included
    category: npt.NDArray[np.int8]  # index into KnowledgeBase.categories, -1: none
    categories: tuple[str, ...]
    multi_parent: int  # synsets with more than one hypernym in WordNet
    _parents: list[int] = field(repr=False)  # ``parent`` as Python ints (fast ancestor walks)
    _index: dict[str, int] = field(repr=False)
    _keys: dict[str, int] = field(repr=False)
    _sense_offsets: npt.NDArray[np.uint32] = field(repr=False)
    _sense_nodes: npt.NDArray[np.uint32] = field(repr=False)
    _names_of: dict[int, list[str]] = field(default_factory=dict, repr=False)  # filled on first use

    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return f"<ConceptTree concepts={len(self.names)} max_depth={self.max_depth}>"

    @property
    def max_depth(self) -> int:
        return int(self.depth.max())

    def node(self, name: str) -> int | None:
        """The node of synset ``name`` (``sport.n.01``), None when there is no such noun synset."""
        return self._index.get(name)

    def senses(self, key: str) -> tuple[int, ...]:
        """The nodes lemma key ``key`` names, most frequent sense first (empty: not a WordNet noun)."""
        i = self._keys.get(key)
        if i is None:
            return ()
        lo, hi = int(self._sense_offsets[i]), int(self._sense_offsets[i + 1])
        return tuple(int(n) for n in self._sense_nodes[lo:hi])

    def keys_in_order(self) -> list[str]:
        """Every lemma key, in the order :meth:`keys_of` lists them."""
        return list(self._keys)

    def keys_of(self, node: int) -> list[str]:
        """Every lemma key that names ``node`` (the inverse of :meth:`senses`, built on first use)."""
        inverse = self._names_of
        if not inverse:
            keys = sorted(self._keys, key=self._keys.__getitem__)
            offsets = self._sense_offsets.tolist()
            nodes = self._sense_nodes.tolist()
            for i, k in enumerate(keys):
                for n in nodes[offsets[i] : offsets[i + 1]]:
                    inverse.setdefault(n, []).append(k)
        return inverse.get(node, [])

    def ancestors(self, node: int) -> list[int]:
        """The path from the root down to ``node`` (both included)."""
        path = []
        parent = self._parents
        cur = node
        while cur >= 0:
            path.append(cur)
            cur = parent[cur]
        path.reverse()
        return path

    def is_under(self, node: int, root: int) -> bool:
        """``node`` is ``root`` or below it."""
        return root <= node < root + int(self.size[root])


def _array(raw: bytes, dtype: str) -> Any:
    import numpy as np

    return np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).astype(dtype)


def build_tree(section: dict[str, Any], categories: tuple[str, ...]) -> ConceptTree:
    """A :class:`ConceptTree` from a KB ``concepts`` section."""
    import numpy as np

    names = tuple(section["names"].split("\n"))
    n = len(names)
    parent = _array(section["parent"], "int32")
    if len(parent) != n:
        raise ValueError("concept arrays differ in length")
    depth = np.zeros(n, dtype=np.int32)
    # parents come before their children (pre-order): one forward pass per level, vectorised
    has_parent = parent >= 0
    idx = np.flatnonzero(has_parent)
    for _ in range(n):
        new = depth[parent[idx]] + 1
        if np.array_equal(new, depth[idx]):
            break
        depth[idx] = new
    size = np.ones(n, dtype=np.int32)
    for level in range(int(depth.max()), 0, -1):
        nodes = np.flatnonzero(depth == level)
        np.add.at(size, parent[nodes], size[nodes])
    keys = section["keys"].split("\n") if section["keys"] else []
    return ConceptTree(
        names=names,
        labels=tuple(section["labels"].split("\n")),
        parent=parent,
        depth=depth,
        size=size,
        category=_array(section["category"], "int8"),
        categories=categories,
        multi_parent=int(section["multi_parent"]),
        _parents=parent.tolist(),
        _index={name: i for i, name in enumerate(names)},
        _keys={k: i for i, k in enumerate(keys)},
        _sense_offsets=_array(section["sense_offsets"], "uint32"),
        _sense_nodes=_array(section["sense_nodes"], "uint32"),
    )


#: Trees by KB hash (a process holds one or two KBs).
_TREES: dict[str, ConceptTree] = {}


def concept_tree(kb: KnowledgeBase) -> ConceptTree:
    """The taxonomy of ``kb``, unpacked on first use."""
    tree = _TREES.get(kb.sha256)
    if tree is None:
        tree = _TREES[kb.sha256] = build_tree(kb.concepts, kb.categories)
    return tree


def tree_from_parents(
    parents: dict[str, str | None],
    *,
    category: dict[str, int] | None = None,
    categories: tuple[str, ...] = (),
    keys: dict[str, list[str]] | None = None,
) -> ConceptTree:
    """A small :class:`ConceptTree` from ``{name: parent name or None}`` (one root): tests and examples.

    ``category``: name -> category index (others -1); ``keys``: lemma key -> synset names in sense order.
    Labels are the names up to their first dot.
    """
    roots = [n for n, p in parents.items() if p is None]
    if len(roots) != 1:
        raise ValueError("a tree needs exactly one root")
    children: dict[str, list[str]] = {}
    for name, p in parents.items():
        if p is not None:
            children.setdefault(p, []).append(name)
    order: list[str] = []
    stack = [roots[0]]
    while stack:
        cur = stack.pop()
        order.append(cur)
        stack.extend(sorted(children.get(cur, ()), reverse=True))
    if len(order) != len(parents):
        raise ValueError("not a connected tree")
    ident = {n: i for i, n in enumerate(order)}
    key_list = sorted(keys or {})
    offsets = [0]
    nodes: list[int] = []
    for k in key_list:
        nodes.extend(ident[n] for n in (keys or {})[k])
        offsets.append(len(nodes))
    section = {
        "names": "\n".join(order),
        "labels": "\n".join(n.split(".")[0].replace("_", " ") for n in order),
        "parent": _le([-1 if parents[n] is None else ident[parents[n] or ""] for n in order], "i"),
        "category": _le([(category or {}).get(n, -1) for n in order], "b"),
        "keys": "\n".join(key_list),
        "sense_offsets": _le(offsets, "I"),
        "sense_nodes": _le(nodes, "I"),
        "multi_parent": 0,
    }
    return build_tree(section, categories)
