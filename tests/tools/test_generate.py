"""`querylog generate`: a realistic, deterministic synthetic AOL-format log."""

from __future__ import annotations

import gzip
import io
import itertools
import json
import re
import subprocess
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

import pytest
import yaml
from helpers import QUERYLOG, GeneratedLog

from sidecar.tools.generate.identities import IDENTIFIER_KINDS
from sidecar.tools.generate.synthetic import HEADER, generate_log
from sidecar.tools.generate.vocabulary import VOCABULARY

ODP = {
    "Arts",
    "Business",
    "Computers",
    "Games",
    "Health",
    "Home",
    "Kids and Teens",
    "News",
    "Recreation",
    "Reference",
    "Regional",
    "Science",
    "Shopping",
    "Society",
    "Sports",
    "World",
}
URL = re.compile(r"^http://[a-z0-9][a-z0-9.-]*\.[a-z]{2,}$")


def _rows(text: str) -> list[list[str]]:
    lines = text.split("\n")
    assert lines[-1] == "", "the log ends with a newline"
    return [line.split("\t") for line in lines[1:-1]]


def _gen(users: int, seed: int, **kw: bool) -> tuple[str, object]:
    buf = io.StringIO()
    stats = generate_log(users, seed, buf, **kw)
    return buf.getvalue(), stats


def test_same_seed_same_log_other_seed_other_log() -> None:
    """The log is a function of (users, seed)."""
    a, _ = _gen(60, 3)
    b, _ = _gen(60, 3)
    c, _ = _gen(60, 4)
    assert a == b
    assert a != c


def test_aol_format(generated_log: GeneratedLog) -> None:
    """Header, five columns, AOL time format, rank 1..10 with a URL or both empty."""
    text = generated_log.text
    assert text.startswith(HEADER)
    rows = _rows(text)
    assert len(rows) == generated_log.stats.lines
    for row in rows:
        assert len(row) == 5
        anon, query, when, rank, url = row
        assert anon.isdigit()
        assert query.strip() and "\r" not in query
        datetime.strptime(when, "%Y-%m-%d %H:%M:%S")
        assert "2006-03-01" <= when[:10] <= "2006-05-31"
        if rank:
            assert 1 <= int(rank) <= 10
            assert URL.match(url), url
        else:
            assert url == ""


def test_users_ascending_contiguous_and_in_time_order(generated_log: GeneratedLog) -> None:
    """Like the AOL release: users in ascending AnonID order, each user's lines together and in time order."""
    rows = _rows(generated_log.text)
    order: list[int] = []
    last_time: dict[str, str] = {}
    for anon, _q, when, _r, _u in rows:
        if not order or order[-1] != int(anon):
            order.append(int(anon))
        assert when >= last_time.get(anon, ""), "lines of a user are in time order"
        last_time[anon] = when
    assert order == sorted(order)
    assert len(order) == len(set(order)) == generated_log.stats.users == 400


def test_click_and_rank_distribution(generated_log: GeneratedLog) -> None:
    """Some lines are query-only, most clicks are on rank 1, every rank 1..10 occurs."""
    rows = _rows(generated_log.text)
    ranks = Counter(int(r[3]) for r in rows if r[3])
    only = sum(1 for r in rows if not r[3])
    assert 0.2 < only / len(rows) < 0.7
    assert set(ranks) == set(range(1, 11))
    assert ranks.most_common(1)[0][0] == 1
    assert ranks[1] > 2 * ranks[2] > 0 and ranks[2] > ranks[10]
    assert sum(ranks.values()) == generated_log.stats.click_lines


