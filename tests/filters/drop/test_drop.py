"""The `drop` filter: equals / matches / empty rules per role, counted under the first matching rule, config errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.filters import build_filter, make_event

from filters.drop import DropFilter
from sidecar.api import Event
from sidecar.config import ConfigError, build_config, load_yaml


@pytest.mark.parametrize(
    ("rule", "event", "dropped"),
    [
        ({"equals": ["google", "yahoo"]}, make_event(query="google"), True),
        ({"equals": ["google", "yahoo"]}, make_event(query="google maps"), False),
        ({"equals": ["google"]}, make_event(query="Google"), False),
        ({"equals": ["google"], "ignore_case": True}, make_event(query="GOOGLE"), True),
        ({"matches": r"\d{3}-\d{2}-\d{4}"}, make_event(query="ssn 123-45-6789"), True),
        ({"matches": r"\d{3}-\d{2}-\d{4}"}, make_event(query="ssn 123456789"), False),
        ({"matches": "^porn", "ignore_case": True}, make_event(query="Porn videos"), True),
        ({"matches": "^porn"}, make_event(query="free porn"), False),
        ({"role": "url", "empty": True}, make_event(url=""), True),
        ({"role": "url", "empty": True}, make_event(url=None), True),
        ({"role": "url", "empty": True}, make_event(url="http://a.com"), False),
        ({"role": "url", "empty": False}, make_event(url="http://a.com"), True),
        ({"role": "query", "empty": True}, make_event(query=""), True),  # empty queries reach filters (defect 13)
        ({"role": "query", "empty": True}, make_event(query=" \u3000 "), True),
        ({"role": "query", "empty": True}, make_event(query=" a "), False),
        ({"role": "query", "empty": False}, make_event(query=""), False),
        ({"equals": [""]}, make_event(query=""), True),
        ({"equals": [""]}, make_event(query="  "), False),
        ({"matches": r"^\s*$"}, make_event(query=""), True),
        ({"matches": r"\w"}, make_event(query=""), False),
        ({"role": "user", "equals": ["u1"]}, make_event(user="u1"), True),
        ({"role": "user", "equals": ["u1"]}, make_event(user="u10"), False),
    ],
)
def test_drop_rules(rule: dict, event: Event, dropped: bool, tmp_path: Path) -> None:
    """Each rule kind, with the near misses it must keep."""
    f = build_filter(DropFilter, {"rules": [rule]}, tmp_path)
    out = f.process([event])
    assert (out == []) is dropped
    assert f.counts.get("dropped_rule_0", 0) == int(dropped)


def test_drop_counts_first_matching_rule(tmp_path: Path) -> None:
    """An event matching several rules is counted once, under the first."""
    f = build_filter(DropFilter, {"rules": [{"equals": ["a"]}, {"matches": "^a"}]}, tmp_path)
    out = f.process([make_event(query="a"), make_event(query="ab"), make_event(query="b")])
    assert [e.query for e in out] == ["b"]
    assert dict(f.counts) == {"dropped_rule_0": 1, "dropped_rule_1": 1}


ONE_OF = "Set exactly one of equals, matches or empty"
BAD_RX = "invalid regular expression: missing ), unterminated subpattern"


@pytest.mark.parametrize(
    ("options", "key", "problem"),
    [
        ({}, "d.rules", "give at least one rule"),
        ({"rules": [{"role": "query"}]}, "d.rules[0].equals", ONE_OF),
        ({"rules": [{"equals": ["x"], "empty": True}]}, "d.rules[0].equals", ONE_OF),
        ({"rules": [{"matches": "("}]}, "d.rules[0].matches", BAD_RX),
        ({"rules": [{"equals": "x"}]}, "d.rules[0].equals", "must be a list of string"),
        ({"rules": [{"role": "agent", "empty": True}]}, "d.rules[0].role", "unknown value 'agent'"),
    ],
)
def test_drop_config_errors(options: dict, key: str, problem: str) -> None:
    """Rule errors are located at the rule's key."""
    with pytest.raises(ConfigError) as err:
        build_config(DropFilter.Config, options, load_yaml("<t>", "{}"), "d")
    assert (err.value.key, err.value.problem) == (key, problem)
