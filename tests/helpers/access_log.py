"""A generated nginx ``combined`` access log of search traffic with planted identifiers, and its leak checks.

Clients are addresses from the documentation and private ranges (IPv4 and IPv6); each searches a few times
(``/search?q=...``, the query encoded with ``+`` or ``%20``, ``@`` as ``%40``), fetches a static file now and
then, and each search after the first carries the previous one's URL as its referer, as a browser sends it. One
search in five plants a phone number, an e-mail address and an SSN (:func:`helpers.planted_log.planted`).
Deterministic for a seed; nothing here comes from real data.
"""

from __future__ import annotations

import ipaddress
import random
import re
from dataclasses import dataclass, field
from urllib.parse import quote, quote_plus, unquote_plus

from helpers.planted_log import planted

WORDS = [
    "cheap",
    "flights",
    "weather",
    "boston",
    "pizza",
    "near",
    "me",
    "used",
    "cars",
    "lyrics",
    "recipe",
    "python",
    "tutorial",
    "news",
    "hotel",
]
AGENTS = (
    "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0",
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36",
    "Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 "
    "Mobile/15E148 Safari/604.1",
    "curl/8.5.0",
)
SITE = "https://www.example.com"


@dataclass
class AccessLog:
    """The lines (each ending in a newline), the client address of each line, and the planted identifiers."""

    lines: list[str] = field(default_factory=list)
    clients: list[str] = field(default_factory=list)
    planted: list[str] = field(default_factory=list)


def _client(rng: random.Random, i: int) -> str:
    if i % 10 == 9:
        return str(ipaddress.IPv6Address((0x20010DB8 << 96) | rng.getrandbits(64)))
    return str(ipaddress.IPv4Address((10 << 24) | rng.getrandbits(24)))


def generate(lines: int, seed: int = 1) -> AccessLog:
    """About ``lines`` lines of search traffic (see the module doc)."""
    rng = random.Random(seed)
    log = AccessLog()
    clients = [_client(rng, i) for i in range(max(1, lines // 8))]
    last: dict[str, str] = {}
    for n in range(lines):
        client = rng.choice(clients)
        stamp = f"27/Nov/2026:{n // 3600 % 24:02d}:{n // 60 % 60:02d}:{n % 60:02d} +0000"
        agent = rng.choice(AGENTS)
        if rng.random() < 0.15:
            request, status, size = f"/static/app{n % 7}.js", 200, 1200 + n % 50
        else:
            words = rng.sample(WORDS, rng.randint(1, 3))
            if n % 5 == 0:
                phone, email, ssn = planted(n)
                words += ["call", phone, "mail", email, "ssn", ssn]
                log.planted += [phone, email, ssn]
            text = " ".join(words)
            encoded = quote_plus(text) if n % 2 else quote(text, safe="")
            request, status, size = f"/search?q={encoded}&page={1 + n % 3}", 200, 5000 + n % 900
        referer = last.get(client, "-")
        if request.startswith("/search"):
            last[client] = SITE + request
        log.lines.append(f'{client} - - [{stamp}] "GET {request} HTTP/1.1" {status} {size} "{referer}" "{agent}"\n')
        log.clients.append(client)
    return log


_ADDRESS = re.compile(r"^(\S+) ")


def leaks(log: AccessLog, output: list[str]) -> tuple[int, int]:
    """(planted identifiers found in the output, in any line, raw or URL-decoded; output lines whose client
    address is an original client address written verbatim)."""
    text = "".join(output)
    decoded = unquote_plus(text)
    found = sum(1 for p in set(log.planted) if p in text or p in decoded)
    originals = set(log.clients)
    verbatim = 0
    for line in output:
        m = _ADDRESS.match(line)
        if m is not None and m.group(1) in originals:
            verbatim += 1
    return found, verbatim
