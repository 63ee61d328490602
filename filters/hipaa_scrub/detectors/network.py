"""Network identifiers: email addresses, IP addresses (v4, v6), MAC addresses, person-identifying URLs."""

from __future__ import annotations

import re
import socket

from filters.hipaa_scrub.detectors import Detector, Pattern, Span, context_before


class EmailDetector(Detector):
    """Email addresses (also with `` at `` / `` dot `` spelled out is not attempted)."""

    KINDS = ("email",)
    NEEDS = "at"
    PRIORITY = 5
    TRIGGERS = (r"[a-z0-9._%+-]@[a-z0-9]",)
    PATTERNS = (
        Pattern("email", r"(?<![\w.%+-])[a-z0-9._%+-]+@(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+[a-z]{2,24}(?![\w-])"),
    )

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        for m in self.compiled[0][1].finditer(text):
            out.append(Span(m.start(), m.end(), "email", self.PRIORITY))


def ipv6_ok(address: str) -> bool:
    """A valid IPv6 address (RFC 4291 text forms, an IPv4 tail without leading zeros): what
    ``ipaddress.IPv6Address`` accepts without a scope, checked by the C library's ``inet_pton`` (20 times faster;
    the tests compare the two)."""
    try:
        socket.inet_pton(socket.AF_INET6, address)
    except (OSError, ValueError):  # ValueError: an embedded NUL (the pattern admits none)
        return False
    return True


class IpDetector(Detector):
    """IPv4 (octets <= 255, not a longer dotted version string) and IPv6 (validated: :func:`ipv6_ok`)."""

    KINDS = ("ip",)
    NEEDS = "dot_or_colon"
    GATE = r"\d\.\d"
    TRIGGERS = (r"\d\.\d{1,3}\.\d{1,3}\.\d", r":[0-9a-f]*:")  # four dotted numbers; two colons in a hex run

    def prefilter(self, text: str, lower: str, words: list[str], runs: frozenset[int]) -> bool:
        """A valid IPv6 address has ``::`` or 6 colons or more (8 groups, or 6 and an IPv4 tail);
        IPv4 three dots, and a digit dot digit."""
        return (
            "::" in lower
            or lower.count(":") >= 6
            or (lower.count(".") >= 3 and super().prefilter(text, lower, words, runs))
        )

    PRIORITY = 12
    PATTERNS = (
        Pattern("ipv4", r"(?<![\w.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\w]|\.\d)"),
        Pattern(
            "ipv6",
            # an address may end a sentence or sit in brackets: a dot (or colon) after it is punctuation
            # unless a word character follows
            r"(?<![\w:.])(?=[0-9a-f:]*:[0-9a-f:]*:)[0-9a-f:]{2,39}(?:(?<=:)\d{1,3}(?:\.\d{1,3}){3})?(?:%\w+)?"
            r"(?![\w]|[:.]\w)",
        ),
    )
    VERSION_CUE = re.compile(
        r"\b(?:v|ver|version|versions|build|release|rel|update|firmware|fw|patch|sp|service pack|driver|bios|"
        r"kernel|java|jre|jdk|flash|firefox|mozilla|netscape|python|perl|php|mysql|winamp|itunes|ipod|"
        r"acrobat|reader|quicktime|realplayer|msn|messenger|ie|explorer|windows|linux|mac|os|osx)\.?\s*$"
    )
    IP_CUE = re.compile(r"\b(?:ip|ips|address|addr|host|server|ping|router|gateway|dns|subnet|proxy|whois)\b")

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        (_, v4), (_, v6) = self.compiled
        for m in v4.finditer(text) if "." in text else ():
            octets = [m.group(i) for i in range(1, 5)]
            if any(int(o) > 255 or (len(o) > 1 and o[0] == "0") for o in octets):
                continue
            head = lower[max(0, m.start() - 16) : m.start()]
            if not context_before(lower, m.start(), self.IP_CUE, 30):
                if self.VERSION_CUE.search(head):
                    continue
                if int(octets[0]) <= 9 and int(octets[1]) <= 9:
                    continue  # 1.5.0.4 and friends: version strings far more often than addresses
            out.append(Span(m.start(), m.end(), "ip", self.PRIORITY))
        if ":" in text:
            for m in v6.finditer(lower):
                if m.group().endswith(":") and not m.group().endswith("::"):
                    continue  # "a:b:" then punctuation: not an address ("::" may end one)
                if not ipv6_ok(m.group().split("%")[0]):
                    continue
                out.append(Span(m.start(), m.end(), "ip", self.PRIORITY))


