"""A User-Agent header generalised to its browser family and major version (the ``user_agent`` field policy).

A full User-Agent string is a fingerprint: with the OS build, device model, locale and extension tokens it
narrows a visitor to a few people, and free-form tokens can carry anything an app put there (an account name, an
install id). The generalised form keeps what traffic analysis uses (which browsers, which major versions) and
nothing else: it is built only from a fixed list of family names and the major version's digits (at most 4), so
no text of the header itself reaches the output.

Rules, first match wins (the order matters: Chromium-based browsers also say ``Chrome/`` and ``Safari/``):

* crawlers by name (``Googlebot``, ``bingbot``, ...), any other token with ``bot``/``crawler``/``spider``:
  ``Other bot``;
* command-line clients and libraries (``curl``, ``Wget``, ``python-requests``, ``Go-http-client``...);
* Edge (``Edg/``, ``EdgA/``, ``EdgiOS/``, ``Edge/``), Opera (``OPR/``), Samsung Internet, Yandex Browser,
  Vivaldi, UC Browser, Firefox (``Firefox/``, ``FxiOS/``), Chrome (``Chrome/``, ``CriOS/``), Safari
  (``Version/N ... Safari/``), Internet Explorer (``MSIE N``, ``Trident/7`` with ``rv:11``);
* anything else: ``Other``.

Written by hand (no User-Agent library is installed here); the rules follow the tokens each browser documents
(MDN's "Browser detection using the user agent" table).
"""

from __future__ import annotations

import re

__all__ = ["OTHER", "generalise"]

OTHER = "Other"

#: (family, pattern with the major version as group 1, or None): the first that matches names the family.
_RULES: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (family, re.compile(pattern))
    for family, pattern in (
        ("Googlebot", r"Googlebot(?:-\w+)?/(\d+)"),
        ("bingbot", r"bingbot/(\d+)"),
        ("YandexBot", r"YandexBot/(\d+)"),
        ("Baiduspider", r"Baiduspider(?:-\w+)?/(\d+)"),
        ("DuckDuckBot", r"DuckDuckBot(?:-\w+)?/(\d+)"),
        ("Applebot", r"Applebot/(\d+)"),
        ("Other bot", r"(?i)(?:bot|crawler|spider|slurp)\b()"),
        ("curl", r"^curl/(\d+)"),
        ("Wget", r"^Wget/(\d+)"),
        ("python-requests", r"^python-requests/(\d+)"),
        ("Python-urllib", r"^Python-urllib/(\d+)"),
        ("Go-http-client", r"^Go-http-client/(\d+)"),
        ("okhttp", r"^okhttp/(\d+)"),
        ("Edge", r"\bEdg(?:e|A|iOS)?/(\d+)"),
        ("Opera", r"\bOPR/(\d+)"),
        ("Samsung Internet", r"\bSamsungBrowser/(\d+)"),
        ("Yandex Browser", r"\bYaBrowser/(\d+)"),
        ("Vivaldi", r"\bVivaldi/(\d+)"),
        ("UC Browser", r"\bUCBrowser/(\d+)"),
        ("Firefox", r"\b(?:Firefox|FxiOS)/(\d+)"),
        ("Chrome", r"\b(?:Chrome|CriOS)/(\d+)"),
        ("Safari", r"\bVersion/(\d+)[^ ]*(?: Mobile/\S+)? Safari/"),
        ("Internet Explorer", r"\bMSIE (\d+)"),
        ("Internet Explorer", r"\bTrident/\d+.*\brv:(\d+)"),
    )
)


def generalise(user_agent: str) -> str:
    """``Family Major`` (``Firefox 121``), ``Family`` when the version is not given, ``Other`` when no rule
    matches. Only a family name of :data:`_RULES` and up to 4 digits are ever written."""
    for family, pattern in _RULES:
        m = pattern.search(user_agent)
        if m is not None:
            major = m.group(1)
            return f"{family} {major}" if major and len(major) <= 4 else family
    return OTHER
