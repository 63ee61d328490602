"""Built-in filters (pseudonymize, truncate_url, drop) and the lifecycle of every registered filter."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
from pathlib import Path
from random import Random

import pytest
import structlog
from helpers import TEST_KEY, GeneratedLog, default_filter_entries, find_leaks, leak_needles

from filters.drop import DropFilter
from filters.pseudonymize import PseudonymizeFilter
from filters.truncate_url import TruncateUrlFilter, truncate
from sidecar.api import FILTERS, BuildContext, ConfigValueError, Event
from sidecar.codecs import SchemaConfig, TsvCodec
from sidecar.config import ConfigError, build_config, load_yaml
from sidecar.registry import plugins
from sidecar.state import StateStore


def _build(cls: type, options: dict, tmp: Path, state: StateStore | None = None):  # type: ignore[no-untyped-def]
    config = build_config(cls.Config, options, load_yaml("<test>", "{}"), f"filters[0].{cls.NAME}")
    return cls(config, BuildContext(config_dir=tmp, state=state, rng=Random(1), seed=1))


def _events(text: str, limit: int | None = None) -> list[Event]:
    codec = TsvCodec(SchemaConfig())
    lines = text.split("\n")
    codec.accept_header(lines[0])
    body = [line for line in lines[1:] if line][:limit]
    bad: list[tuple[int, str]] = []
    events = codec.decode_many(body, "\n", bad)
    assert not bad
    return events


def _ev(user: str = "u1", query: str = "q", url: str | None = None) -> Event:
    return Event(user, query, "2006-03-01 00:00:00", "1" if url else "", url)


# --- lifecycle of every registered filter (STYLE.md item 5) ---------------------------------

ENTRIES, SKIPPED = default_filter_entries()


@pytest.mark.parametrize("entry", ENTRIES, ids=[next(iter(e)) for e in ENTRIES])
def test_lifecycle_build_process_flush_close_logs_no_values(
    entry: dict, generated_log: GeneratedLog, tmp_path: Path, hmac_key: str, debug_structlog: None,
) -> None:
    """build -> process (batches) -> flush -> flush(final) -> close; no more events out than in;
    counts and stats are plain numbers; no captured log event quotes a value."""
    ((name, options),) = entry.items()
    cls = plugins(FILTERS)[name]
    events = _events(generated_log.text)
    ids = {id(e) for e in events}
    state = StateStore(tmp_path / "state")
    out: list[Event] = []
    with structlog.testing.capture_logs() as logs:
        f = _build(cls, options, tmp_path, state)
        for i in range(0, len(events), 500):
            out += f.process(events[i:i + 500])
            out += f.flush(False)
        out += f.flush(True)
        held = f.held()
        stats = f.stats()
        counts = dict(f.counts)
        f.close()
    state.close()
    assert all(isinstance(e, Event) for e in out)
    if not cls.BUFFERING:  # a buffering filter may rebuild held events from the state store
        assert all(id(e) in ids for e in out), "a filter returns the events it was given"
        assert len({id(e) for e in out}) == len(out), "no event comes out twice"
    assert isinstance(held, int) and held >= 0
    assert len(out) + held <= len(events)
    json.dumps(stats)
    assert all(isinstance(k, str) and isinstance(v, int) for k, v in counts.items())
    needles = leak_needles(generated_log.text, generated_log.stats.planted_values)
    assert find_leaks(logs, needles) == []
    assert find_leaks([counts, stats], needles) == [], "counts and stats hold no values"


def test_built_in_filters_are_registered_and_default_buildable() -> None:
    """The three built-ins are registered through the entry-point group and enter the lifecycle test."""
    names = [next(iter(e)) for e in ENTRIES]
    assert {"pseudonymize", "truncate_url", "drop"} <= set(names), SKIPPED
    assert plugins(FILTERS)["pseudonymize"] is PseudonymizeFilter


# --- pseudonymize ----------------------------------------------------------------------------


def test_pseudonym_is_keyed_hmac_sha256(tmp_path: Path, hmac_key: str) -> None:
    """hex: the first `length` hex digits of HMAC-SHA256(key, id); the same id always maps the same way."""
    f = _build(PseudonymizeFilter, {"key_env": hmac_key}, tmp_path)
    batch = [_ev("4417749"), _ev("4417749"), _ev("98280")]
    out = f.process(batch)
    want = hmac.new(TEST_KEY.encode(), b"4417749", hashlib.sha256).hexdigest()[:16]
    assert [e.user for e in out] == [want, want, hmac.new(TEST_KEY.encode(), b"98280", "sha256").hexdigest()[:16]]
    assert f.counts["pseudonymized"] == 3


def test_pseudonym_depends_on_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another key gives other pseudonyms (a list of candidate ids cannot be matched without the key)."""
    monkeypatch.setenv("K1", "first-key")
    monkeypatch.setenv("K2", "second-key")
    a = _build(PseudonymizeFilter, {"key_env": "K1"}, tmp_path).pseudonym("12345")
    b = _build(PseudonymizeFilter, {"key_env": "K2"}, tmp_path).pseudonym("12345")
    assert a != b and "12345" not in (a, b)


