"""The `pseudonymize` filter: keyed HMAC-SHA256 pseudonyms, hex or decimal, key from env var or file, config errors."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest
from helpers import TEST_KEY
from helpers.filters import build_filter, make_event

from filters.pseudonymize import PseudonymizeFilter
from sidecar.api import ConfigValueError
from sidecar.config import ConfigError, build_config, load_yaml


def test_pseudonym_is_keyed_hmac_sha256(tmp_path: Path, hmac_key: str) -> None:
    """hex: the first `length` hex digits of HMAC-SHA256(key, id); the same id always maps the same way."""
    f = build_filter(PseudonymizeFilter, {"key_env": hmac_key}, tmp_path)
    batch = [make_event("4417749"), make_event("4417749"), make_event("98280")]
    out = f.process(batch)
    want = hmac.new(TEST_KEY.encode(), b"4417749", hashlib.sha256).hexdigest()[:16]
    assert [e.user for e in out] == [want, want, hmac.new(TEST_KEY.encode(), b"98280", "sha256").hexdigest()[:16]]
    assert f.counts["pseudonymized"] == 3


@pytest.mark.parametrize("role", ["user", "query"])
def test_an_empty_value_stays_empty(tmp_path: Path, hmac_key: str, role: str) -> None:
    """An empty or blank value (an empty query with role: query, a blank user id) is left as it is and counted
    empty_kept: a pseudonym would make a missing value look like a real one shared by every record without it."""
    f = build_filter(PseudonymizeFilter, {"key_env": hmac_key, "role": role}, tmp_path)
    batch = [make_event(**{role: v}) for v in ("", "  ", "x")]
    batch.append(make_event())
    setattr(batch[-1], role, None)
    out = f.process(batch)
    assert [getattr(e, role) for e in out] == [
        "",
        "  ",
        hmac.new(TEST_KEY.encode(), b"x", "sha256").hexdigest()[:16],
        None,
    ]
    assert f.counts == {"pseudonymized": 1, "empty_kept": 3}


def test_pseudonym_depends_on_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another key gives other pseudonyms (a list of candidate ids cannot be matched without the key)."""
    monkeypatch.setenv("K1", "first-key-0123456789")
    monkeypatch.setenv("K2", "second-key-0123456789")
    a = build_filter(PseudonymizeFilter, {"key_env": "K1"}, tmp_path).pseudonym("12345")
    b = build_filter(PseudonymizeFilter, {"key_env": "K2"}, tmp_path).pseudonym("12345")
    assert a != b and "12345" not in (a, b)


def test_decimal_pseudonyms_keep_an_integer_column(tmp_path: Path, hmac_key: str) -> None:
    """output: decimal gives `length` digits (zero-padded), so AnonID stays an integer column."""
    f = build_filter(PseudonymizeFilter, {"key_env": hmac_key, "output": "decimal", "length": 9}, tmp_path)
    values = {f.pseudonym(str(i)) for i in range(2000)}
    assert all(len(v) == 9 and v.isdigit() for v in values)
    assert len(values) == 2000


def test_key_file_relative_to_config_and_cache_off(tmp_path: Path) -> None:
    """key_file is read relative to the config folder (stripped); cache_size 0 gives the same pseudonyms."""
    (tmp_path / "hmac.key").write_text("file-key-0123456789\n")
    cached = build_filter(PseudonymizeFilter, {"key_file": "hmac.key"}, tmp_path)
    uncached = build_filter(PseudonymizeFilter, {"key_file": "hmac.key", "cache_size": 0}, tmp_path)
    expect = hmac.new(b"file-key-0123456789", b"u", "sha256").hexdigest()[:16]
    assert cached.pseudonym("u") == cached.pseudonym("u") == uncached.pseudonym("u") == expect


def test_pseudonymize_other_role(tmp_path: Path, hmac_key: str) -> None:
    """role: query replaces the query and leaves the user id."""
    f = build_filter(PseudonymizeFilter, {"key_env": hmac_key, "role": "query", "length": 32}, tmp_path)
    (e,) = f.process([make_event("u1", "john smith")])
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
        build_filter(PseudonymizeFilter, {"key_env": "NOPE_KEY"}, tmp_path)
    (tmp_path / "empty.key").write_text("\n")
    with pytest.raises(ConfigValueError, match="is empty"):
        build_filter(PseudonymizeFilter, {"key_file": "empty.key"}, tmp_path)
    with pytest.raises(ConfigValueError, match="cannot read HMAC key file"):
        build_filter(PseudonymizeFilter, {"key_file": "absent.key"}, tmp_path)


def test_a_short_key_is_refused_and_a_pasted_secret_is_not_echoed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An HMAC key under 16 bytes is a config error; a key_env that is not a variable name (a secret pasted
    there) is refused without showing it (issue 11, defect 16)."""
    from sidecar.config import ConfigError, load_config
    from sidecar.pipeline import Pipeline

    monkeypatch.setenv("QL_SHORT_KEY", "too-short")
    config = tmp_path / "c.yaml"
    config.write_text("state_dir: st\nfilters:\n  - pseudonymize: {key_env: QL_SHORT_KEY}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        Pipeline(load_config(config)).close()
    assert "9 bytes; at least 16" in str(err.value)
    config.write_text("state_dir: st\nfilters:\n  - pseudonymize: {key_env: 's3cr3t-k3y/+=='}\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        Pipeline(load_config(config)).close()
    assert "s3cr3t" not in str(err.value) and "must name an environment variable" in str(err.value)


def test_decimal_pseudonyms_stay_exact_json_numbers(tmp_path: Path, hmac_key: str) -> None:
    """16-digit decimal pseudonyms of integer ids stay integers below 2^53, so JavaScript and jq read them
    exactly (issue 11, defect 14)."""
    f = build_filter(PseudonymizeFilter, {"key_env": hmac_key, "output": "decimal", "length": 16}, tmp_path)
    events = [make_event() for _ in range(5000)]
    for i, e in enumerate(events):
        e.user = i  # a JSON number
    out = f.process(events)
    values = [e.user for e in out]
    assert all(type(v) is int and 0 <= v < 2**53 for v in values)
    assert len(set(values)) == 5000
    assert all(len(f.pseudonym(i)) == 16 for i in range(50))
