"""profile filter: counts in SQLite, GetProfile contract, export, and paper 001's utility invariant."""

from __future__ import annotations

import csv
import json
import random
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from filters.category_buffer import CategoryBufferConfig, CategoryBufferFilter
from filters.profile import ProfileConfig, ProfileFilter, export_profiles
from sidecar.api import BuildContext, Event
from sidecar.state import StateStore

QUERYLOG = str(Path(sys.executable).with_name("querylog"))


def ctx(tmp: Path, seed: int = 1) -> BuildContext:
    return BuildContext(config_dir=tmp, state=StateStore(tmp), rng=random.Random(seed), seed=seed)


def ev(user: str, query: str, category: str | None) -> Event:
    e = Event(user, query, "t", "", "")
    if category is not None:
        e.meta = {"category": category, "category_path": (category, "Sub")}
    return e


def test_counts_and_get_profile(tmp_path: Path) -> None:
    """Counts per (user, category) accumulate across batches; unknown user -> None; events pass unchanged."""
    p = ProfileFilter(ProfileConfig(), ctx(tmp_path))
    batch = [ev("a", "x", "Arts"), ev("a", "y", "Arts"), ev("a", "z", "Health"), ev("b", "w", None)]
    assert p.process(batch) is batch
    p.process([ev("a", "v", "Arts")])
    assert p.get_profile("a") == {"Arts": 3, "Health": 1}
    assert p.get_profile("b") == {"unknown": 1}
    assert p.get_profile("nobody") is None
    assert p.stats() == {"profiles": 2}


def test_empty_query_counts_under_unknown(tmp_path: Path) -> None:
    """An event with an empty query has no category: it counts under `unknown` (or is skipped with unknown: skip);
    the profile never reads the query text."""
    p = ProfileFilter(ProfileConfig(), ctx(tmp_path / "a"))
    p.process([ev("a", "", None), ev("a", "   ", None), ev("a", "x", "Arts")])
    assert p.get_profile("a") == {"unknown": 2, "Arts": 1}
    q = ProfileFilter(ProfileConfig(unknown="skip"), ctx(tmp_path / "b"))
    q.process([ev("a", "", None)])
    assert q.get_profile("a") is None and q.counts["skipped_unknown"] == 1


def test_skip_unknown_and_level(tmp_path: Path) -> None:
    """level: 2 counts the two-level category path (Arts/Sub); unknown: skip leaves uncategorised events out of the
    profile and counts them as skipped_unknown."""
    p = ProfileFilter(ProfileConfig(level=2, unknown="skip"), ctx(tmp_path))
    p.process([ev("a", "x", "Arts"), ev("a", "y", None)])
    assert p.get_profile("a") == {"Arts/Sub": 1} and p.counts["skipped_unknown"] == 1


def test_profile_survives_restart(tmp_path: Path) -> None:
    """Counts live in the state store: a new filter on the reopened store returns the profile written before the
    close."""
    c = ctx(tmp_path)
    ProfileFilter(ProfileConfig(), c).process([ev("a", "x", "Arts")])
    c.state.close()  # ctx() has a StateStore
    assert ProfileFilter(ProfileConfig(), ctx(tmp_path)).get_profile("a") == {"Arts": 1}


def test_a_failed_write_counts_nothing_and_its_retry_counts_once(tmp_path: Path) -> None:
    """serve writes the counts with every batch, in the batch's transaction: a write that fails (the batch rolled
    back, not acknowledged) leaves nothing pending, so the source's retry of that batch counts it once."""
    c = ctx(tmp_path)
    p = ProfileFilter(ProfileConfig(), c)
    conn = c.state.conn
    conn.execute("CREATE TABLE fail (now INTEGER)")
    conn.execute("INSERT INTO fail VALUES (1)")
    conn.execute(
        "CREATE TRIGGER boom BEFORE INSERT ON profile_counts WHEN (SELECT now FROM fail) "
        "BEGIN SELECT RAISE(ABORT, 'disk trouble'); END"
    )
    batch = [ev("a", "x", "Arts"), ev("a", "y", "Arts")]
    with pytest.raises(sqlite3.IntegrityError):
        p.process(batch)
    conn.execute("UPDATE fail SET now = 0")
    p.process(batch)  # the retry
    p.process([ev("a", "z", "Health")])
    assert p.get_profile("a") == {"Arts": 2, "Health": 1}