def test_decimal_pseudonyms_keep_an_integer_column(tmp_path: Path, hmac_key: str) -> None:
    """output: decimal gives `length` digits (zero-padded), so AnonID stays an integer column."""
    f = _build(PseudonymizeFilter, {"key_env": hmac_key, "output": "decimal", "length": 9}, tmp_path)
    values = {f.pseudonym(str(i)) for i in range(2000)}
    assert all(len(v) == 9 and v.isdigit() for v in values)
    assert len(values) == 2000


def test_key_file_relative_to_config_and_cache_off(tmp_path: Path) -> None:
    """key_file is read relative to the config folder (stripped); cache_size 0 gives the same pseudonyms."""
    (tmp_path / "hmac.key").write_text("file-key\n")
    cached = _build(PseudonymizeFilter, {"key_file": "hmac.key"}, tmp_path)
    uncached = _build(PseudonymizeFilter, {"key_file": "hmac.key", "cache_size": 0}, tmp_path)
    expect = hmac.new(b"file-key", b"u", "sha256").hexdigest()[:16]
    assert cached.pseudonym("u") == cached.pseudonym("u") == uncached.pseudonym("u") == expect


def test_pseudonymize_other_role(tmp_path: Path, hmac_key: str) -> None:
    """role: query replaces the query and leaves the user id."""
    f = _build(PseudonymizeFilter, {"key_env": hmac_key, "role": "query", "length": 32}, tmp_path)
    (e,) = f.process([_ev("u1", "john smith")])
    assert e.user == "u1" and len(e.query) == 32 and e.query != "john smith"


@pytest.mark.parametrize(
    ("options", "key", "problem"),
    [
        ({}, "key_env", "Set exactly one of key_env or key_file"),
        ({"key_env": "A", "key_file": "b"}, "key_env", "Set exactly one of key_env or key_file"),
        ({"key_env": "A", "output": "decimal", "length": 20}, "length", "decimal pseudonyms are at most 19 digits"),
        ({"key_env": "A", "length": 4}, "length", "must be >= 8, got 4"),
        ({"key_env": "A", "output": "base64"}, "output", "unknown value 'base64'"),
    ],
)
def test_pseudonymize_config_errors(options: dict, key: str, problem: str) -> None:
    """Bad options are located config errors naming the key."""
    with pytest.raises(ConfigError) as err:
        build_config(PseudonymizeFilter.Config, options, load_yaml("<t>", "{}"), "p")
    assert err.value.key == f"p.{key}" and err.value.problem == problem


