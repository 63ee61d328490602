"""The `truncate_url` filter: clicked URLs cut to scheme + host (optionally the port), changes counted."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.filters import build_filter, make_event

from filters.truncate_url import TruncateUrlFilter, truncate


@pytest.mark.parametrize(
    ("url", "short", "with_port"),
    [
        # cut: path, query, fragment, user info, port
        (
            "https://user:pw@www.example.com:8443/u/jane?x=1#f",
            "https://www.example.com",
            "https://www.example.com:8443",
        ),
        ("http://www.amazon.com/gp/product/B000?tag=x", "http://www.amazon.com", None),
        ("http://www.x.com?q=1", "http://www.x.com", None),
        ("http://www.x.com#frag", "http://www.x.com", None),
        ("HTTP://WWW.Example.COM/Path", "http://www.example.com", None),
        ("http://[::1]:8080/x", "http://[::1]", "http://[::1]:8080"),
        ("www.ebay.com/itm/123", "www.ebay.com", None),
        ("user@host.com/x", "host.com", None),
        ("http://exa mple.com:abc/x", "http://exa mple.com", None),  # malformed port: still cut
        ("ftp://files.example.org/pub/a.txt", "ftp://files.example.org", None),
        # already short: unchanged
        ("http://www.google.com", "http://www.google.com", None),
        ("http://en.wikipedia.org", "http://en.wikipedia.org", None),
        ("", "", None),
    ],
)
def test_truncate_table(url: str, short: str, with_port: str | None) -> None:
    """Scheme + host, as the AOL release; keep_port keeps an explicit port."""
    assert truncate(url) == short
    assert truncate(url, keep_port=True) == (with_port or short)


def test_truncate_filter_counts_changes_and_skips_empty(tmp_path: Path) -> None:
    """Only changed URLs are counted; empty or missing URLs stay as they are (same object)."""
    f = build_filter(TruncateUrlFilter, {}, tmp_path)
    batch = [
        make_event(url="http://a.com/x"),
        make_event(url="http://a.com"),
        make_event(url=""),
        make_event(url=None),
        make_event(url="http://a.com/x"),
    ]
    empty = batch[2].url
    out = f.process(batch)
    assert [e.url for e in out] == ["http://a.com", "http://a.com", "", None, "http://a.com"]
    assert out[2].url is empty
    assert f.counts["truncated"] == 2
