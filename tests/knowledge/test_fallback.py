"""The classifier's steps before giving up (knowledge/classifier/fallback.py): each rule, with its negatives."""

from __future__ import annotations

import pytest
from helpers.kb import classifier, kb_file

from knowledge.classifier import Classifier


def _category(query: str) -> str | None:
    r = classifier().classify(query)
    return None if r is None else r.category


@pytest.mark.parametrize(
    ("query", "category", "unit"),
    [
        ("wallmart", "Shopping", "walmart"),  # one edit to a curated word (the speller already does this)
        ("ebya", "Shopping", "ebay"),  # ...four letters are enough (a swap)
        ("hotmial", "Computers", "hotmail"),
        ("travelosity", "Recreation", "travelocity"),  # two edits, eight letters or more
    ],
)
def test_rare_misspellings_of_brands_are_corrected(query: str, category: str, unit: str) -> None:
    """A rare token one edit from a curated term (two when long) takes that term's category."""
    r = classifier().classify(query)
    assert r is not None and (r.category, r.main_unit) == (category, unit)


@pytest.mark.parametrize("token", ["pilates", "coolpix", "katy", "running", "xqzvbn"])
def test_real_words_and_unknown_names_are_not_repaired(token: str) -> None:
    """Negatives: common words, words with some currency (a brand the KB lacks), names, inflections and tokens
    nothing is near stay as typed."""
    assert classifier()._fallback.repair([token]) is None


def test_letters_and_digits_are_split() -> None:
    """``mazda5`` -> ``mazda 5``; a KB key with digits (``xbox 360``) is found once split."""
    fb = classifier()._fallback
    assert fb.repair(["mazda5"]) == ["mazda", "5"]
    assert _category("mazda5") == "Recreation"
    assert _category("xbox360") == "Games"
    assert fb.repair(["12345"]) is None  # digits alone: nothing to split


def test_glued_words_may_hold_plurals() -> None:
    """Segmentation before giving up allows inflected pieces (the speller's does not)."""
    assert classifier()._fallback.repair(["dirtbikes"]) == ["dirt", "bikes"]
    assert _category("dirtbikes") == "Recreation"


@pytest.mark.parametrize(
    ("query", "category"),
    [("xqzvbn edu", "Reference"), ("www.xqzvbn.gov", "Society"), ("xqzvbn.mil", "Society")],
)
def test_sector_domains(query: str, category: str) -> None:
    """A query or host in .edu, .gov or .mil with nothing else to go by takes that sector's category."""
    assert _category(query) == category


def test_a_domain_never_outvotes_the_query() -> None:
    """Negative: the domain is a last resort; a query with a topic keeps it (``nasa gov`` is Science)."""
    assert _category("nasa gov") == "Science"


def test_fallback_off_gives_paper_coverage() -> None:
    """With ``fallback`` off the classifier gives up where paper 001 does."""
    clf = Classifier.load(kb_file(), build_if_needed=False)
    clf.fallback = False
    assert clf.classify("ebya") is None and clf.classify("dwayne perry") is None
    assert clf.classify("flu symptoms") is not None


@pytest.mark.parametrize("query", ["wxqz", "kxqz 5", "wxqz com", "kxqz station 12"])
def test_broadcast_call_signs(query: str) -> None:
    """A US station's call sign (K or W and three letters, 47 CFR 73.3550) alone or with station words and a
    number: Arts (``kxqz tv`` is Arts through ``tv`` itself)."""
    r = classifier().classify(query)
    assert r is not None and r.category == "Arts" and r.path == ("Arts", "broadcasting")


@pytest.mark.parametrize(
    "query",
    ["wxqzv", "xqzv", "wxqz kxqz", "wxqz xqzvbn"],  # five letters, no K/W, two signs, an unknown word beside
)
def test_what_is_not_a_call_sign(query: str) -> None:
    """Negatives: other lengths and letters, two signs, or an unexplained word beside stay uncategorised."""
    assert _category(query) is None


def test_a_call_sign_never_outvotes_a_word() -> None:
    """Negative: real words of four letters starting with K or W keep their own category (``wine``, ``kite``)."""
    fb = classifier()._fallback
    assert fb.call_sign(["wine"]) is None and fb.call_sign(["kite"]) is None and fb.call_sign(["kohl"]) is None


@pytest.mark.parametrize("query", ["xqzvbn herald", "www xqzvbn echo com", "xqzvbn qzvx times"])
def test_newspaper_names(query: str) -> None:
    """Two or more words ending with a masthead word (site words set aside) with nothing else to go by: News."""
    r = classifier().classify(query)
    assert r is not None and r.category == "News" and r.path == ("News", "newspapers")


@pytest.mark.parametrize("query", ["herald", "www herald com", "tribune xqzvbn"])
def test_what_is_not_a_newspaper_name(query: str) -> None:
    """Negatives: the masthead word alone, or not last, is no newspaper's name."""
    r = classifier().classify(query)
    assert r is None or r.path != ("News", "newspapers")


