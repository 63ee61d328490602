"""Which query and word texts the report may print: only those sent by at least the release's k distinct users.

A text sent by fewer than k distinct users of the original log is what the release protects; the report shows
such a row as a count and a length only (``(hidden: 1 user, 23 chars)``), in every table, chart and the JSON.
A text absent from the original log (a protected-only text: a scrubbed or generalised query, a drawn
replacement) counts 0 senders and is hidden too: nothing tells how many users it stands for. ``--include-texts``
keeps every text in the JSON (for the operator's own checks, not for filing); the HTML never shows a hidden one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

DEFAULT_K = 5
"""The release's k when neither ``--params k=`` nor the config's ``category_buffer`` names one."""


def senders(pairs: Iterable[tuple[str, str]], wanted: set[str]) -> dict[str, int]:
    """(user, text) pairs -> the number of distinct users per text of ``wanted``."""
    users: dict[str, set[str]] = {text: set() for text in wanted}
    for user, text in pairs:
        if text in users:
            users[text].add(user)
    return {text: len(who) for text, who in users.items()}


def guard_rows(rows: list[dict[str, Any]], users_of: dict[str, int], k: int, include_texts: bool) -> None:
    """Mark each row (in place) with ``users`` (distinct original senders), ``chars`` and ``shown`` (at least k
    senders); a row not shown loses its ``text`` unless ``include_texts``."""
    for row in rows:
        text = row["text"]
        n = users_of.get(text, 0)
        row["users"], row["chars"], row["shown"] = n, len(text), n >= k
        if not row["shown"] and not include_texts:
            row["text"] = None


def guard_table(table: dict[str, Any], users_of: dict[str, int], k: int, include_texts: bool) -> dict[str, Any]:
    """A top-10 table (``rows`` and ``protected_top``) with every row guarded by :func:`guard_rows`."""
    for key in ("rows", "protected_top"):
        guard_rows(table.get(key, []), users_of, k, include_texts)
    table["release_k"] = k
    return table


def label(row: dict[str, Any], width: int | None = None) -> str:
    """What the report prints for a row: its text (cut to ``width`` characters) when shown, else the count of
    its senders and its length only."""
    if row.get("shown"):
        text = str(row["text"])
        return text if width is None or len(text) <= width else text[: width - 1] + "…"
    n = row.get("users", 0)
    who = "no original user" if n == 0 else f"{n:,} user" + ("s" if n != 1 else "")
    return f"(hidden: {who}, {row.get('chars', 0):,} chars)"


def word_senders(
    pairs: Iterable[tuple[str, str]], wanted: set[str], words: Callable[[str], list[str]]
) -> dict[str, int]:
    """(user, query) pairs -> the number of distinct users per word of ``wanted`` (as ``words`` cuts a query)."""
    users: dict[str, set[str]] = {word: set() for word in wanted}
    seen: set[tuple[str, str]] = set()
    for user, query in pairs:
        if (user, query) in seen:
            continue
        seen.add((user, query))
        for word in words(query):
            if word in users:
                users[word].add(user)
    return {word: len(who) for word, who in users.items()}


def table_texts(table: dict[str, Any]) -> set[str]:
    """Every text a top-10 table names (its original and protected rows)."""
    return {row["text"] for key in ("rows", "protected_top") for row in table.get(key, [])}
