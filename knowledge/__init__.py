"""The knowledge base behind the classifier: WordNet + wordfreq + categories, compiled once.

``querylog kb build`` writes one file (default ``$QUERYLOG_KB``, else
``$XDG_CACHE_HOME/querylog/kb.qlkb``, else ``~/.cache/querylog/kb.qlkb``).
:func:`load_kb` reads it in well under a second; a missing, corrupt or stale
file (built from another ``categories.yaml`` or builder version) is rebuilt when
``build_if_needed`` is true, otherwise :class:`KBUnavailable` says why.

Besides the classifier's tables, the file holds the WordNet noun taxonomy as a tree
(:mod:`knowledge.concepts`: one parent per synset, pre-order ids, lemma keys ->
synsets), which ``dp_replace`` samples replacements from; ``concept_tree(kb)``
unpacks it on first use.
"""

from knowledge.loading import KBUnavailable, kb_status, load_kb
from knowledge.paths import BUILDER_VERSION, DEFAULT_CATEGORIES, MAGNETIC_CATEGORIES, default_kb_path
from knowledge.store import KnowledgeBase

__all__ = [
    "BUILDER_VERSION",
    "DEFAULT_CATEGORIES",
    "MAGNETIC_CATEGORIES",
    "KBUnavailable",
    "KnowledgeBase",
    "default_kb_path",
    "kb_status",
    "load_kb",
]
