"""`pseudonymize` with several keys (ids) and rotating keys: which key is used, the per-period derivation (HKDF),
the key id in stats, /metrics and the audit's provenance (never the key), and a rebuilt filter picking up a new
key (reload)."""

from __future__ import annotations

import hmac
import json
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from helpers.filters import build_filter, make_event
from prometheus_client import CollectorRegistry, generate_latest

from filters.pseudonymize import PseudonymizeFilter, event_day, hkdf_sha256
from sidecar.api import Event
from sidecar.config import ConfigError, build_config, load_config, load_yaml
from sidecar.metrics import PipelineCollector
from sidecar.pipeline import Pipeline
from sidecar.tools.audit.provenance import provenance

OLD = "old-key-0123456789abcdef"
NEW = "new-key-0123456789abcdef"


@pytest.fixture
def two_keys(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> dict[str, object]:
    """Options with an env key (id k2025) and a newer file key (id k2026)."""
    monkeypatch.setenv("QL_OLD_KEY", OLD)
    (tmp_path / "new.key").write_text(NEW + "\n")
    return {"keys": [{"id": "k2025", "key_env": "QL_OLD_KEY"}, {"id": "k2026", "key_file": "new.key"}]}


def hmac_hex(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), "sha256").hexdigest()[:16]


def period_key(key: str, label: str) -> bytes:
    """The per-period key as an independent HKDF-SHA256 implementation derives it."""
    hkdf = HKDF(
        algorithm=hashes.SHA256(), length=32, salt=None, info=b"querylog-sidecar pseudonymize " + label.encode()
    )
    return hkdf.derive(key.encode())


def at(user: str, time: object) -> Event:
    ev = make_event(user)
    ev.time = time
    return ev


def test_the_newest_key_pseudonymizes_and_its_id_is_in_stats(tmp_path: Path, two_keys: dict[str, object]) -> None:
    """Several keys with ids (env and file): the last one listed pseudonymizes; stats name its id, not a key."""
    f = build_filter(PseudonymizeFilter, two_keys, tmp_path)
    (ev,) = f.process([make_event("4417749")])
    assert ev.user == hmac_hex(NEW.encode(), "4417749")
    assert f.stats() == {"key_id": "k2026", "rotate": "none", "period": None}
    assert OLD not in json.dumps(f.stats()) and NEW not in json.dumps(f.stats())


def test_a_single_key_keeps_its_output_and_gets_an_id(tmp_path: Path, hmac_key: str) -> None:
    """key_env alone (every existing config): the plain HMAC of the key, its id the variable's name or key_id."""
    from helpers import TEST_KEY

    plain = build_filter(PseudonymizeFilter, {"key_env": hmac_key}, tmp_path)
    named = build_filter(PseudonymizeFilter, {"key_env": hmac_key, "key_id": "prod-2026"}, tmp_path)
    assert plain.pseudonym("u") == named.pseudonym("u") == hmac_hex(TEST_KEY.encode(), "u")
    assert plain.stats()["key_id"] == hmac_key and named.stats()["key_id"] == "prod-2026"
    (tmp_path / "hmac.key").write_text("file-key-0123456789\n")
    assert build_filter(PseudonymizeFilter, {"key_file": "hmac.key"}, tmp_path).stats()["key_id"] == "hmac.key"


def test_rotate_daily_unlinks_days_and_keeps_a_day(tmp_path: Path, two_keys: dict[str, object]) -> None:
    """rotate: daily: the same user gets one pseudonym within a UTC day and another the next day; each is the HMAC
    under HKDF-SHA256(newest key, info 'querylog-sidecar pseudonymize <day>')."""
    f = build_filter(PseudonymizeFilter, {**two_keys, "rotate": "daily"}, tmp_path)
    out = f.process(
        [
            at("4417749", "2026-11-27 00:00:01"),
            at("4417749", "2026-11-27 23:59:59"),
            at("4417749", "2026-11-28 00:00:00"),
            at("98280", "2026-11-28 08:00:00"),
        ]
    )
    users = [e.user for e in out]
    assert users[0] == users[1] == hmac_hex(period_key(NEW, "2026-11-27"), "4417749")
    assert users[2] == hmac_hex(period_key(NEW, "2026-11-28"), "4417749")
    assert users[2] != users[0] and users[3] not in users[:3]
    assert f.stats() == {"key_id": "k2026", "rotate": "daily", "period": "2026-11-28"}
    assert hkdf_sha256(NEW.encode(), b"x") == HKDF(hashes.SHA256(), 32, None, b"x").derive(NEW.encode())


