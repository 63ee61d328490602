"""Curated terms of categories.yaml: well-known brands, sites, people and teams, and what they must not override."""

from __future__ import annotations

import pytest
from helpers.kb import classifier


@pytest.mark.parametrize(
    ("query", "category"),
    [
        ("www.bestbuy.com", "Shopping"),  # a site: the web words drop, the name is a curated term
        ("espn com", "Sports"),
        ("victoria's secret", "Shopping"),
        ("jennifer aniston", "Arts"),  # a famous name is a curated term, not a name to drop
        ("pittsburgh steelers", "Sports"),  # a team: the city does not outvote it
        ("wells fargo online banking", "Business"),
        ("limewire download", "Computers"),
        ("cool math games", "Kids and Teens"),
        ("nytimes", "News"),
        ("webkinz", "Kids and Teens"),
    ],
)
def test_curated_brands_sites_and_names(query: str, category: str) -> None:
    """Navigational queries for well-known brands, sites, people and teams get the category of the curated term."""
    r = classifier().classify(query)
    assert r is not None and r.category == category


@pytest.mark.parametrize(
    ("query", "category"),
    [
        ("concert tickets", "Arts"),  # `tickets` is no sports term
        ("cheap flights to paris", "Recreation"),  # cities are not curated: a place is outvoted by topic words
        ("light bulbs", "Home"),  # `light` is no science term
    ],
)
def test_generic_words_are_not_curated(query: str, category: str) -> None:
    """Negatives: everyday words and city names keep their WordNet category (never overridden by a curated list)."""
    r = classifier().classify(query)
    assert r is not None and r.category == category