class MacDetector(Detector):
    """MAC addresses (IEEE 802 notations): six hex pairs joined by ``:`` or ``-``, or Cisco dotted
    triples (``aabb.ccdd.eeff``), any case; hex digits may all be letters (``ab:cd:ef:fe:dc:ba``)."""

    KINDS = ("mac",)
    NEEDS = "dot_or_colon_or_dash"

    CISCO = re.compile(r"[0-9a-f]{4}\.[0-9a-f]{4}\.[0-9a-f]{4}", re.IGNORECASE)
    TRIGGERS = (r"[0-9a-f]{2}(?:[:-][0-9a-f]{2}){5}", r"[0-9a-f]{4}\.[0-9a-f]{4}\.[0-9a-f]{4}")

    def prefilter(self, text: str, lower: str, words: list[str], runs: frozenset[int]) -> bool:
        """Six pairs need five separators of a kind; Cisco triples two dots between hex groups of 4."""
        return (
            lower.count(":") >= 5
            or lower.count("-") >= 5
            or (lower.count(".") >= 2 and self.CISCO.search(lower) is not None)
        )

    PRIORITY = 11
    PATTERNS = (
        Pattern("pairs", r"(?<![\w:-])[0-9a-f]{2}([:-])[0-9a-f]{2}(?:\1[0-9a-f]{2}){4}(?![\w:-])"),
        Pattern("cisco", r"(?<![\w.])[0-9a-f]{4}\.[0-9a-f]{4}\.[0-9a-f]{4}(?![\w.])"),
    )

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        # six pairs need five separators, three Cisco groups two dots
        wanted = {"pairs": lower.count(":") >= 5 or lower.count("-") >= 5, "cisco": lower.count(".") >= 2}
        for name, rx in self.compiled_ascii if lower.isascii() else self.compiled:
            if not wanted[name]:
                continue
            for m in rx.finditer(lower):
                out.append(Span(m.start(), m.end(), "mac", self.PRIORITY))


