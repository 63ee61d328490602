"""hipaa_scrub issue 28 items 1-2: the ``names`` policy (public figures kept or not, consistently) and hostnames
as one unit. Tables of (query, scrubbed) with negatives beside positives."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filters.hipaa_scrub import HipaaScrubConfig, Scrubber
from filters.hipaa_scrub.hosts import HOST, host_ranges
from filters.hipaa_scrub.public import MAX_BEARERS, PEOPLE_FILE, public_names
from sidecar.config import load_config
from sidecar.config.loader import ConfigError


@pytest.fixture(scope="module")
def private() -> Scrubber:
    return Scrubber(HipaaScrubConfig())


@pytest.fixture(scope="module")
def every() -> Scrubber:
    return Scrubber(HipaaScrubConfig(names="all"))


# (query, scrubbed with names: private, scrubbed with names: all)
NAMES = [
    # public figures, from the curated list, WordNet or the built-in list: kept by private, scrubbed by all
    ("tom hanks movies", "tom hanks movies", "movies"),
    ("virginia woolf books", "virginia woolf books", "books"),
    ("jc penney coupons", "jc penney coupons", "coupons"),
    ("george bush speech", "george bush speech", "speech"),
    ("michael jordan shoes", "michael jordan shoes", "shoes"),
    ("elvis presley songs", "elvis presley songs", "songs"),
    ("james brown songs", "james brown songs", "songs"),
    # private people: scrubbed by both
    ("john smith", "", ""),
    ("mary smith obituary", "obituary", "obituary"),
    ("linda kowalski realtor", "realtor", "realtor"),
    ("john brown abolitionist", "abolitionist", "abolitionist"),  # WordNet's, but shared by ~61,000: private
    # brands and fictional characters built on a name: kept by both
    ("john deere tractors", "john deere tractors", "john deere tractors"),
    ("harry potter books", "harry potter books", "harry potter books"),
    # ordinary words: kept by both
    ("rose garden", "rose garden", "rose garden"),
    ("will power", "will power", "will power"),
]


@pytest.mark.parametrize(("query", "kept", "scrubbed"), NAMES, ids=[q for q, _, _ in NAMES])
def test_names_policy(private: Scrubber, every: Scrubber, query: str, kept: str, scrubbed: str) -> None:
    assert private.scrub(query)[0] == kept
    assert every.scrub(query)[0] == scrubbed


def test_names_policy_is_consistent_across_the_lists(private: Scrubber, every: Scrubber) -> None:
    """A public name is kept (private) or scrubbed (all) wherever it stands in the query and however it is
    cased: the rule is the name, not the words around it."""
    for name in ("tom hanks", "george bush", "virginia woolf"):
        for query in (name, f"{name} news", f"news {name}", name.title()):
            assert private.scrub(query)[0] == query
            assert name not in every.scrub(query)[0].lower()


def test_public_list_sources() -> None:
    """The list joins the classifier's curated terms, WordNet's people and the built-in list; the most
    common census names are not on it."""
    names = public_names()
    assert {"jc penney", "tom hanks", "virginia woolf", "james brown", "walmart"} <= names
    assert "john smith" not in names and "john brown" not in names
    wordnet = PEOPLE_FILE.read_text(encoding="utf-8").splitlines()
    assert len(wordnet) > 3000 and wordnet == sorted(wordnet) and MAX_BEARERS == 10_000


def test_names_option_is_validated(tmp_path: Path) -> None:
    """``names: all`` loads from a config file; an unknown value is a located error naming the key's line."""
    path = tmp_path / "c.yaml"
    path.write_text("state_dir: state\nfilters:\n  - hipaa_scrub:\n      names: all\n", encoding="utf-8")
    assert load_config(path).filters[0].config.names == "all"  # type: ignore[attr-defined]
    path.write_text("state_dir: state\nfilters:\n  - hipaa_scrub:\n      names: famous\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "unknown value 'famous'" in str(err.value) and f"{path}:4" in str(err.value)


# (query, scrubbed): a hostname stays whole, the same words outside one are scrubbed
HOSTS = [
    ("www.king-county-jobs.com", "www.king-county-jobs.com"),
    ("king county jobs", "jobs"),
    ("www.king-county-jobs.com king county", "www.king-county-jobs.com"),
    ("jobs at www.555-1234.com", "jobs at www.555-1234.com"),
    ("call 555-123-4567 site.com", "call site.com"),
    ("www.johnsmith-realty.com", "www.johnsmith-realty.com"),
    ("john smith realty", "realty"),
    ("hope-ar.us weather", "hope-ar.us weather"),
    # a finding that covers the whole host applies to it whole
    ("visit mary-jones.blogspot.com", "visit"),
    ("mail john.smith@gmail.com", "mail"),
    ("myspace.com/johnsmith22", ""),
]


@pytest.mark.parametrize(("query", "scrubbed"), HOSTS, ids=[q for q, _ in HOSTS])
def test_hostnames_are_one_unit(private: Scrubber, query: str, scrubbed: str) -> None:
    assert private.scrub(query)[0] == scrubbed


def test_host_ranges() -> None:
    assert host_ranges("go to www.king-county-jobs.com now") == [(6, 30)]
    assert host_ranges("dr. smith st. louis") == []
    assert host_ranges("john.smith and 1.5.0.4") == []  # no top-level domain: not a host
    assert host_ranges("a-b.co.uk") == [(0, 9)]


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="abcz019.-@ /:", max_size=40))
def test_host_ranges_quick_check_is_a_necessary_condition(lower: str) -> None:
    """The dot-before-a-letter search that skips texts without a host never skips one with a host."""
    assert host_ranges(lower) == [m.span() for m in HOST.finditer(lower)]


def test_bare_domain_scrub_policy_takes_the_whole_host() -> None:
    """``bare_domains: scrub`` generalises or removes the whole host, never a part of it."""
    s = Scrubber(HipaaScrubConfig(bare_domains="scrub"))
    out = s.scrub("www.king-county-jobs.com")[0]
    assert "king" not in out and "-jobs" not in out
