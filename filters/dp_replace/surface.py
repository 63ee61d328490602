"""Surface reconstruction (paper 004 §3.4): a replaced query written so that it reads like a query.

The mapping is undone in reverse, to the extent the ``surface`` option allows:

* ``plain`` — the replacement concepts' names (:class:`Labeler`), in
  the order of the input's concepts, nothing else. The output depends on the
  input only through the number of its concepts.
* ``shape`` (default) — the input's skeleton: each concept span (its modifiers
  included) becomes the replacement label, in the plural when the input word was
  plural; the input's **stop words** (the fixed list of :data:`knowledge.text.STOPWORDS`:
  function words and web words such as ``www``, ``com``, ``free``) stay where they
  were; every other word is left out (modifiers, words that map to no concept:
  names, brands, typos). Released beyond the concepts: the positions of the
  input's stop words and whether each concept was plural.
* ``paper`` — paper 004 as published: the modifiers and the other words of the
  input are re-added as typed (``new apple phones`` -> ``new apple tablets``).
  Those words are released unprotected, outside the DP guarantee; use only when
  they are known to be harmless.

Text comes out case-folded and tokenised (the classifier's tokens: spelling
recommendations applied, punctuation gone).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from filters.dp_replace.mapping import Mapped
from knowledge.concepts import ConceptTree
from knowledge.store import KnowledgeBase
from knowledge.text import key_of

Surface = Literal["shape", "plain", "paper"]
_VOWELS = frozenset("aeiou")


class Inflector:
    """Plural forms: WordNet's irregular plurals (``noun.exc`` reversed), else English spelling rules."""

    def __init__(self, noun_exc: dict[str, str]) -> None:
        self.irregular: dict[str, str] = {}
        self._plurals: dict[str, str] = {}  # concept labels (WordNet's vocabulary), never query words
        for plural, base in sorted(noun_exc.items()):
            self.irregular.setdefault(base, plural)

    def plural(self, label: str) -> str:
        found = self._plurals.get(label)
        if found is None:
            if len(self._plurals) >= 200_000:
                self._plurals.clear()
            found = self._plurals[label] = self._plural(label)
        return found

    def _plural(self, label: str) -> str:
        head, sep, last = label.rpartition(" ")
        irregular = self.irregular.get(last)
        if irregular is not None:
            word = irregular
        elif last.endswith(("s", "x", "z", "ch", "sh")):
            word = last + "es"
        elif last.endswith("y") and len(last) > 1 and last[-2] not in _VOWELS:
            word = last[:-1] + "ies"
        else:
            word = last + "s"
        return head + sep + word


class Labeler:
    """The words written for a replacement concept: post-processing of the drawn concept only.

    Among the lemma keys naming the concept, the first (in WordNet's lemma order,
    the label first) that names it as its most frequent sense and whose KB category
    is the concept's own; else the first naming it first; else its label. So the
    word reads as the concept that was drawn (``kite`` the bird or the toy) and
    the classifier files it where the concept is. Proper nouns are never put in
    the plural.

    Every concept's label is computed once, in one pass over the lemma keys, when
    the labeler is built (a fraction of a second for WordNet's 82,115 nouns): a
    draw then reads a list.
    """

    def __init__(self, tree: ConceptTree, kb: KnowledgeBase) -> None:
        self.tree = tree
        self.lemmas = kb.lemmas
        self._labels: list[tuple[str, bool]] = self._all(tree)

    def _all(self, tree: ConceptTree) -> list[tuple[str, bool]]:
        lemmas = self.lemmas
        category = tree.category.tolist()
        n = len(tree)
        # keys whose most frequent sense is the node, in key order (= the order keys_of lists them)
        first_keys: list[list[str] | None] = [None] * n
        for key in tree.keys_in_order():
            senses = tree.senses(key)
            if senses:
                lst = first_keys[senses[0]]
                if lst is None:
                    first_keys[senses[0]] = [key]
                else:
                    lst.append(key)
        out: list[tuple[str, bool]] = []
        for node in range(n):
            first = tree.labels[node]
            proper = first[:1].isupper()
            keys = first_keys[node] or []
            base = key_of(first)
            ordered = [base, *(k for k in keys if k != base)] if base in keys else keys
            best = None
            own = category[node]
            for k in ordered:
                entry = lemmas.get(k)
                if entry is not None and len(entry) > 1 and entry[1] == own:
                    best = k
                    break
            word = best or (ordered[0] if ordered else (base or first.lower()))
            out.append((word, not proper))
        return out

    def label(self, node: int) -> tuple[str, bool]:
        """(the words, whether they may take a plural)."""
        return self._labels[node]


def render(mapped: Mapped, labels: Sequence[tuple[str, bool]], mode: Surface, inflector: Inflector) -> str:
    """The output query for ``mapped`` whose i-th concept is replaced by ``labels[i]`` (words, may be plural)."""
    if mode == "plain":
        return " ".join(lab for lab, _ in labels)
    words = [
        inflector.plural(lab) if p.plural and countable else lab for p, (lab, countable) in zip(mapped.parts, labels)
    ]
    skeleton = mapped.paper if mode == "paper" else mapped.shape
    return " ".join([words[x] if isinstance(x, int) else x for x in skeleton])