class UrlDetector(Detector):
    """URLs that identify a person: any path or query string (profile pages, user names, ids),
    or a subdomain on a personal-page host (``jane.blogspot.com``). A bare domain such as
    ``myspace.com`` is a navigational query and is left alone unless ``bare_domains: scrub``.
    """

    KINDS = ("url",)
    NEEDS = "dot"
    GATE = r"\.[a-z]"
    PRIORITY = 30
    TLDS = (
        "com|net|org|edu|gov|mil|int|info|biz|us|uk|ca|au|de|fr|it|es|nl|ru|jp|cn|in|br|mx|tv|me|cc|ws|name|"
        "mobi|io|co|ly|fm|to|be|ch|se|no|dk|fi|ie|nz|za|kr|tw|pl|at|eu|asia|xxx"
    )
    PATTERNS = (
        Pattern(
            "url",
            r"(?<![\w@.-])(?:(?:https?|ftp)://)?(?:[a-z0-9](?:[a-z0-9_-]*[a-z0-9])?\.)+(?:" + TLDS + r")"
            r"(?::\d{1,5})?(?P<path>[/?#~][^\s]*)?(?![\w@-])",
        ),
    )
    TRIGGERS = (r"[a-z0-9]\.(?:" + TLDS + ")",)  # a host's last label
    PERSONAL_HOSTS = (
        "blogspot.com",
        "livejournal.com",
        "tumblr.com",
        "wordpress.com",
        "xanga.com",
        "angelfire.com",
        "tripod.com",
        "geocities.com",
        "homestead.com",
        "typepad.com",
        "deviantart.com",
        "webs.com",
    )
    SOCIAL_HOSTS = frozenset(
        {
            "myspace.com",
            "facebook.com",
            "friendster.com",
            "orkut.com",
            "bebo.com",
            "twitter.com",
            "x.com",
            "linkedin.com",
            "flickr.com",
            "photobucket.com",
            "hometown.aol.com",
            "members.aol.com",
            "profiles.yahoo.com",
            "geocities.com",
            "tripod.com",
            "angelfire.com",
            "xanga.com",
            "livejournal.com",
            "classmates.com",
            "instagram.com",
            "tiktok.com",
            "github.com",
            "pinterest.com",
            "home.comcast.net",
            "home.earthlink.net",
            "people.aol.com",
            "tagged.com",
            "hi5.com",
            "myyearbook.com",
            "blackplanet.com",
            "migente.com",
            "asianave.com",
            "faceparty.com",
            "meetup.com",
            "match.com",
        }
    )
    PERSONAL_PATH = re.compile(
        r"/~|/(?:users?|u|profiles?|members?|people|person|author|home|~?[a-z]*user[a-z]*)(?:/|\.php|\.html?|$)|/@|"
        r"[?&](?:id|uid|user|userid|user_id|friendid|username|profile|profileid|member|memberid|email|name)="
        r"|/[^/?#]*\d{5}"
    )
    SCHEME = re.compile(r"^(?:(?:https?|ftp)://)?")

    def __init__(self, bare_domains: str = "keep", url_paths: str = "personal") -> None:
        super().__init__()
        self.scrub_bare = bare_domains == "scrub"
        self.all_paths = url_paths == "all"
        # unless bare domains are scrubbed, a URL is scrubbed for its path or a personal host
        self.path_or_host = re.compile(r"[/?#~]|" + "|".join(re.escape("." + h) for h in self.PERSONAL_HOSTS))

    def trigger_patterns(self) -> tuple[str, ...]:
        """A host's last label; unless bare domains are scrubbed, with a path after it, or a personal host."""
        if self.scrub_bare:
            return self.TRIGGERS
        hosts = "|".join(re.escape("." + h) for h in self.PERSONAL_HOSTS)
        return (r"[a-z0-9]\.(?:" + self.TLDS + r")(?::\d{1,5})?[/?#~]", f"(?:{hosts})")

    def prefilter(self, text: str, lower: str, words: list[str], runs: frozenset[int]) -> bool:
        """A dot before a letter; and, unless bare domains are scrubbed, a path character or a personal host."""
        return self.gate.search(lower) is not None and (  # type: ignore[union-attr]  # GATE is set: gate compiled
            self.scrub_bare or self.path_or_host.search(lower) is not None
        )

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        for m in (self.compiled_ascii if lower.isascii() else self.compiled)[0][1].finditer(lower):
            path = m.group("path")
            full = m.group()
            host_start = m.start() + self.SCHEME.match(full).end()  # type: ignore[union-attr]  # SCHEME always matches
            host_end = m.start("path") if path else m.end()
            host = lower[host_start:host_end].split(":")[0]
            bare_host = host[4:] if host.startswith("www.") else host
            personal_host = any(bare_host.endswith("." + h) for h in self.PERSONAL_HOSTS)
            has_path = bool(path and path.strip("/?#"))
            personal_path = has_path and (
                self.all_paths or bare_host in self.SOCIAL_HOSTS or self.PERSONAL_PATH.search(path) is not None
            )
            if personal_host or personal_path or (self.scrub_bare and not has_path):
                general = None if personal_host else text[m.start() : host_end]
                out.append(Span(m.start(), m.end(), "url", self.PRIORITY, general=general))


__all__ = ["EmailDetector", "IpDetector", "MacDetector", "UrlDetector", "context_before"]
