"""A labelled corpus generator, deterministic by seed: realistic search queries with planted
identifiers of every type and their character spans, plus as many ordinary queries, including
name-like (``may``, ``rose garden``, ``jordan shoes``) and place-like (``paris hotels``) words.

Each item is ``(query, [(start, end, kind), ...])``; ordinary queries have no spans.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Iterator

from filters.hipaa_scrub.detectors import KINDS
from filters.hipaa_scrub.geo import load_geo
from filters.hipaa_scrub.names import load_names
from sidecar.tools.corpus.hipaa_numbers import NUMBERS, zipcode
from sidecar.tools.corpus.hipaa_words import (
    DIRS,
    MAIL,
    MODIFIERS,
    MONTHS,
    NAME_LIKE_WORDS,
    ORDINARY,
    PERSON_CTX,
    STREET_NAMES,
    SUFFIXES,
    TOPICS,
    UNITS,
    Builder,
    Gold,
    cumulative,
)


class Corpus:
    """The generator (data loaded once). ``items(n, seed)`` yields ``n`` planted and ``n`` ordinary queries."""

    def __init__(self) -> None:
        names = load_names()
        geo = load_geo()
        self.first = sorted(names.first_share.items())
        self.last = sorted((k, v) for k, v in names.last_share.items() if len(k) > 1)
        self.first_w = cumulative([v for _, v in self.first])
        self.last_w = cumulative([v for _, v in self.last])
        self.towns = sorted((n, s) for (n, s), p in geo.cities.items() if 500 <= p <= 20000)
        self.bigcities = sorted((n, s) for (n, s), p in geo.cities.items() if p >= 200000)
        self.states = sorted(geo.state_names.items())
        self.counties = sorted(
            (name, sorted(states)[0]) for name, states in geo.counties.items() if sorted(states)[0] in geo.state_names
        )
        self.makers: dict[str, Callable[[random.Random], tuple[str, Gold]]] = {
            k: NUMBERS[k] if k in NUMBERS else getattr(self, f"_{k}") for k in KINDS
        }

    # --- pieces ---------------------------------------------------------------------------
    def person(self, r: random.Random) -> str:
        f = r.choices(self.first, cum_weights=self.first_w)[0][0]
        last = r.choices(self.last, cum_weights=self.last_w)[0][0]
        style = r.random()
        if style < 0.12:
            name = f"{f} {r.choice(string.ascii_lowercase)} {last}"
        elif style < 0.17:
            name = f"{last}, {f}"
        elif style < 0.22:
            f2 = r.choices(self.first, cum_weights=self.first_w)[0][0]
            name = f"{f} {f2} {last}"
        else:
            name = f"{f} {last}"
        return name.title() if r.random() < 0.25 else name

    def state(self, r: random.Random, code: str | None = None) -> str:
        code = code or r.choice(self.states)[0]
        return code.lower() if r.random() < 0.6 else load_geo().state_names[code]

    def _bigcity(self, r: random.Random) -> str:
        n, s = r.choice(self.bigcities)
        return f"{n} {s.lower()}"

    # --- one maker per type of names and places (the number-like ones: :mod:`.hipaa_numbers`) ----
    def _name(self, r: random.Random) -> tuple[str, Gold]:
        ctx = r.choice(PERSON_CTX)
        pre, _, post = ctx.partition("{}")
        post = post.replace("{bigcity}", self._bigcity(r)).replace("{state}", self.state(r))
        return Builder().add(pre.strip()).add(self.person(r), "name").add(post.strip()).build()

    def _address(self, r: random.Random) -> tuple[str, Gold]:
        num = str(r.choice([r.randint(1, 99), r.randint(100, 9999), r.randint(10000, 99999)]))
        parts = [num]
        if r.random() < 0.2:
            parts.append(r.choice(DIRS))
        street = r.choice(STREET_NAMES) if r.random() < 0.7 else r.choices(self.last, cum_weights=self.last_w)[0][0]
        parts += [street, r.choice(SUFFIXES)]
        if r.random() < 0.15:
            parts.append(r.choice(UNITS))
        addr = " ".join(parts)
        b = Builder()
        if r.random() < 0.3:
            b.add(r.choice(["directions to", "house for sale", "who lives at", "map of", "apartments"]))
        b.add(addr, "address")
        if r.random() < 0.5:
            town, st = r.choice(self.bigcities)
            b.add(town).add(self.state(r, st))
            if r.random() < 0.5:
                b.add(zipcode(r), "zip")
        return b.build()

    def _city(self, r: random.Random) -> tuple[str, Gold]:
        town, st = r.choice(self.towns)
        b = Builder()
        if r.random() < 0.5:
            b.add(r.choice(TOPICS))
        if r.random() < 0.3:
            q, gold = b.add(town, "city").build()
            return f"{q}, {self.state(r, st)}", gold
        return b.add(town, "city").add(self.state(r, st)).build()

    def _county(self, r: random.Random) -> tuple[str, Gold]:
        name, st = r.choice(self.counties)
        b = Builder().add(f"{name} county", "county")
        if r.random() < 0.5:
            b.add(self.state(r, st))
        return b.add(r.choice(TOPICS)).build()

    def _zip(self, r: random.Random) -> tuple[str, Gold]:
        ctx = r.choice(
            [
                "weather {}",
                "{} zip code",
                "pizza delivery {}",
                "homes for sale {}",
                "{}",
                "zip {}",
                "{bigcity} {}",
                "jobs in {}",
                "{} restaurants",
            ]
        )
        pre, _, post = ctx.partition("{}")
        pre = pre.replace("{bigcity}", self._bigcity(r))
        return Builder().add(pre.strip()).add(zipcode(r), "zip").add(post.strip()).build()

    def _email(self, r: random.Random) -> tuple[str, Gold]:
        f = r.choices(self.first, cum_weights=self.first_w)[0][0]
        last = r.choices(self.last, cum_weights=self.last_w)[0][0]
        user = r.choice([f"{f}{last}", f"{f}.{last}", f"{f[0]}{last}{r.randint(1, 99)}", f"{f}_{r.randint(1, 2006)}"])
        ctx = r.choice(["{}", "email {}", "{} myspace", "send mail to {}", "{} password"])
        pre, _, post = ctx.partition("{}")
        return Builder().add(pre.strip()).add(f"{user}@{r.choice(MAIL)}", "email").add(post.strip()).build()

    def _url(self, r: random.Random) -> tuple[str, Gold]:
        f = r.choices(self.first, cum_weights=self.first_w)[0][0]
        last = r.choices(self.last, cum_weights=self.last_w)[0][0]
        user = r.choice([f"{f}{last}", f"{f}-{last}", f"{f}{r.randint(1, 999)}"])
        url = r.choice(
            [
                f"myspace.com/{user}",
                f"www.myspace.com/{user}",
                f"http://www.facebook.com/profile.php?id={r.randint(10**6, 10**9)}",
                f"{user}.blogspot.com",
                f"hometown.aol.com/{user}/index.html",
                f"www.geocities.com/{user}",
                f"http://profile.myspace.com/index.cfm?fuseaction=user.viewprofile&friendid={r.randint(10**6, 10**9)}",
                f"members.aol.com/{user}",
                f"www.xanga.com/{user}",
                f"{user}.livejournal.com",
            ]
        )
        return Builder().add(url, "url").build()

    # --- ordinary queries -----------------------------------------------------------------
    def ordinary(self, r: random.Random) -> str:
        style = r.random()
        if style < 0.35:
            return r.choice(ORDINARY)
        if style < 0.55:
            return f"{r.choice(MODIFIERS)} {r.choice(TOPICS)}".strip()
        if style < 0.75:
            n, s = r.choice(self.bigcities)
            return f"{r.choice(TOPICS)} {n}" + (f" {self.state(r, s)}" if r.random() < 0.5 else "")
        if style < 0.85:
            return f"{r.choice(TOPICS)} {r.choice(self.states)[1]}"
        if style < 0.93:
            word = r.choice(NAME_LIKE_WORDS)
            return f"{word} {r.choice(TOPICS)}"
        return f"{r.choice(MONTHS)} {r.randint(1990, 2007)} {r.choice(['calendar', 'events', 'news', 'concerts'])}"

    def items(self, n: int, seed: int = 1) -> Iterator[tuple[str, Gold]]:
        """``n`` planted queries (types in turn) and ``n`` ordinary ones, interleaved."""
        r = random.Random(seed)
        kinds = list(KINDS)
        for i in range(n):
            yield self.makers[kinds[i % len(kinds)]](r)
            yield self.ordinary(r), []
