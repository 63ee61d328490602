"""A synthetic AOL-format query log for demos and tests (``querylog generate``).

The log looks like the 2006 AOL release: header ``AnonID Query QueryTime
ItemRank ClickURL``; users in ascending AnonID order, each user's lines
contiguous and in time order; a click line per clicked result (``ItemRank``
1..10, skewed to 1, ``ClickURL`` cut to ``http://<host>``), query-only lines with
empty rank and URL.

Users have topical interests: a Zipf-weighted mixture over the 16 ODP top-level
categories, a few pet topics per category, favourite navigational queries
("google", "myspace.com"). They search in sessions separated by time gaps, refine
queries (add a modifier, a place, fix a typo, drop a word), re-find what they
searched before and page through results. A small share of queries carry planted
identifiers (person names from the ``names`` package, phone numbers, emails, SSNs,
street addresses, ZIP codes, dates of birth); :class:`GenerateStats` lists them so
tests can check that a chain removes them and that no log line quotes them.

Deterministic by seed (``random.Random``: this is test data, not privacy
protection). Planting uses its own random stream, so a log generated without
identifiers has the same lines, line for line, with the original queries in place
of the planted ones.
"""

from __future__ import annotations

import gzip
import io
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, timedelta
from random import Random
from typing import IO, TextIO

from sidecar.tools.generate.identities import plan_plants
from sidecar.tools.generate.vocabulary import Category, Vocabulary, Zipf, fill, load_vocabulary

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"
FIRST_DAY = date(2006, 3, 1)
DAYS = 92  # 2006-03-01 .. 2006-05-31, the AOL release's three months


@dataclass(frozen=True)
class Planted:
    """One planted identifier: its kind, the exact text in the query, the user and first line (header = 1)."""

    kind: str
    value: str
    anon_id: int
    line: int


@dataclass
class GenerateStats:
    """What :func:`generate_log` wrote."""

    users: int = 0
    lines: int = 0
    queries: int = 0
    click_lines: int = 0
    planted: list[Planted] = field(default_factory=list)

    @property
    def planted_values(self) -> list[str]:
        """The distinct planted identifier strings, sorted."""
        return sorted({p.value for p in self.planted})


class _User:
    """A user's tastes: category mixture, pet topics, navigational habits, click propensity."""

    def __init__(self, rng: Random, vocab: Vocabulary, cat_popularity: Zipf[Category]) -> None:
        k = 1 + min(int(rng.expovariate(0.8)), 4)
        chosen: list[Category] = []
        while len(chosen) < k:
            c = cat_popularity.pick(rng)
            if c not in chosen:
                chosen.append(c)
        self.categories = Zipf(chosen, 1.2)
        self.pets = {c.name: tuple(c.topics.pick(rng) for _ in range(1 + rng.randrange(4))) for c in chosen}
        self.nav = Zipf([vocab.navigational.pick(rng) for _ in range(1 + rng.randrange(3))], 1.0)
        self.p_nav = rng.uniform(0.01, 0.2)  # navigational share ~4.5% of lines, as in the AOL sample
        self.p_click = rng.uniform(0.3, 0.75)
        self.p_pet = rng.uniform(0.4, 0.8)
        self.home = vocab.places.pick(rng)  # local queries are mostly about the user's own town
        self.p_tail = rng.uniform(0.15, 0.5)  # share of fresh queries from the long tail

    def place(self, rng: Random, vocab: Vocabulary) -> str:
        return self.home if rng.random() < 0.7 else vocab.places.pick(rng)


def _typo(rng: Random, q: str) -> str:
    i = rng.randrange(1, len(q) - 1)
    if rng.random() < 0.5 and q[i] != " " and q[i + 1] != " ":
        return q[:i] + q[i + 1] + q[i] + q[i + 2 :]
    return q[:i] + q[i + 1 :]


class _Clock:
    """Formats seconds since 2006-03-01 00:00:00 as AOL's ``QueryTime``."""

    def __init__(self) -> None:
        self.day_names = [(FIRST_DAY + timedelta(days=d)).isoformat() for d in range(DAYS + 1)]

    def when(self, t: float) -> str:
        d, s = divmod(int(t), 86400)
        h, s = divmod(s, 3600)
        m, s = divmod(s, 60)
        return f"{self.day_names[d]} {h:02d}:{m:02d}:{s:02d}"


_RANKS = Zipf(range(1, 11), 1.4)