def test_rotate_weekly_is_the_iso_week(tmp_path: Path, hmac_key: str) -> None:
    """rotate: weekly: Monday to Sunday (ISO week) share a pseudonym; the next Monday does not."""
    f = build_filter(PseudonymizeFilter, {"key_env": hmac_key, "rotate": "weekly"}, tmp_path)
    week = [f.pseudonym("u", f"2026-11-{d} 12:00:00") for d in (23, 26, 29)]  # Mon, Thu, Sun of 2026-W48
    assert week[0] == week[1] == week[2] != f.pseudonym("u", "2026-11-30 00:00:00")
    assert f.stats()["period"] == "2026-W49"


def test_the_period_follows_the_event_time_in_utc(tmp_path: Path, hmac_key: str) -> None:
    """Epoch seconds, milliseconds (numbers or text) and ISO 8601 with a zone give the UTC day; a time that does
    not read as one (none, empty, garbage) gives the processing time's day."""
    noon = datetime(2026, 11, 27, 12, tzinfo=UTC).timestamp()
    for value in (noon, int(noon), noon * 1000, str(int(noon)), "2026-11-27T12:00:00Z", "2026-11-27T20:00:00-05:00"):
        assert event_day(value) in (date(2026, 11, 27), date(2026, 11, 28)), value
    assert event_day("2026-11-27T20:00:00-05:00") == date(2026, 11, 28)
    assert event_day(noon * 1000) == event_day("2026-11-27 23:59:59") == date(2026, 11, 27)
    for value in (None, "", "yesterday", True, float("nan"), 1e300, [1]):
        assert event_day(value) is None, value
    f = build_filter(PseudonymizeFilter, {"key_env": hmac_key, "rotate": "daily"}, tmp_path)
    f.ctx.clock = lambda: datetime(2026, 12, 1, 9, tzinfo=UTC).timestamp()
    untimed = f.process([at("u", None), at("u", "not a time"), at("u", "2026-13-45 10:00:00")])
    assert untimed[0].user == untimed[1].user == untimed[2].user == f.pseudonym("u", "2026-12-01 00:00:00")
    assert f.pseudonym("u") == untimed[0].user  # no time given: now


@pytest.mark.parametrize(
    ("options", "key", "problem"),
    [
        ({"keys": [{"id": "a", "key_env": "A"}], "key_env": "B"}, "keys", "keys replaces key_env, key_file"),
        ({"keys": [{"id": "a", "key_env": "A"}, {"id": "a", "key_env": "B"}]}, "keys", "every key needs its own id"),
        ({"keys": [{"id": "a b", "key_env": "A"}]}, "keys[0].id", "a key id is 1-64 letters"),
        ({"keys": [{"id": "a"}]}, "keys[0].key_env", "Set exactly one of key_env or key_file"),
        ({"keys": [{"key_env": "A"}]}, "keys[0].id", "required key is missing"),
        ({"key_env": "A", "key_id": "-x"}, "key_id", "a key id is 1-64 letters"),
        ({"key_env": "A", "rotate": "hourly"}, "rotate", "unknown value 'hourly'"),
    ],
)
def test_key_config_errors(options: dict[str, object], key: str, problem: str) -> None:
    """Bad key options are located config errors naming the key."""
    with pytest.raises(ConfigError) as err:
        build_config(PseudonymizeFilter.Config, options, load_yaml("<t>", "{}"), "p")
    assert err.value.key == f"p.{key}" and err.value.problem.startswith(problem)