def test_missing_key_is_a_config_value_error_without_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An unset variable or a missing/empty file fails the build, naming the variable or file."""
    monkeypatch.delenv("NOPE_KEY", raising=False)
    with pytest.raises(ConfigValueError, match="NOPE_KEY is not set"):
        _build(PseudonymizeFilter, {"key_env": "NOPE_KEY"}, tmp_path)
    (tmp_path / "empty.key").write_text("\n")
    with pytest.raises(ConfigValueError, match="is empty"):
        _build(PseudonymizeFilter, {"key_file": "empty.key"}, tmp_path)
    with pytest.raises(ConfigValueError, match="cannot read HMAC key file"):
        _build(PseudonymizeFilter, {"key_file": "absent.key"}, tmp_path)


# --- truncate_url ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "short", "with_port"),
    [
        # cut: path, query, fragment, user info, port
        ("https://user:pw@www.example.com:8443/u/jane?x=1#f", "https://www.example.com", "https://www.example.com:8443"),
        ("http://www.amazon.com/gp/product/B000?tag=x", "http://www.amazon.com", None),
        ("http://www.x.com?q=1", "http://www.x.com", None),
        ("http://www.x.com#frag", "http://www.x.com", None),
        ("HTTP://WWW.Example.COM/Path", "http://www.example.com", None),
        ("http://[::1]:8080/x", "http://[::1]", "http://[::1]:8080"),
        ("www.ebay.com/itm/123", "www.ebay.com", None),
        ("user@host.com/x", "host.com", None),
        ("http://exa mple.com:abc/x", "http://exa mple.com", None),  # malformed port: still cut
        ("ftp://files.example.org/pub/a.txt", "ftp://files.example.org", None),
        # already short: unchanged
        ("http://www.google.com", "http://www.google.com", None),
        ("http://en.wikipedia.org", "http://en.wikipedia.org", None),
        ("", "", None),
    ],
)
def test_truncate_table(url: str, short: str, with_port: str | None) -> None:
    """Scheme + host, as the AOL release; keep_port keeps an explicit port."""
    assert truncate(url) == short
    assert truncate(url, keep_port=True) == (with_port or short)


def test_truncate_filter_counts_changes_and_skips_empty(tmp_path: Path) -> None:
    """Only changed URLs are counted; empty or missing URLs stay as they are (same object)."""
    f = _build(TruncateUrlFilter, {}, tmp_path)
    batch = [_ev(url="http://a.com/x"), _ev(url="http://a.com"), _ev(url=""), _ev(url=None), _ev(url="http://a.com/x")]
    empty = batch[2].url
    out = f.process(batch)
    assert [e.url for e in out] == ["http://a.com", "http://a.com", "", None, "http://a.com"]
    assert out[2].url is empty
    assert f.counts["truncated"] == 2


# --- drop ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "event", "dropped"),
    [
        ({"equals": ["google", "yahoo"]}, _ev(query="google"), True),
        ({"equals": ["google", "yahoo"]}, _ev(query="google maps"), False),
        ({"equals": ["google"]}, _ev(query="Google"), False),
        ({"equals": ["google"], "ignore_case": True}, _ev(query="GOOGLE"), True),
        ({"matches": r"\d{3}-\d{2}-\d{4}"}, _ev(query="ssn 123-45-6789"), True),
        ({"matches": r"\d{3}-\d{2}-\d{4}"}, _ev(query="ssn 123456789"), False),
        ({"matches": "^porn", "ignore_case": True}, _ev(query="Porn videos"), True),
        ({"matches": "^porn"}, _ev(query="free porn"), False),
        ({"role": "url", "empty": True}, _ev(url=""), True),
        ({"role": "url", "empty": True}, _ev(url=None), True),
        ({"role": "url", "empty": True}, _ev(url="http://a.com"), False),
        ({"role": "url", "empty": False}, _ev(url="http://a.com"), True),
        ({"role": "user", "equals": ["u1"]}, _ev(user="u1"), True),
        ({"role": "user", "equals": ["u1"]}, _ev(user="u10"), False),
    ],
)
def test_drop_rules(rule: dict, event: Event, dropped: bool, tmp_path: Path) -> None:
    """Each rule kind, with the near misses it must keep."""
    f = _build(DropFilter, {"rules": [rule]}, tmp_path)
    out = f.process([event])
    assert (out == []) is dropped
    assert f.counts.get("dropped_rule_0", 0) == int(dropped)


def test_drop_counts_first_matching_rule(tmp_path: Path) -> None:
    """An event matching several rules is counted once, under the first."""
    f = _build(DropFilter, {"rules": [{"equals": ["a"]}, {"matches": "^a"}]}, tmp_path)
    out = f.process([_ev(query="a"), _ev(query="ab"), _ev(query="b")])
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


def test_event_repr_hides_values() -> None:
    """Events end up in tracebacks: their repr names no value."""
    e = _ev("4417749", "john smith 123-45-6789", "http://a.com/x")
    assert all(v not in repr(e) for v in ("4417749", "john", "123-45", "a.com"))


def test_events_from_text_keep_their_line(generated_log: GeneratedLog) -> None:
    """Decoded events keep the original line so an unchanged event is written back byte for byte."""
    events = _events(generated_log.text, 50)
    codec = events[0].codec
    buf = io.StringIO()
    for e in events:
        buf.write(codec.encode(e) + "\n")
    assert generated_log.text.split("\n", 1)[1].startswith(buf.getvalue())
