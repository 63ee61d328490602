"""Events still held by a chain's category_buffer, read (read-only) from the state database its config names.

Counts only: events whose query half is still in a buffer, user halves still owed, and held events per
category (taxonomy names, never a value). The state accumulates across runs into the same ``state_dir``,
so the count is what the state holds now, which may include events of runs other than the audited output.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from sidecar.state import DB_NAME


def held_in_state(config_file: str, state_dir: str | Path | None = None) -> dict[str, Any]:
    """``{"database", "exists", "held_events", "held_user_halves", "by_category"}`` for the config's state
    (``state_dir``, when given, instead of the config's own)."""
    from filters.category_buffer.store import HELD
    from sidecar.commandkit import load

    folder = Path(state_dir if state_dir is not None else load(config_file).state_dir).resolve()
    db = folder / DB_NAME
    out: dict[str, Any] = {"database": str(db), "exists": db.is_file()}
    if not db.is_file():
        return out
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (HELD,)).fetchone():
            return out | {"held_events": 0, "held_user_halves": 0, "by_category": {}}
        (events,) = conn.execute(f"SELECT COUNT(*) FROM {HELD} WHERE query_bucket IS NOT NULL").fetchone()
        (users,) = conn.execute(f"SELECT COUNT(*) FROM {HELD} WHERE user_bucket IS NOT NULL").fetchone()
        rows = conn.execute(
            f"SELECT query_bucket, COUNT(*) FROM {HELD} WHERE query_bucket IS NOT NULL GROUP BY query_bucket"
        ).fetchall()
    except sqlite3.DatabaseError as exc:
        return out | {"error": type(exc).__name__}
    finally:
        conn.close()
    return out | {
        "held_events": int(events),
        "held_user_halves": int(users),
        "by_category": {str(b): int(n) for b, n in sorted(rows)},
    }
