"""Fallback step 8 (the last): a noun that only its WordNet lexicographer file's default category reaches.

``categories.yaml``'s ``lexname_defaults`` give a category to the nouns no anchor, topic domain or
``lexnames`` entry reaches (household and other artifacts are Home, feelings Health...). The KB keeps
them apart from its lemmas (``KnowledgeBase.defaults``), so they are never semantic units and never
outvote a categorised word; this step files a query nothing else categorises under its rightmost such
noun (two words, then one; plurals normalised: English puts the head last).
"""

from __future__ import annotations

from knowledge.classifier.model import Classification, Entry
from knowledge.classifier.units import inflection_bases
from knowledge.store import KnowledgeBase
from knowledge.text import STOPWORDS

#: The confidence of a query filed by this step (as the other fallback steps).
CONFIDENCE = 0.5


class LexnameDefaults:
    """The lookup of step 7 over one KB (its table built on first use, kept in ``shared``)."""

    def __init__(self, kb: KnowledgeBase, shared: dict[str, object]) -> None:
        self.kb = kb
        self._shared = shared
        self._forms: dict[str, tuple[str, ...]] | None = None
        self._results: dict[str, Classification] = {}  # by key: bounded by the KB's defaults

    def find(self, tokens: list[str]) -> Classification | None:
        """The rightmost noun (two words, then one) that only a lexname default categorises, as a result."""
        defaults, table = self.kb.defaults, self._forms or self.forms()
        for end in range(len(tokens), 0, -1):
            forms = table.get(tokens[end - 1])
            if forms is None:
                continue
            if end > 1:
                prefix = tokens[end - 2] + " "
                for form in forms:
                    packed = defaults.get(prefix + form)
                    if packed is not None:
                        return self._result(prefix + form, packed)
            for form in forms:
                packed = defaults.get(form)
                if packed is not None:
                    return self._result(form, packed)
        return None

    def forms(self) -> dict[str, tuple[str, ...]]:
        """Each word that may end a lexname-default noun as typed (the last word of a key, its regular plurals and
        ``noun.exc`` forms; no stop word) -> itself and its inflection bases: one lookup per token."""
        got = self._shared.get("default_forms")
        if got is None:
            exc = self.kb.noun_exc
            last = frozenset(k.rpartition(" ")[2] for k in self.kb.defaults)
            typed = {f for f, b in exc.items() if b in last}
            for b in last:
                typed.update((b, b + "s", b + "es"))
                if b.endswith("y"):
                    typed.add(b[:-1] + "ies")
                if b.endswith("man"):
                    typed.add(b[:-3] + "men")
            table: dict[str, tuple[str, ...]] = {}
            for w in sorted(typed - STOPWORDS):
                forms = (w, *inflection_bases(w, exc, last))
                if not last.isdisjoint(forms):
                    table[w] = forms
            got = self._shared["default_forms"] = table
        assert isinstance(got, dict)
        self._forms = got
        return got

    def _result(self, key: str, packed: tuple[int, ...]) -> Classification:
        got = self._results.get(key)
        if got is None:
            top = Entry.unpack(packed).top
            got = Classification(self.kb.categories[top.category], self.kb.path(top.path), key, CONFIDENCE)
            self._results[key] = got
        return got