def _topical(rng: Random, vocab: Vocabulary, user: _User, cat: Category) -> tuple[str, str]:
    """A fresh query in ``cat``: (query, its topic)."""
    if cat.tail and rng.random() < user.p_tail:
        q = fill(rng, vocab, rng.choice(cat.tail))
        return q, q
    pets = user.pets.get(cat.name)
    topic: str = rng.choice(pets) if pets and rng.random() < user.p_pet else cat.topics.pick(rng)
    r = rng.random()
    if r < 0.40:
        return topic, topic
    if r < 0.68:
        return f"{topic} {cat.modifiers.pick(rng)}", topic
    if r < 0.76:
        return f"{vocab.prefixes.pick(rng)} {topic}", topic
    if r < 0.86:
        return f"{topic} {vocab.suffixes.pick(rng)}", topic
    if r < 0.94 and cat.local:
        city = user.place(rng, vocab)
        return (f"{topic} in {city}" if rng.random() < 0.4 else f"{topic} {city}"), topic
    if cat.brands:
        brand, products = rng.choice(cat.brands)
        return f"{brand} {rng.choice(products)}", brand
    return topic, topic


def _refine(rng: Random, vocab: Vocabulary, user: _User, cat: Category, prev: str, topic: str) -> str:
    """The next query of a session on the same topic: specialise, reformulate or generalise."""
    r = rng.random()
    if r < 0.30 and prev.count(" ") < 3:
        mod = cat.modifiers.pick(rng)
        return prev if prev.endswith(mod) else f"{prev} {mod}"
    if r < 0.50:
        return f"{topic} {cat.modifiers.pick(rng)}"
    if r < 0.60:
        return f"{topic} {vocab.suffixes.pick(rng)}"
    if r < 0.70:
        return f"{vocab.prefixes.pick(rng)} {topic}"
    if r < 0.85 and prev != topic:
        return topic
    if not cat.local:
        return f"{topic} {cat.modifiers.pick(rng)}"
    city = user.place(rng, vocab)
    return f"{topic} in {city}" if rng.random() < 0.5 else f"{topic} {city}"


# --- the log --------------------------------------------------------------------------


def _choose_query(
    rng: Random,
    vocab: Vocabulary,
    user: _User,
    cat: Category,
    j: int,
    history: list[tuple[str, str | None, str]],
    prev: str | None,
    topic: str,
) -> tuple[str, str | None, str, Category, bool]:
    """The ``j``-th query of a session: re-found, navigational, refined, resubmitted or fresh (perhaps in another
    of the user's categories, perhaps misspelt first). Returns (query, navigational host, topic, category, typo)."""
    nav_host: str | None = None
    r = rng.random()
    typo = False
    if j == 0 and history and r < 0.22:
        q, nav_host, topic = rng.choice(history)  # re-finding
    elif r < user.p_nav * (1.6 if j == 0 else 0.6):
        q, nav_host = user.nav.pick(rng)
    elif prev is not None and r < 0.62:
        q = _refine(rng, vocab, user, cat, prev, topic)
    elif prev is not None and r < 0.70:
        q = prev  # next page of results / re-submitted
    else:
        if prev is not None and rng.random() < 0.15:
            cat = user.categories.pick(rng)
        q, topic = _topical(rng, vocab, user, cat)
        typo = len(q) > 5 and rng.random() < 0.04
    return q, nav_host, topic, cat, typo


def _clicks(rng: Random, user: _User, cat: Category, q: str, topic: str, nav_host: str | None) -> list[tuple[int, str]]:
    """The results a query's user clicks, (rank, host) each: none, or one to four distinct ranks skewed to 1 (a
    navigational query's site on top)."""
    clicks: list[tuple[int, str]] = []
    if rng.random() < user.p_click:
        n = 1
        while n < 4 and rng.random() < 0.25:
            n += 1
        ranks: list[int] = []
        for _ in range(n):
            rank = _RANKS.pick(rng)
            if rank not in ranks:
                ranks.append(rank)
        if nav_host is not None and rng.random() < 0.85:
            ranks[0] = 1  # navigational: the site itself, on top
            ranks = list(dict.fromkeys(ranks))
        for rank in ranks:
            if nav_host is not None and rank == 1:
                host = nav_host
            elif rng.random() < 0.2:
                head = "".join(ch for ch in (topic if nav_host is None else q) if ch.isalnum())[:30]
                host = f"www.{head or 'search'}.com"
            else:
                host = cat.hosts.pick(rng)
            clicks.append((rank, host))
    return clicks


