"""What the commit-group tests share (``tests/sidecar/test_commit_group*.py``): a k-anonymity chain over a
generated JSONL input, and the exactly-once check of a resumed replay's output and held rows."""

from __future__ import annotations

import json
import random
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

from filters.category_buffer.store import HELD, KS, unpack_event

N_EVENTS = 2000
CHAIN = """\
state_dir: {state}
dead_letter_file: null
schema:
  format: jsonl
  roles: {{user: uid, query: q, time: ts, rank: null, url: null}}
limits: {{batch_size: 20}}
filters:
  - category_buffer: {{k: 4, category_field: cat}}
"""


def write_input(path: Path) -> None:
    """Users of unequal activity over four categories (some events stay held at the end)."""
    rng = random.Random(5)
    with path.open("w", encoding="utf-8") as fh:
        for i in range(N_EVENTS):
            user = f"u{rng.randrange(rng.choice((8, 80)))}"
            record = {"id": i, "uid": user, "q": f"query {rng.randrange(500)}", "ts": i, "cat": rng.choice("ABCD")}
            fh.write(json.dumps(record) + "\n")


def config(tmp: Path, name: str) -> Path:
    cfg = tmp / f"{name}.yaml"
    cfg.write_text(CHAIN.format(state=tmp / f"state-{name}"), encoding="utf-8")
    return cfg


def state_rows(tmp: Path, name: str) -> tuple[list[Any], list[Any]]:
    with sqlite3.connect(tmp / f"state-{name}" / "querylog.db") as db:
        held = db.execute(f"SELECT user_bucket, query_bucket, event FROM {HELD} ORDER BY id").fetchall()
        ks = db.execute(f"SELECT bucket, k FROM {KS} ORDER BY bucket").fetchall()
    return held, ks


def check_exactly_once(tmp: Path, name: str, src: Path, out: Path) -> None:
    """Every input event released once or still held, never both, none lost; users' activity kept."""
    released = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    ids = Counter(r["id"] for r in released)
    assert max(ids.values()) == 1, "an event was released twice"
    held, _ = state_rows(tmp, name)
    held_q: set[int] = set()
    held_u: Counter[str] = Counter()
    for ubucket, qbucket, blob in held:
        ev, _ = unpack_event(blob)
        if qbucket is not None:
            held_q.add(ev.record["id"])
        if ubucket is not None:
            held_u[str(ev.user)] += 1
    assert not set(ids) & held_q, "an event is both released and held"
    assert set(ids) | held_q == set(range(N_EVENTS)), "an event was lost"
    inp = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
    assert Counter(r["uid"] for r in released) + held_u == Counter(r["uid"] for r in inp)


def committed(tmp: Path, name: str) -> tuple[int, int]:
    """The input position and the output size the state store committed (0, 0: none)."""
    with sqlite3.connect(tmp / f"state-{name}" / "querylog.db") as db:
        tables = {t for (t,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        pos = db.execute("SELECT value FROM source_positions").fetchone() if "source_positions" in tables else None
        size = db.execute("SELECT bytes FROM file_sink_sizes").fetchone() if "file_sink_sizes" in tables else None
    return int(pos[0]) if pos else 0, int(size[0]) if size else 0
