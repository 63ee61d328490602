"""Issue 28 item 6: knowledge and rules added for real short queries, each with its negatives.

Queries here are written for the test (made-up names such as ``xqzvbn``, general words and well-known names),
never lines of the labelled sets or the AOL sample.
"""

from __future__ import annotations

import pytest
from helpers.kb import classifier

from knowledge.classifier.fallback import FOREIGN_CCTLDS
from knowledge.text import STOPWORDS


def _got(query: str) -> tuple[str, str] | None:
    r = classifier().classify(query)
    return None if r is None else (r.category, r.path[1] if len(r.path) > 1 else "")


@pytest.mark.parametrize(
    ("query", "category"),
    [
        ("groundhog day", "Shopping"),  # a day assigned to an observance (day.n.03): costumes, cards, gifts
        ("greeting card verses", "Shopping"),
        ("party planning", "Home"),  # ODP Home/Entertaining
        ("knitting needles sizes", "Home"),  # needlework
        ("fungal infection", "Health"),  # pathologic process
        ("campsite reservations", "Recreation"),
    ],
)
def test_wordnet_anchors_added(query: str, category: str) -> None:
    """Classes of words anchored for issue 28 (the whole WordNet subtree, not single strings)."""
    got = _got(query)
    assert got is not None and got[0] == category


@pytest.mark.parametrize(
    ("query", "category"),
    [("christmas eve", "Society"), ("easter sunday", "Society"), ("equinox", "Science"), ("cayenne", "Home")],
)
def test_nearer_anchors_and_common_words_keep_their_category(query: str, category: str) -> None:
    """Negatives: a public holiday keeps its nearer anchor (Society's holiday.n.02), and common words that are
    also model names (``equinox``, ``cayenne``) keep WordNet's category: only ``chevy equinox`` is a car."""
    got = _got(query)
    assert got is not None and got[0] == category


@pytest.mark.parametrize(
    ("query", "category", "label"),
    [
        ("download speed test", "Computers", "web and computing words"),
        ("tp link router", "Computers", "computer and electronics brands"),
        ("fendi bags", "Shopping", "fashion and beauty brands"),
        ("haier fridge", "Home", "appliance and home brands"),
        ("shimano gears", "Sports", "sports brands and competitions"),
        ("mazda cx 5", "Recreation", "car and motorcycle models"),
        ("chevy equinox", "Recreation", "car and motorcycle models"),
        ("breitbart headlines", "News", "news sites and newspapers"),
        ("dubstep", "Arts", "festivals, genres and fandoms"),
        ("hiring managers", "Business", "business words"),
    ],
)
def test_curated_terms_added(query: str, category: str, label: str) -> None:
    """Curated lists written from general knowledge (brands, models, outlets, genres, everyday words of a field)."""
    assert _got(query) == (category, label)


@pytest.mark.parametrize("query", ["xqzvbn sk", "www xqzvbn gr", "xqzvbn com mx"])
def test_a_host_in_a_non_english_country_is_world(query: str) -> None:
    """A name then a non-English country's top-level domain, nothing else to go by: World, the code as path."""
    got = _got(query)
    assert got is not None and got[0] == "World" and got[1] in FOREIGN_CCTLDS


@pytest.mark.parametrize("query", ["xqzvbn it", "xqzvbn no", "xqzvbn 5 sk", "sk", "www sk", "xqzvbn uk"])
def test_what_is_not_a_foreign_host(query: str) -> None:
    """Negatives: codes that are English words (``it``, ``no``) or English-speaking countries (``uk``), a number in
    the name, or the code alone are not a foreign host."""
    got = _got(query)
    assert got is None or got[0] != "World"


@pytest.mark.parametrize("query", ["springfield il", "nashville tn", "annapolis md"])
def test_us_state_codes_are_never_foreign_hosts(query: str) -> None:
    """Negatives: country codes that are also US state codes (Israel/Illinois...) are left out of the rule."""
    got = _got(query)
    assert got is None or got[0] != "World"


def test_the_code_list_holds_no_stop_word_and_no_state_code() -> None:
    """The country codes of the rule are neither function words nor US state codes."""
    states = {
        *"al ak az ar ca co ct de fl ga hi id il in ia ks ky la me md ma mi mn ms mo mt ne nv nh".split(),  # noqa: SIM905
        *"nj nm ny nc nd oh ok or pa ri sc sd tn tx ut vt va wa wv wi wy".split(),  # noqa: SIM905
    }
    assert not FOREIGN_CCTLDS & STOPWORDS and not FOREIGN_CCTLDS & states


def test_numbers_do_not_count_against_another_script() -> None:
    """A year beside one Greek word: the query is still mostly Greek (World); Latin words still outvote it."""
    got = _got("βιβλια 2014")
    assert got is not None and got == ("World", "greek")
    latin = _got("βιβλια cheap flights")
    assert latin is None or latin[0] != "World"