@pytest.mark.parametrize(
    ("query", "category"),
    [
        ("kayaking", "Recreation"),  # boating
        ("toothpaste", "Health"),  # dentifrice
        ("tablecloth", "Home"),  # table linen
        ("warehouse", "Business"),  # storehouse
        ("cemetery", "Society"),
        ("wildlife", "Science"),
        ("kaspersky", "Computers"),  # curated: software and formats
        ("citroen", "Recreation"),  # curated: car makes
        ("cyber monday", "Shopping"),  # curated: sales events
    ],
)
def test_knowledge_added_for_short_real_queries(query: str, category: str) -> None:
    """Anchors and curated terms added where real short queries went uncategorised (issue 28 item 6)."""
    assert _category(query) == category


@pytest.mark.parametrize(
    ("query", "category", "unit"),
    [
        ("doorknobs", "Home", "doorknob"),  # an artifact (plural normalised)
        ("xqzvbn umbrellas", "Home", "umbrella"),  # an unknown name beside
        ("umbrellas xqzvbn", "Home", "umbrella"),  # ...after it: the rightmost such noun
        ("feelings of envy", "Health", "envy"),  # a feeling
        ("sandbar", "Regional", "sandbar"),  # a natural object
        ("battalions", "Society", "battalion"),  # a group of people
    ],
)
def test_lexname_defaults_are_the_last_resort(query: str, category: str, unit: str) -> None:
    """A noun only its lexicographer file's default category reaches files a query nothing else categorises."""
    r = classifier().classify(query)
    assert r is not None and (r.category, r.main_unit, r.confidence) == (category, unit, 0.5)
    assert r.path[1] in {"artifact", "feeling", "object", "group"}


def test_lexname_defaults_never_vote() -> None:
    """Negatives: such a noun is no semantic unit, so a categorised word beside it decides alone (``golf``), and
    with the fallback off (paper 001) it files nothing."""
    clf = classifier()
    assert "umbrella" in clf.kb.defaults and "umbrella" not in clf.lemmas
    assert clf.units("doorknobs") == []
    r = clf.classify("golf umbrellas")
    assert r is not None and (r.category, r.main_unit) == ("Sports", "golf")
    assert clf._fallback.lexname_default(["xqzvbn", "qzvx"]) is None
    off = Classifier.load(kb_file(), build_if_needed=False)
    off.fallback = False
    assert off.classify("doorknobs") is None


@pytest.mark.parametrize("query", ["online search", "search the web", "www"])
def test_the_web_alone_is_computers(query: str) -> None:
    """Function and web words only, one naming the web itself: Computers (internet)."""
    r = classifier().classify(query)
    assert r is not None and r.path == ("Computers", "internet")


@pytest.mark.parametrize("query", ["about the", "what is it for", "www xqzvbn", "free", "get going"])
def test_what_is_not_the_web_alone(query: str) -> None:
    """Negatives: function words without a word naming the web, an unknown name beside (a site's name), or web
    words that do not name the web (``free``, ``get``) are not about the internet."""
    assert classifier()._fallback.web_alone(query.split()) is None


def test_lexname_defaults_stay_out_of_the_taxonomy_dp_replace_samples() -> None:
    """The concept tree keeps no category for a synset only a lexname default reaches (``umbrella``), and keeps
    anchored ones (``golf``): dp_replace's candidates and their categories are unchanged."""
    from knowledge.concepts import concept_tree

    tree = concept_tree(classifier().kb)
    assert tree.category[tree.senses("umbrella")[0]] == -1
    assert tree.category[tree.senses("golf")[0]] >= 0


@pytest.mark.parametrize("query", ["xqzvbn dorfman", "maribel xqzvbn"])
def test_a_census_name_beside_an_unknown_word_is_a_person(query: str) -> None:
    """Two rare words, a census surname last or first name first, the other unknown to the KB: Arts (people)."""
    r = classifier().classify(query)
    assert r is not None and r.path == ("Arts", "people")


@pytest.mark.parametrize(
    "raw",
    [["xqzvbn", "smith"], ["dorfman", "xqzvbn"], ["the", "dorfman"], ["xqzvbn", "qzvx"], ["maribel", "umbrella"]],
)
def test_what_is_not_a_loose_person_name(raw: list[str]) -> None:
    """Negatives: a common surname (``smith``), a surname first, a function word, no census name, or a word the
    KB knows beside the name."""
    assert classifier()._fallback.loose_person(raw) is None


def test_a_repair_comes_before_a_loose_person_name() -> None:
    """Negative: a misspelt word beside a surname is repaired first (``restarant`` -> ``restaurant``)."""
    r = classifier().classify("restarant dorfman")
    assert r is not None and r.category == "Home"