def test_users_repeat_refine_and_navigate(generated_log: GeneratedLog) -> None:
    """Re-finding across sessions, refinements that extend the last query, navigational queries."""
    rows = _rows(generated_log.text)
    per_user: dict[str, list[tuple[str, datetime]]] = defaultdict(list)
    for anon, q, when, _r, _u in rows:
        per_user[anon].append((q, datetime.strptime(when, "%Y-%m-%d %H:%M:%S")))
    refound = refined = sessions_gap = 0
    for events in per_user.values():
        first_seen: dict[str, datetime] = {}
        for (q1, t1), (q2, t2) in itertools.pairwise(events):
            if q2.startswith(q1 + " ") and (t2 - t1).total_seconds() < 3600:
                refined += 1
            if (t2 - t1).total_seconds() > 1800:
                sessions_gap += 1
        for q, t in events:
            if q in first_seen and (t - first_seen[q]).total_seconds() > 86400:
                refound += 1
            first_seen.setdefault(q, t)
    assert refined > 100
    assert refound > 100
    assert sessions_gap > 400
    queries = Counter(r[1] for r in rows)
    assert {"google", "myspace", "ebay", "yahoo"} & set(queries)
    assert any(re.search(r"\b(cheap|reviews|near me)\b", q) for q in queries)
    # a heavy-tailed activity: a few users have many more lines than the median user
    sizes = sorted(len(v) for v in per_user.values())
    assert sizes[-1] > 5 * sizes[len(sizes) // 2]


def test_users_have_topical_interests(generated_log: GeneratedLog) -> None:
    """A user's queries concentrate on a few categories: far fewer distinct hosts than a random user would click."""
    vocab = yaml.safe_load(VOCABULARY.read_text(encoding="utf-8"))
    host_cat = {}
    for name, spec in vocab["categories"].items():
        for host in spec["hosts"]:
            host_cat.setdefault(host, name)
    rows = _rows(generated_log.text)
    cats: dict[str, Counter[str]] = defaultdict(Counter)
    for anon, _q, _w, _r, url in rows:
        cat = host_cat.get(url.removeprefix("http://"))
        if cat:
            cats[anon][cat] += 1
    shares = [c.most_common(1)[0][1] / sum(c.values()) for c in cats.values() if sum(c.values()) >= 20]
    assert shares and sum(shares) / len(shares) > 0.4  # uniform over 16 categories would be ~0.15
    assert len({cat for c in cats.values() for cat in c}) == 16


def test_vocabulary_covers_the_16_odp_categories() -> None:
    """The curated vocabulary has the 16 ODP top-level categories, each with topics, modifiers and hosts."""
    vocab = yaml.safe_load(VOCABULARY.read_text(encoding="utf-8"))
    assert set(vocab["categories"]) == ODP
    for spec in vocab["categories"].values():
        assert len(spec["topics"]) >= 15 and len(spec["modifiers"]) >= 5 and len(spec["hosts"]) >= 8
    assert {"cheap", "free"} <= set(vocab["prefixes"])
    assert {"reviews", "near me"} <= set(vocab["suffixes"])
    assert ["myspace.com", "www.myspace.com"] in vocab["navigational"]


def test_planted_identifiers_are_where_stats_say() -> None:
    """Every planted value is in the query of the line the stats name; all kinds occur."""
    text, stats = _gen(1500, 11)
    lines = text.split("\n")
    assert {p.kind for p in stats.planted} == set(IDENTIFIER_KINDS)
    for p in stats.planted:
        anon, query, *_ = lines[p.line - 1].split("\t")
        assert anon == str(p.anon_id)
        assert p.value in query
    share = len({p.line for p in stats.planted}) / stats.lines
    assert 0.0005 < share < 0.01, "a small share of queries carries identifiers"


@pytest.mark.parametrize(
    ("kind", "pattern"),
    [
        ("phone", r"^(\(\d{3}\) \d{3}-\d{4}|\d{3}-\d{3}-\d{4}|\d{10}|\d{3} \d{3} \d{4})$"),
        ("email", r"^[a-z_]+\d*@[a-z]+\.(com|net)$"),
        ("ssn", r"^\d{3}[- ]?\d{2}[- ]?\d{4}$"),
        ("zip", r"^\d{5}$"),
        ("address", r"^\d{3,5} [a-z]+ (st|ave|rd|dr|ln|blvd|ct|way)$"),
        ("name", r"^[A-Za-z'-]+ [A-Za-z'-]+$"),
        ("dob", r"\d{4}$|\d{1,2}-\d{1,2}-\d{2}$"),
    ],
)
def test_planted_identifier_shapes(kind: str, pattern: str) -> None:
    """Each kind looks like the real thing (phone formats, valid-looking SSN areas, ...)."""
    _, stats = _gen(1500, 11)
    values = [p.value for p in stats.planted if p.kind == kind]
    assert values
    for v in values:
        assert re.search(pattern, v), (kind, v)
        if kind == "ssn":
            area = int(re.sub(r"\D", "", v)[:3])
            assert area not in (0, 666) and area < 900


def test_without_identifiers_same_lines_but_planted_queries() -> None:
    """Planting uses its own random stream: turning it off changes only the planted lines."""
    with_ids, stats = _gen(800, 5)
    without, stats_off = _gen(800, 5, plant_identifiers=False)
    assert stats_off.planted == []
    a, b = with_ids.split("\n"), without.split("\n")
    assert len(a) == len(b)
    differing = {i + 1 for i, (x, y) in enumerate(zip(a, b)) if x != y}
    planted_first = {p.line for p in stats.planted}
    assert planted_first <= differing
    for v in stats.planted_values:
        assert v not in without


def test_cli_writes_gzip_stdout_and_planted_list(tmp_path: Path) -> None:
    """`querylog generate` writes the same log as the function, to stdout or .gz, and lists planted values."""
    expected, stats = _gen(300, 9)
    out = tmp_path / "log.tsv.gz"
    planted = tmp_path / "planted.jsonl"
    run = subprocess.run(
        [QUERYLOG, "generate", "--users", "300", "--seed", "9", "-o", str(out), "--planted", str(planted)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert gzip.decompress(out.read_bytes()).decode("utf-8") == expected
    assert f"lines={stats.lines}" in run.stderr
    listed = [json.loads(line) for line in planted.read_text().splitlines()]
    assert [(p["kind"], p["value"], p["line"]) for p in listed] == [(p.kind, p.value, p.line) for p in stats.planted]
    run = subprocess.run([QUERYLOG, "generate", "-n", "300", "-s", "9"], capture_output=True, text=True, check=True)
    assert run.stdout == expected


def test_generated_log_replays_without_dead_letters(
    generated_log: GeneratedLog, write_config
) -> None:  # pytest fixture
    """A generated log is valid input: passthrough reproduces it byte for byte, nothing dead-lettered."""
    from sidecar.config import load_config
    from sidecar.drive import replay

    cfg = load_config(write_config("filters: []\n"))
    out = generated_log.path.parent / "passthrough-out.tsv"
    summary = replay(cfg, str(generated_log.path), str(out))
    assert summary.dead_lettered == 0
    assert summary.records_in == generated_log.stats.lines
    assert out.read_bytes() == generated_log.path.read_bytes()


def test_zero_users_is_a_header_only_log() -> None:
    """No users: the header alone, nothing planted."""
    text, stats = _gen(0, 1)
    assert text == HEADER and stats.lines == 0 and stats.planted == []


def test_planted_names_come_from_the_names_package() -> None:
    """Planted person names are a first name and a last name from the `names` package's census lists."""
    import names

    def listed(key: str) -> set[str]:
        with open(names.FILES[key], encoding="utf-8") as fh:
            return {line.split()[0].lower() for line in fh if line.strip()}

    firsts, lasts = listed("first:male") | listed("first:female"), listed("last")
    _, stats = _gen(1500, 11)
    planted = [p.value.lower().split() for p in stats.planted if p.kind == "name"]
    assert planted
    assert all(first in firsts and last in lasts for first, last in planted)


def test_lines_per_user_scales_the_log_and_keeps_the_default() -> None:
    """``lines_per_user`` gives the papers' 55 lines per user (about); None is the default log, byte for byte."""
    default = io.StringIO()
    generate_log(300, 5, default)
    unscaled = io.StringIO()
    generate_log(300, 5, unscaled, lines_per_user=None)
    assert unscaled.getvalue() == default.getvalue()
    scaled = io.StringIO()
    stats = generate_log(300, 5, scaled, lines_per_user=55)
    assert 40 * 300 <= stats.lines <= 75 * 300
    assert stats.lines > 1.6 * (default.getvalue().count("\n") - 1)
    users = {row[0] for row in _rows(scaled.getvalue())}
    assert len(users) == 300
    with pytest.raises(ValueError):
        generate_log(1, 5, io.StringIO(), lines_per_user=0)
