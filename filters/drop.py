r"""``drop``: drop events whose role value matches a rule (counted per rule, never logged).

A value is compared as text, None as ``""``. An empty query reaches this filter as
``""`` (codecs keep it; only a filter decides to drop it): ``empty: true`` drops a
value that is empty or only spaces, ``equals: [""]`` only the exact empty string,
and a ``matches`` pattern sees ``""`` (``'^\s*$'`` matches it, ``'\w'`` does not).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from sidecar.api import BuildContext, ConfigValueError, Event, Filter, FilterConfig, option


@dataclass(frozen=True)
class DropRule:
    """One rule; exactly one of `equals`, `matches`, `empty` is set."""

    role: Literal["user", "query", "time", "rank", "url"] = option("query", "Role the rule looks at.")
    equals: tuple[str, ...] | None = option(None, "Drop when the value is one of these strings.")
    matches: str | None = option(None, "Drop when this regular expression matches (re.search).")
    empty: bool | None = option(
        None, "Drop when the value is empty or only spaces (true), or when it has a visible character (false)."
    )
    ignore_case: bool = option(False, "Case-insensitive `equals` and `matches`.")

    def __post_init__(self) -> None:
        given = [k for k in ("equals", "matches", "empty") if getattr(self, k) is not None]
        if len(given) != 1:
            raise ConfigValueError("equals", "Set exactly one of equals, matches or empty")
        if self.matches is not None:
            try:
                re.compile(self.matches)
            except re.error as exc:
                raise ConfigValueError("matches", f"invalid regular expression: {exc.msg}") from None


@dataclass(frozen=True)
class DropConfig(FilterConfig):
    """Options of ``drop``: an event is dropped when any rule matches."""

    rules: tuple[DropRule, ...] = option((), "Rules; the event is dropped if any matches.")

    def __post_init__(self) -> None:
        if not self.rules:
            raise ConfigValueError("rules", "give at least one rule")


class DropFilter(Filter[DropConfig]):
    """Drop events matching any configured rule."""

    NAME = "drop"
    Config = DropConfig
    SUMMARY = "drop events whose field matches a rule (equals / regex / empty)"

    def __init__(self, config: DropConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.tests = [self._compile(rule) for rule in config.rules]

    @staticmethod
    def _compile(rule: DropRule) -> Callable[[Event], bool]:
        role = rule.role
        if rule.empty is not None:
            want = rule.empty
            return lambda ev: (not str(getattr(ev, role) or "").strip()) == want
        if rule.matches is not None:
            rx = re.compile(rule.matches, re.IGNORECASE if rule.ignore_case else 0)
            return lambda ev: rx.search(str(getattr(ev, role) or "")) is not None
        assert rule.equals is not None
        if rule.ignore_case:
            folded = frozenset(v.casefold() for v in rule.equals)
            return lambda ev: str(getattr(ev, role) or "").casefold() in folded
        values = frozenset(rule.equals)
        return lambda ev: str(getattr(ev, role) or "") in values

    def process(self, batch: list[Event]) -> list[Event]:
        kept = []
        tests = self.tests
        for ev in batch:
            for i, test in enumerate(tests):
                if test(ev):
                    self.counts[f"dropped_rule_{i}"] += 1
                    break
            else:
                kept.append(ev)
        return kept
