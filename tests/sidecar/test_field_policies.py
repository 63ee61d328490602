"""Every field accounted for (issue 25 item 3): ``schema.fields`` gives each non-role field a policy, ``unlisted``
decides the rest, and the runtime applies them after decoding (JSON lines here; the other formats in
test_field_policy_formats.py, the properties in test_field_policy_properties.py).

The records are written here (no real data): made-up addresses from the documentation ranges (RFC 5737, RFC
3849), made-up cookies and user agents.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from helpers.fields import FIREFOX, KEY, KEY_ENV, ROLES, json_line, run_records, write_config

from sidecar.api import Event, RecordBatch
from sidecar.cli.core import check_config
from sidecar.config import ConfigError, load_config
from sidecar.fieldvalues import IpEncrypt, hash_value, ip_prefix
from sidecar.pipeline import Pipeline


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


@pytest.fixture
def pipelines() -> Iterator[list[Pipeline]]:
    made: list[Pipeline] = []
    yield made
    for p in made:
        p.close()


def run(tmp_path: Path, pipelines: list[Pipeline], schema: dict[str, Any], records: list[Any]) -> list[Any]:
    """JSON lines through a runtime with ``schema`` (roles: :data:`ROLES`), closed by the fixture."""
    out, pipeline = run_records(write_config(tmp_path, {"roles": ROLES, **schema}), records, "jsonl")
    pipelines.append(pipeline)
    return out


# ---- each policy, JSON lines ------------------------------------------------------------------------------
def test_every_policy_on_json_lines(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    schema = {
        "fields": {
            "ip": "ip_encrypt",
            "net": {"policy": "ip_prefix", "ipv4_prefix": 16},
            "ua": "user_agent",
            "sid": {"policy": "hash", "length": 20},
            "ref": "url",
            "note": "scrub",
            "secret": "drop",
            "page": "keep",
        },
        "format": "jsonl",
    }
    line = json_line(
        ip="192.0.2.10",
        net="198.51.100.7",
        ua=FIREFOX,
        sid="cookie-abc",
        ref="https://blog.example.com/users/jane?token=1",
        note="call me at 555-123-4567",
        secret="s3cr3t",
        page=2,
    )
    (out,) = run(tmp_path, pipelines, schema, [line])
    rec = json.loads(out)
    assert list(rec) == ["uid", "q", "t", "ip", "net", "ua", "sid", "ref", "note", "page"]  # order kept, secret gone
    assert ipaddress.ip_address(rec["ip"]).version == 4 and rec["ip"] != "192.0.2.10"
    assert rec["ip"] == IpEncrypt(KEY.encode()).encrypt("192.0.2.10")
    assert rec["net"] == "198.51.0.0"
    assert rec["ua"] == "Firefox 121"
    assert re.fullmatch(r"[0-9a-f]{20}", rec["sid"]) and rec["sid"] != hash_value(KEY.encode(), "cookie-abc", 20)
    assert rec["ref"] == "https://blog.example.com"
    assert "555" not in rec["note"] and rec["note"].startswith("call me at")
    assert rec["page"] == 2
    assert {k: rec[k] for k in ("uid", "q", "t")} == {"uid": "u1", "q": "cheap flights", "t": "2026-11-27 10:00:00"}
    counts = pipelines[0].stats()["fields"]
    assert counts["secret"] == {"removed": 1} and counts["ip"] == {"changed": 1} and "page" not in counts


def test_the_hash_is_keyed_and_stable(
    tmp_path: Path, pipelines: list[Pipeline], monkeypatch: pytest.MonkeyPatch
) -> None:
    schema = {"fields": {"sid": "hash"}, "format": "jsonl"}
    first = run(tmp_path, pipelines, schema, [json_line(sid="a"), json_line(sid="a"), json_line(sid="b")])
    sids = [json.loads(x)["sid"] for x in first]
    assert sids[0] == sids[1] != sids[2]
    monkeypatch.setenv(KEY_ENV, "another-key-not-secret-987654321")
    (other,) = run(tmp_path / "..", pipelines, schema, [json_line(sid="a")])
    assert json.loads(other)["sid"] != sids[0]


def test_unreadable_values_are_removed_and_empty_ones_kept(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    schema = {"fields": {"ip": "ip_prefix", "ua": "user_agent", "ref": "url"}, "format": "jsonl"}
    lines = [json_line(ip="not an address 555-12-3456", ua=7, ref=["x"]), json_line(ip="-", ua="", ref=None)]
    out = run(tmp_path, pipelines, schema, lines)
    assert json.loads(out[0]) == {"uid": "u1", "q": "cheap flights", "t": "2026-11-27 10:00:00"}
    assert out[1] == lines[1]  # nothing to hide: byte for byte
    assert pipelines[0].stats()["fields"]["ip"] == {"unreadable_removed": 1}


def test_address_lists_ports_and_zones(tmp_path: Path) -> None:
    assert ip_prefix("203.0.113.9, unknown,198.51.100.200:8080", 24, 48) == "203.0.113.0, unknown,198.51.100.0"
    assert ip_prefix("[2001:db8:aa:bb::1]:443", 24, 48) == "2001:db8:aa::"
    assert ip_prefix("fe80::1%eth0", 24, 16) == "fe80::"
    assert ip_prefix("192.0.2.1 or 2", 24, 48) is None
    enc = IpEncrypt(KEY.encode())
    out = enc.encrypt("2001:db8::1")
    assert out is not None and ipaddress.ip_address(out).version == 6 and out != "2001:db8::1"


def test_a_value_policy_on_a_role_field_sets_the_role(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    """The user role's field with ip_encrypt: the chain sees (and the output holds) the pseudonym address."""
    schema = {"fields": {"uid": "ip_encrypt"}, "format": "jsonl"}
    lines = [json_line(uid="192.0.2.1"), json_line(uid="not an address"), json_line(uid="")]
    out = run(tmp_path, pipelines, schema, lines)
    assert json.loads(out[0])["uid"] == IpEncrypt(KEY.encode()).encrypt("192.0.2.1")
    assert json.loads(out[1])["uid"] is None  # unreadable: removed, never written as it came
    assert out[2] == lines[2]
    assert pipelines[0].stats()["fields"]["uid"] == {"changed": 1, "unreadable_removed": 1}


