"""Hostnames are one unit: no detector rewrites a part of one.

``www.king-county-jobs.com`` holds a county name, ``www.555-1234.com`` a phone-like number; scrubbing the part
would turn one valid-looking domain into another (``www.-jobs.com``). A finding that overlaps a hostname without
covering all of it is dropped, so the host stays whole; a finding that covers it (a personal URL, an e-mail, the
``url`` type with ``bare_domains: scrub``) applies to the whole host as its policy says.

A hostname here: dot-separated labels of letters, digits and inner dashes (RFC 1123), ending in a common generic
top-level domain or any two-letter one (country codes), not after ``@``, a dot or a word character.
"""

from __future__ import annotations

import re

from filters.hipaa_scrub.detectors import Span
from filters.hipaa_scrub.operators import protected

GENERIC_TLDS = (
    "com|net|org|edu|gov|mil|int|info|biz|name|mobi|pro|aero|coop|museum|travel|jobs|tel|asia|xxx|"
    "app|dev|io|online|site|store|shop|blog|tech|xyz|club|news|tv"
)
HOST = re.compile(
    r"(?<![\w@.-])(?:[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?\.)+(?:" + GENERIC_TLDS + r"|[a-z]{2})(?![\w-]|\.[a-z0-9])"
)


_HINT = re.compile(r"\.[a-z]")
"""A dot before a letter, which every hostname has (before its top-level domain): a literal-prefixed search,
several times faster than trying :data:`HOST` at every position of a text with a number like ``1.5``."""


def host_ranges(lower: str) -> list[tuple[int, int]]:
    """``(start, end)`` of every hostname in the lowercased text."""
    if "." not in lower or _HINT.search(lower) is None:
        return []
    return [m.span() for m in HOST.finditer(lower)]


def outside_hosts(lower: str, found: list[Span]) -> list[Span]:
    """``found`` without the spans that overlap a hostname, or a hash or encryption token this filter wrote, but do
    not cover it whole."""
    hosts = host_ranges(lower) + protected(lower)
    if not hosts:
        return found
    return [
        s for s in found if not any(s.end > a and s.start < b and not (s.start <= a and s.end >= b) for a, b in hosts)
    ]
