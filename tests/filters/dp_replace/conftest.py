"""Fixtures of the dp_replace tests: the session's knowledge base and its noun taxonomy."""

from __future__ import annotations

import pytest
from helpers.kb import kb_file

from knowledge import KnowledgeBase, load_kb
from knowledge.concepts import ConceptTree, concept_tree


@pytest.fixture(scope="session")
def kb() -> KnowledgeBase:
    """The test session's compiled KB (tests/helpers/kb.py)."""
    return load_kb(kb_file(), build_if_needed=False)


@pytest.fixture(scope="session")
def kb_tree(kb: KnowledgeBase) -> ConceptTree:
    """Its WordNet noun taxonomy."""
    return concept_tree(kb)