# ---- unlisted ------------------------------------------------------------------------------------------------
def test_unlisted_drop_removes_what_is_not_declared(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    schema = {"fields": {"page": "keep"}, "unlisted": "drop", "format": "jsonl"}
    (out,) = run(tmp_path, pipelines, schema, [json_line(page=1, cookie="c", ip="192.0.2.1")])
    assert json.loads(out) == {"uid": "u1", "q": "cheap flights", "t": "2026-11-27 10:00:00", "page": 1}
    assert pipelines[0].stats()["fields"]["cookie"] == {"unlisted_dropped": 1}


def test_unlisted_error_dead_letters_the_record_only(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    """Fail-closed: a record with an undeclared field is dead-lettered, named by field and counted; the good
    records of its batch go on unchanged."""
    schema = {"fields": {"page": "keep"}, "unlisted": "error", "format": "jsonl"}
    lines = [json_line(page=1), json_line(page=2, cookie="c"), "not json", json_line(page=3)]
    out = run(tmp_path, pipelines, schema, lines)
    assert out == [lines[0], lines[3]]
    stats = pipelines[0].stats()
    assert stats["dead_letters"] == {"undeclared_field": 1, "invalid_json": 1}
    assert stats["fields"] == {"cookie": {"undeclared": 1}}
    entries = [json.loads(x) for x in (tmp_path / "state" / "dead-letter.jsonl").read_text().splitlines()]
    undeclared = next(e for e in entries if e["reason"] == "undeclared_field")
    assert undeclared["field"] == "cookie" and undeclared["line"] == 2 and undeclared["record"] == lines[1]


def test_odd_field_names_are_counted_as_other(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    schema = {"unlisted": "error", "format": "jsonl"}
    run(tmp_path, pipelines, schema, [json_line(**{"jane@example.com": 1}), json_line(**{"x" * 80: 1})])
    assert pipelines[0].stats()["fields"] == {"_other": {"undeclared": 2}}


# ---- config errors and check-config --sample ----------------------------------------------------------------
@pytest.mark.parametrize(
    ("schema", "key", "problem"),
    [
        ({"fields": {"q": "hash"}}, "schema.fields.q", "is the query's field"),
        ({"fields": {"uid": "drop"}}, "schema.fields.uid", "a role takes a value policy only"),
        ({"fields": {"ip": "ip_crypt"}}, "schema.fields.ip", "unknown value"),
        (
            {"fields": {"ip": {"policy": "hash", "ipv4_prefix": 8}}},
            "schema.fields.ip.ipv4_prefix",
            "ip_prefix policy only",
        ),
        ({"fields": {"ip": "ip_encrypt"}, "field_key_env": None}, "schema.fields.ip", "need a key"),
        ({"fields": {"ip": "hash"}, "field_key_env": "QUERYLOG_TEST_UNSET"}, "schema.field_key_env", "not set"),
        ({"unlisted": "reject"}, "schema.unlisted", "unknown value"),
    ],
)
def test_located_config_errors(tmp_path: Path, schema: dict[str, Any], key: str, problem: str) -> None:
    path = write_config(tmp_path, {"roles": ROLES, **schema})
    with pytest.raises(ConfigError) as err:
        Pipeline(load_config(path), with_sinks=False, validate_only=True).close()
    assert err.value.key == key and problem in err.value.problem and err.value.line is not None


def test_a_short_key_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "short")
    path = write_config(tmp_path, {"roles": ROLES, "fields": {"ip": "ip_encrypt"}})
    with pytest.raises(ConfigError, match="at least 16"):
        Pipeline(load_config(path), with_sinks=False, validate_only=True).close()


def test_check_config_sample_lists_fields_without_a_policy(tmp_path: Path) -> None:
    sample = tmp_path / "sample.jsonl"
    sample.write_text(json_line(page=1, cookie="c") + "\n" + json_line(page=2, ip="192.0.2.1") + "\n", encoding="utf-8")
    for unlisted, code in (("error", 2), ("drop", 0)):
        path = write_config(
            tmp_path, {"roles": ROLES, "format": "jsonl", "fields": {"page": "keep"}, "unlisted": unlisted}
        )
        result = CliRunner().invoke(check_config, [str(path), "--sample", str(sample)])
        assert result.exit_code == code, result.output
        lines = [ln for ln in result.stderr.splitlines() if "has no policy" in ln]
        assert [re.search(r"field '(\w+)'", ln).group(1) for ln in lines] == ["cookie", "ip"]  # type: ignore[union-attr]
        assert all("1 of 2 records" in ln for ln in lines)


def test_events_without_codec_pass(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    """An event built without a codec has no fields to account for."""
    pipeline = Pipeline(load_config(write_config(tmp_path, {"roles": ROLES, "unlisted": "error"})), with_sinks=False)
    pipelines.append(pipeline)
    codec = pipeline.ctx.codec_for("jsonl")
    assert pipeline.fields is not None and codec is not None
    ev = Event("u", "q")
    assert pipeline.fields.apply([ev], RecordBatch([], codec, "x"), [], Counter()) == [ev]


def test_the_first_pass_of_prescan_sees_what_the_real_pass_sees(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    """`--prescan`'s first pass (sidecar/drive.py) gets the events through the same policies (a prescanning
    filter learns the pseudonymized users), and nothing is counted or dead-lettered there."""
    schema = {"roles": ROLES, "format": "jsonl", "fields": {"uid": "ip_encrypt"}, "unlisted": "error"}
    config = write_config(tmp_path, schema)
    pipeline = Pipeline(load_config(config), with_sinks=False)
    pipelines.append(pipeline)
    codec = pipeline.ctx.codec_for("jsonl")
    assert pipeline.fields is not None and codec is not None
    events = codec.decode_many([json_line(uid="192.0.2.1"), json_line(uid="192.0.2.1", extra=1)], "\n", [])
    out = pipeline.fields.first_pass(events)
    assert [ev.user for ev in out] == [IpEncrypt(KEY.encode()).encrypt("192.0.2.1")]
    assert pipeline.fields.stats() == {} and pipeline.stats()["dead_letters"] == {}
