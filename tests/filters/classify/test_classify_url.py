"""`classify`: the clicked URL's host when the query alone is uncategorisable, and the per-query LRU."""

from __future__ import annotations

from pathlib import Path
from random import Random

import pytest
from helpers.kb import kb_file
from hypothesis import given
from hypothesis import strategies as st

from filters.classify import ClassifyFilter, url_host
from sidecar.api import BuildContext, Event
from sidecar.config import build_config, load_yaml


def _filter(tmp: Path, **options: object) -> ClassifyFilter:
    opts = {"kb_path": str(kb_file()), **options}
    config = build_config(ClassifyFilter.Config, opts, load_yaml("<test>", "{}"), "filters[0].classify")
    return ClassifyFilter(config, BuildContext(config_dir=tmp, rng=Random(1), seed=1))


def _event(query: str, url: str | None) -> Event:
    return Event("u1", query, "2006-03-01 00:00:00", "1" if url else None, url, raw=f"u1\t{query}")


@pytest.mark.parametrize(
    ("url", "host"),
    [
        ("http://www.ebay.com", "www.ebay.com"),
        ("https://user:pw@shop.example.org:8080/a/b?q=1#f", "shop.example.org"),
        ("www.bankofamerica.com/login", "www.bankofamerica.com"),
        ("http://192.168.0.1/admin", ""),
        ("http://[2001:db8::1]/x", ""),
        ("", ""),
    ],
)
def test_url_host(url: str, host: str) -> None:
    """The host without scheme, user info, port, path, query or fragment; an IP address names no site."""
    assert url_host(url) == host


@given(st.text(max_size=60))
def test_url_host_never_fails(url: str) -> None:
    """Invariant: any text gives a host string without '/' (possibly empty)."""
    assert "/" not in url_host(url)


def test_uncategorisable_query_takes_the_url_hosts_category(tmp_path: Path) -> None:
    """A query the classifier cannot place gets the category of its clicked host, counted as classified_by_url;
    a categorisable query keeps its own category whatever the URL says; an event without a URL stays unknown."""
    f = _filter(tmp_path)
    assert f.classifier is not None and f.classifier.classify("xqzvbn") is None
    out = f.process(
        [
            _event("xqzvbn", "http://www.ebay.com"),
            _event("flu symptoms", "http://www.ebay.com"),
            _event("xqzvbn", None),
        ]
    )
    cats = [e.meta["category"] if e.meta else None for e in out]
    assert cats == ["Shopping", "Health", None]
    assert f.counts["classified_by_url"] == 1 and f.counts["classified"] == 2 and f.counts["unclassified"] == 1


def test_use_url_off(tmp_path: Path) -> None:
    """use_url: false classifies the query alone."""
    f = _filter(tmp_path, use_url=False)
    out = f.process([_event("xqzvbn", "http://www.ebay.com")])
    assert out[0].meta is not None and out[0].meta["category"] is None
    assert "classified_by_url" not in f.counts


def test_results_are_memoised_per_normalised_text_in_a_bounded_lru(tmp_path: Path) -> None:
    """The same text twice and its case/punctuation variants are classified once; the LRU holds at most cache_size
    texts and keeps the recently used one."""
    f = _filter(tmp_path, cache_size=2)
    clf = f.classifier
    assert clf is not None
    calls: list[object] = []
    vote = clf._vote_tokens

    def spy(tokens: object) -> object:
        calls.append(tokens)
        return vote(tokens)  # the spy forwards what it got

    clf._vote_tokens = spy  # count the real classifications
    f.process([_event(q, None) for q in ("flu symptoms", "flu symptoms", "Flu  Symptoms!", "ebay")])
    assert len(calls) == 2  # flu symptoms (three spellings) and ebay
    info = clf._by_text.cache_info()  # an lru_cache wrapper
    assert info.maxsize == 2 and info.currsize == 2
