"""``truncate_url``: keep only scheme and host of a URL, as the AOL release did.

Paths, queries, fragments, user info and ports can identify a person (profile
pages, tokens in links); the host says what site was clicked, which is what log
analysis needs.

Only the url role is read: an event with an empty query, or an empty or
missing URL, passes unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import urlsplit

from sidecar.api import BuildContext, Event, Filter, FilterConfig, option


@dataclass(frozen=True)
class TruncateUrlConfig(FilterConfig):
    """Options of ``truncate_url``."""

    keep_port: bool = option(False, "Keep an explicit port (`host:8080`).")


def truncate(url: str, keep_port: bool = False) -> str:
    """``https://user@www.example.com:8443/u/jane?x=1`` -> ``https://www.example.com``."""
    text = url.strip()
    if not text:
        return url
    if "://" not in text:
        host = text.split("/", 1)[0].split("?", 1)[0].split("#", 1)[0]
        host = host.rsplit("@", 1)[-1]
        return host if keep_port else host.split(":", 1)[0]
    try:
        parts = urlsplit(text)
        host = parts.hostname or ""
        port = parts.port if keep_port else None
    except ValueError:  # malformed netloc (bad port, brackets)
        rest = text.split("://", 1)[1]
        host = rest.split("/", 1)[0].rsplit("@", 1)[-1].split(":", 1)[0]
        return f"{text.split('://', 1)[0]}://{host}"
    if ":" in host:  # IPv6 literal
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port else "")


class TruncateUrlFilter(Filter[TruncateUrlConfig]):
    """Cut the url role down to scheme and host."""

    NAME = "truncate_url"
    Config = TruncateUrlConfig
    SUMMARY = "cut clicked URLs down to scheme + host, as the AOL release did"

    def __init__(self, config: TruncateUrlConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.keep_port = config.keep_port
        self._cache: dict[str, str] = {}

    def process(self, batch: list[Event]) -> list[Event]:
        cache = self._cache
        changed = 0
        for ev in batch:
            url = ev.url
            if not url or not isinstance(url, str):
                continue
            short = cache.get(url)
            if short is None:
                short = truncate(url, self.keep_port)
                if len(cache) > 100_000:
                    cache.clear()
                cache[url] = short
            if short != url:
                ev.url = short
                changed += 1
        self.counts["truncated"] += changed
        return batch