def test_each_key_needs_16_bytes_located_at_its_entry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every listed key, old or new, needs 16 bytes; the error names the entry and its line, never the key."""
    monkeypatch.setenv("QL_GOOD_KEY", NEW)
    monkeypatch.setenv("QL_SHORT_KEY", "too-short")
    config = tmp_path / "c.yaml"
    config.write_text(
        "state_dir: st\nfilters:\n  - pseudonymize:\n      keys:\n        - {id: a, key_env: QL_GOOD_KEY}\n"
        "        - {id: b, key_env: QL_SHORT_KEY}\n",
        encoding="utf-8",
    )
    with pytest.raises(ConfigError) as err:
        Pipeline(load_config(config)).close()
    assert err.value.key == "filters[0].pseudonymize.keys[1].key_env" and err.value.line == 6
    assert "9 bytes; at least 16" in str(err.value) and "too-short" not in str(err.value)


def write_config(path: Path, keys: list[tuple[str, str]], rotate: str = "daily") -> Path:
    items = "".join(f"        - {{id: {i}, key_env: {env}}}\n" for i, env in keys)
    path.write_text(f"state_dir: st\nfilters:\n  - pseudonymize:\n      rotate: {rotate}\n      keys:\n{items}")
    return path


def test_key_id_in_metrics_never_the_key(tmp_path: Path, two_keys: dict[str, object]) -> None:
    """/metrics: querylog_pseudonymize_key_info{filter, key_id, rotate, period} 1; no key in the scrape."""
    config = write_config(tmp_path / "c.yaml", [("k2025", "QL_OLD_KEY")])
    pipeline = Pipeline(load_config(config))
    try:
        pipeline.chain.process([at("u", "2026-11-27 10:00:00")])
        registry = CollectorRegistry(auto_describe=False)
        registry.register(PipelineCollector(pipeline.stats))
        scrape = generate_latest(registry).decode()
    finally:
        pipeline.close()
    want = 'querylog_pseudonymize_key_info{filter="pseudonymize",key_id="k2025",period="2026-11-27",rotate="daily"} 1.0'
    assert want in scrape.splitlines()
    assert OLD not in scrape


def test_audit_provenance_names_the_key_ids(tmp_path: Path, two_keys: dict[str, object]) -> None:
    """The audit's provenance lists each pseudonymize filter's key id in use, every id and the rotation; the
    key itself is never read or written."""
    config = write_config(tmp_path / "c.yaml", [("k2025", "QL_OLD_KEY"), ("k2026", "QL_NEW_KEY")], "weekly")
    log = tmp_path / "log.tsv"
    log.write_text("AnonID\tQuery\n1\tq\n")
    prov = provenance(str(log), str(log), config_file=str(config))
    assert prov["pseudonymize_keys"] == [{"key_id": "k2026", "key_ids": ["k2025", "k2026"], "rotate": "weekly"}]
    assert OLD not in json.dumps(prov)
    single = tmp_path / "single.yaml"
    single.write_text("filters:\n  - pseudonymize: {key_env: QL_OLD_KEY}\n")
    keys = provenance(str(log), str(log), config_file=str(single))["pseudonymize_keys"]
    assert keys == [{"key_id": "QL_OLD_KEY", "key_ids": ["QL_OLD_KEY"], "rotate": "none"}]


def test_a_rebuilt_filter_picks_up_a_new_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reload builds a new chain from the new config: a key added there (and a changed key value) is used by the
    new filter at once; nothing is cached outside a filter."""
    monkeypatch.setenv("QL_OLD_KEY", OLD)
    config = write_config(tmp_path / "c.yaml", [("k2025", "QL_OLD_KEY")])
    first = Pipeline(load_config(config))
    monkeypatch.setenv("QL_NEW_KEY", NEW)
    second = Pipeline(load_config(write_config(config, [("k2025", "QL_OLD_KEY"), ("k2026", "QL_NEW_KEY")])))
    try:
        a, b = first.chain.filters[0], second.chain.filters[0]
        assert isinstance(a, PseudonymizeFilter) and isinstance(b, PseudonymizeFilter)
        day = "2026-11-27 10:00:00"
        assert a.pseudonym("u", day) == hmac_hex(period_key(OLD, "2026-11-27"), "u")
        assert b.pseudonym("u", day) == hmac_hex(period_key(NEW, "2026-11-27"), "u")
        assert (a.stats()["key_id"], b.stats()["key_id"]) == ("k2025", "k2026")
    finally:
        first.close()
        second.close()