def test_invariant_protected_plus_held_equals_original(tmp_path: Path) -> None:
    """Paper 001 §4.5: the profile of the protected stream plus the user's held events has, for every user,
    the same count per category as the original stream (checked for every user, k in 2..10)."""
    rng = random.Random(11)
    cats = ["Arts", "Health", "Sports", "News", "Games"]
    events = []
    for i in range(6000):
        u = rng.randrange(150)
        cat = cats[u % 5] if rng.random() < 0.7 else rng.choice(cats)
        events.append(ev(f"u{u}", f"q{rng.randrange(3000)} {i % 7}", cat))
    original = Counter((e.user, e.meta["category"]) for e in events)
    for k in (2, 5, 10):
        c = ctx(tmp_path / str(k), seed=k)
        buf = CategoryBufferFilter(CategoryBufferConfig(k=k), c)
        prof = ProfileFilter(ProfileConfig(), c)
        for i in range(0, len(events), 250):
            prof.process(buf.process([ev(e.user, e.query, e.meta["category"]) for e in events[i : i + 250]]))
        protected: Counter[tuple[str, str]] = Counter()
        for user in {e.user for e in events}:
            for cat, n in (prof.get_profile(user) or {}).items():
                protected[(user, cat)] = n
        assert protected + buf.held_users() == original, k
        assert buf.held() > 0


def test_export_formats(tmp_path: Path) -> None:
    """export_profiles returns the number of users and writes json (count and weight per category), csv (user,
    category, count rows in order) and sqlite (a profiles table whose weights sum to 1 per user)."""
    c = ctx(tmp_path / "s")
    p = ProfileFilter(ProfileConfig(), c)
    p.process([ev("a", "x", "Arts"), ev("a", "y", "Arts"), ev("a", "z", "Health"), ev("b", "w", "News")])
    assert export_profiles(c.state, "json", tmp_path / "p.json") == 2  # ctx() has a StateStore
    data = json.loads((tmp_path / "p.json").read_text())
    assert data["a"]["Arts"] == {"count": 2, "weight": round(2 / 3, 6)} and data["b"]["News"]["weight"] == 1.0
    export_profiles(c.state, "csv", tmp_path / "p.csv")  # ctx() has a StateStore
    rows = list(csv.DictReader((tmp_path / "p.csv").open()))
    assert [(r["user"], r["category"], r["count"]) for r in rows] == [
        ("a", "Arts", "2"),
        ("a", "Health", "1"),
        ("b", "News", "1"),
    ]
    export_profiles(c.state, "sqlite", tmp_path / "p.db")  # ctx() has a StateStore
    db = sqlite3.connect(tmp_path / "p.db")
    assert db.execute("SELECT SUM(count), ROUND(SUM(weight), 6) FROM profiles").fetchone() == (4, 2.0)


def test_profiles_export_command(tmp_path: Path) -> None:
    """`querylog profiles export -c CONFIG --format csv` reads the profiles from the config's state_dir and writes
    the header and one row per user and category."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("state_dir: state\nfilters:\n  - profile: {}\n")
    c = ctx(tmp_path / "state")
    ProfileFilter(ProfileConfig(), c).process([ev("a", "x", "Arts")])
    c.state.close()  # ctx() has a StateStore
    out = tmp_path / "out.csv"
    r = subprocess.run(
        [QUERYLOG, "profiles", "export", "-c", str(cfg), "--format", "csv", "-o", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert out.read_text().splitlines() == ["user,category,count,weight", "a,Arts,1,1.000000"]