def _user_lines(
    rng: Random,
    prng: Random | None,
    vocab: Vocabulary,
    cat_popularity: Zipf[Category],
    w: _Clock,
    anon_id: int,
    first_line: int,
    stats: GenerateStats,
    scale: float = 1.0,
) -> list[str]:
    user = _User(rng, vocab, cat_popularity)
    n_queries = min(2000, rng.randrange(1, 12) + int((rng.paretovariate(1.4) - 1) * 9))
    if scale != 1.0:
        n_queries = max(1, min(round(2000 * scale), round(n_queries * scale)))
    active_days = rng.uniform(3, DAYS - 1)
    t = rng.uniform(0, (DAYS - active_days) * 86400)
    sessions = max(1.0, n_queries / 3.0)
    mean_gap = active_days * 86400 / sessions
    end = DAYS * 86400 - 1
    identity, plants = plan_plants(prng, vocab, n_queries)  # which query submissions carry one (own stream)

    lines: list[str] = []
    history: list[tuple[str, str | None, str]] = []  # (query, nav host, topic) for re-finding
    done = 0
    uid = str(anon_id)
    while done < n_queries and t < end:
        cat: Category = user.categories.pick(rng)
        prev: str | None = None  # the previous topical query of the session, and its topic
        topic = ""
        session_len = 1 + int(rng.expovariate(1 / 2.2))
        for j in range(session_len):
            if done >= n_queries or t >= end:
                break
            q, nav_host, topic, cat, typo = _choose_query(rng, vocab, user, cat, j, history, prev, topic)
            when = w.when(t)
            if typo:  # the misspelt attempt first, no click, then the corrected query
                lines.append(f"{uid}\t{_typo(rng, q)}\t{when}\t\t\n")
                t += 5 + rng.expovariate(1 / 20)
                when = w.when(min(t, end))
            # clicks drawn before planting, so the main stream does not depend on it
            clicks = _clicks(rng, user, cat, q, topic, nav_host)
            shown = q
            if done in plants and identity is not None and prng is not None:
                kind = plants[done]
                shown, value = identity.query(prng, kind)
                hosts = vocab.identifier_hosts[kind]
                clicks = [(rank, prng.choice(hosts)) for rank, _ in clicks]
                stats.planted.append(Planted(kind, value, anon_id, first_line + len(lines)))
            if clicks:
                for rank, host in clicks:
                    lines.append(f"{uid}\t{shown}\t{when}\t{rank}\thttp://{host}\n")
                stats.click_lines += len(clicks)
            else:
                lines.append(f"{uid}\t{shown}\t{when}\t\t\n")
            stats.queries += 1 + typo
            history.append((q, nav_host, topic))
            prev = q if nav_host is None else None
            done += 1
            t += 3 + rng.lognormvariate(3.6, 1.1)  # within a session: seconds to minutes
        t += 1800 + rng.expovariate(1 / mean_gap)
    return lines


#: About how many lines a generated user has with the default query-count distribution (22.7 to 29.6 on
#: 1,000 users, by seed): the scale ``lines_per_user`` divides by.
DEFAULT_LINES_PER_USER = 25.5


def generate_log(
    users: int, seed: int, out: TextIO, *, plant_identifiers: bool = True, lines_per_user: float | None = None
) -> GenerateStats:
    """Write a synthetic AOL-format log of ``users`` users to ``out``; deterministic by ``seed``.

    ``lines_per_user`` scales every user's query count so the log has about that many lines per user (the
    shape of the distribution stays: heavy users stay heavy); None keeps the default distribution."""
    if users < 0:
        raise ValueError("users must be >= 0")
    if lines_per_user is not None and lines_per_user <= 0:
        raise ValueError("lines_per_user must be > 0")
    scale = 1.0 if lines_per_user is None else lines_per_user / DEFAULT_LINES_PER_USER
    vocab = load_vocabulary()
    rng = Random(seed)
    prng = Random(f"querylog-generate:{seed}:identifiers") if plant_identifiers else None
    cat_popularity = Zipf(vocab.categories, weights=[c.weight for c in vocab.categories])
    clock = _Clock()
    stats = GenerateStats()
    out.write(HEADER)
    line_no = 1
    anon_id = rng.randint(100, 3000)
    for _ in range(users):
        lines = _user_lines(rng, prng, vocab, cat_popularity, clock, anon_id, line_no + 1, stats, scale)
        out.write("".join(lines))
        line_no += len(lines)
        stats.users += 1
        anon_id += 1 + int(rng.expovariate(1 / 36))
    stats.lines = line_no - 1
    return stats


@contextmanager
def open_output(path: str) -> Iterator[TextIO]:
    """A text stream for ``path``: ``-`` is stdout, ``.gz`` compresses."""
    if path == "-":
        yield sys.stdout
        sys.stdout.flush()
        return
    stream: IO[str]
    if path.endswith(".gz"):
        raw = gzip.GzipFile(path, "wb", compresslevel=6)
        stream = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
    else:
        stream = open(path, "w", encoding="utf-8", newline="\n")  # noqa: SIM115 - closed below
    try:
        yield stream
    finally:
        stream.close()
