"""Shared test helpers: paths, the test HMAC key, the generated-log type, leak checks, and :func:`wait_until`
(the one way a test waits for a condition: :mod:`helpers.waiting`)."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from helpers.waiting import WaitTimeout as WaitTimeout
from helpers.waiting import exited as exited
from helpers.waiting import wait_until as wait_until
from sidecar.tools.generate.synthetic import GenerateStats

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = ROOT / ".." / "shared" / "data"
QUERYLOG = str(Path(sys.executable).with_name("querylog"))
TEST_KEY_ENV = "QUERYLOG_TEST_HMAC_KEY"
TEST_KEY = "test-key-not-secret-0123456789abcdef"


@dataclass(frozen=True)
class GeneratedLog:
    path: Path
    text: str
    stats: GenerateStats


def cli_env(**extra: str) -> dict[str, str]:
    """Environment for a `querylog` subprocess."""
    env = dict(os.environ)
    env.update(extra)
    return env


# --- privacy: filters buildable with default options, and the leak check -------------------

#: Options for registered filters that cannot be built from defaults alone.
FILTER_TEST_OPTIONS: dict[str, dict[str, object]] = {
    "pseudonymize": {"key_env": TEST_KEY_ENV},
    "drop": {"rules": [{"role": "query", "matches": "^(google|yahoo)$"}]},
}


def default_filter_entries() -> tuple[list[dict[str, object]], dict[str, str]]:
    """Config entries (``{name: options}``) for every registered filter that validates with
    default options (plus FILTER_TEST_OPTIONS); and, by name, why the others were left out."""
    from sidecar.api import FILTERS
    from sidecar.config import ConfigError, build_config, load_yaml
    from sidecar.registry import plugins

    entries: list[dict[str, object]] = []
    skipped: dict[str, str] = {}
    for name, cls in sorted(plugins(FILTERS).items()):
        options = FILTER_TEST_OPTIONS.get(name, {})
        try:
            build_config(cls.Config, options, load_yaml("<test>", "{}"), f"filters[0].{name}")
        except ConfigError as exc:
            skipped[name] = exc.problem
            continue
        entries.append({name: options})
    return entries, skipped


def leak_needles(text: str, planted: list[str]) -> tuple[set[str], list[str], list[re.Pattern[str]]]:
    """What must never appear in a log: (exact strings, substrings, token patterns) from an AOL-format log."""
    exact: set[str] = set(planted)
    users: set[str] = set()
    for line in text.split("\n")[1:]:
        fields = line.split("\t")
        if len(fields) >= 2:
            users.add(fields[0])
            exact.add(fields[1])
    exact |= users
    substrings = sorted({q for q in exact if len(q) >= 8 and not q.isdigit()} | {p for p in planted if not p.isdigit()})
    numbers = sorted(users | {p for p in planted if p.isdigit()}, key=len, reverse=True)
    tokens = [re.compile(r"(?<![0-9])(?:" + "|".join(map(re.escape, numbers)) + r")(?![0-9])")] if numbers else []
    return exact, substrings, tokens


def _leaves(value: object, skip: frozenset[str]) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for k, v in value.items():
            if k in skip:
                continue
            yield str(k)
            yield from _leaves(v, skip)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            yield from _leaves(v, skip)
    elif value is not None and not isinstance(value, int | float | bool):
        yield repr(value)


def find_leaks(
    events: Iterable[object],
    needles: tuple[set[str], list[str], list[re.Pattern[str]]],
    skip: frozenset[str] = frozenset({"timestamp"}),
) -> list[str]:
    """Log leaves that contain a query, a user id or a planted value (empty when clean)."""
    exact, substrings, tokens = needles
    found = []
    for event in events:
        for leaf in _leaves(event, skip):
            if leaf in exact or any(s in leaf for s in substrings) or any(t.search(leaf) for t in tokens):
                found.append(leaf)
    return found
