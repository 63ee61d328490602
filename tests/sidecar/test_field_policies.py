"""Every field accounted for (issue 25 item 3): ``schema.fields`` gives each non-role field a policy, ``unlisted``
decides the rest, and the runtime applies them after decoding, for every codec with field access.

The records are written here (no real data): made-up addresses from the documentation ranges (RFC 5737, RFC
3849), made-up cookies and user agents.
"""

from __future__ import annotations

import ipaddress
import json
import re
import signal
import subprocess
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yacryptopan  # type: ignore[import-untyped]
import yaml
from click.testing import CliRunner
from helpers import QUERYLOG
from helpers.httptest import lines, post
from helpers.serving import ServeLog
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.forward.codec import ForwardCodec
from adapters.forward.protocol import Entry
from adapters.grpc.codec import ProtoCodec
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import QueryEvent
from adapters.vector.codec import EventWrapper, VectorCodec
from sidecar.api import Event, RecordBatch
from sidecar.cli.core import check_config
from sidecar.config import ConfigError, load_config
from sidecar.fieldvalues import IpEncrypt, derive_key, hash_value, ip_prefix
from sidecar.pipeline import Pipeline
from sidecar.useragent import generalise

KEY_ENV = "QUERYLOG_TEST_FIELD_KEY"
KEY = "field-key-not-secret-0123456789"
ROLES = {"user": "uid", "query": "q", "time": "t", "rank": None, "url": None}
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0"


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


def _config(tmp_path: Path, schema: dict[str, Any]) -> Path:
    path = tmp_path / "querylog.yaml"
    cfg = {"state_dir": "state", "schema": {"field_key_env": KEY_ENV, **schema}}
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def _run(config: Path, records: list[Any], fmt: str, header: str | None = None) -> tuple[list[Any], Pipeline]:
    """The records through a runtime without sinks (Runtime.transform): what comes out, encoded by the codec."""
    pipeline = Pipeline(load_config(config), with_sinks=False)
    codec = pipeline.ctx.codec_for(fmt)
    assert codec is not None
    if header is not None:
        codec.accept_header(header)
    _, events = pipeline.transform(RecordBatch(records, codec, "test", list(range(1, len(records) + 1))))
    return [codec.encode(ev) for ev in events], pipeline


@pytest.fixture
def pipelines() -> Iterator[list[Pipeline]]:
    made: list[Pipeline] = []
    yield made
    for p in made:
        p.close()


def run(tmp_path: Path, pipelines: list[Pipeline], schema: dict[str, Any], records: list[Any], fmt: str = "jsonl",
        header: str | None = None) -> list[Any]:  # fmt: skip
    out, pipeline = _run(_config(tmp_path, {"roles": ROLES, **schema}), records, fmt, header)
    pipelines.append(pipeline)
    return out


def _line(**fields: Any) -> str:
    return json.dumps({"uid": "u1", "q": "cheap flights", "t": "2026-11-27 10:00:00", **fields}, separators=(",", ":"))


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
    line = _line(
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
    first = run(tmp_path, pipelines, schema, [_line(sid="a"), _line(sid="a"), _line(sid="b")])
    sids = [json.loads(x)["sid"] for x in first]
    assert sids[0] == sids[1] != sids[2]
    monkeypatch.setenv(KEY_ENV, "another-key-not-secret-987654321")
    (other,) = run(tmp_path / "..", pipelines, schema, [_line(sid="a")])
    assert json.loads(other)["sid"] != sids[0]


def test_unreadable_values_are_removed_and_empty_ones_kept(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    schema = {"fields": {"ip": "ip_prefix", "ua": "user_agent", "ref": "url"}, "format": "jsonl"}
    lines = [_line(ip="not an address 555-12-3456", ua=7, ref=["x"]), _line(ip="-", ua="", ref=None)]
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
    lines = [_line(uid="192.0.2.1"), _line(uid="not an address"), _line(uid="")]
    out = run(tmp_path, pipelines, schema, lines)
    assert json.loads(out[0])["uid"] == IpEncrypt(KEY.encode()).encrypt("192.0.2.1")
    assert json.loads(out[1])["uid"] is None  # unreadable: removed, never written as it came
    assert out[2] == lines[2]
    assert pipelines[0].stats()["fields"]["uid"] == {"changed": 1, "unreadable_removed": 1}


# ---- unlisted ------------------------------------------------------------------------------------------------
def test_unlisted_drop_removes_what_is_not_declared(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    schema = {"fields": {"page": "keep"}, "unlisted": "drop", "format": "jsonl"}
    (out,) = run(tmp_path, pipelines, schema, [_line(page=1, cookie="c", ip="192.0.2.1")])
    assert json.loads(out) == {"uid": "u1", "q": "cheap flights", "t": "2026-11-27 10:00:00", "page": 1}
    assert pipelines[0].stats()["fields"]["cookie"] == {"unlisted_dropped": 1}


def test_unlisted_error_dead_letters_the_record_only(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    """Fail-closed: a record with an undeclared field is dead-lettered, named by field and counted; the good
    records of its batch go on unchanged."""
    schema = {"fields": {"page": "keep"}, "unlisted": "error", "format": "jsonl"}
    lines = [_line(page=1), _line(page=2, cookie="c"), "not json", _line(page=3)]
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
    run(tmp_path, pipelines, schema, [_line(**{"jane@example.com": 1}), _line(**{"x" * 80: 1})])
    assert pipelines[0].stats()["fields"] == {"_other": {"undeclared": 2}}


# ---- other codecs --------------------------------------------------------------------------------------------
def test_tsv_by_column_name(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    """TSV fields are its columns by name: drop empties the column (TSV keeps its columns)."""
    columns = ["uid", "q", "t", "ip", "ua", "cookie"]
    lines = [f"u1\tflights\t2026-11-27 10:00:00\t192.0.2.33\t{FIREFOX}\tsess-1", "u2\tq2\tt2\t-\t\t"]
    fields = {"ip": "ip_prefix", "ua": "user_agent", "cookie": "drop"}
    out = run(
        tmp_path, pipelines, {"format": "tsv", "header": False, "columns": columns, "fields": fields}, lines, "tsv"
    )
    assert out[0] == "u1\tflights\t2026-11-27 10:00:00\t192.0.2.0\tFirefox 121\t"
    assert out[1] == lines[1]


def test_forward_records(tmp_path: Path) -> None:
    config = _config(tmp_path, {"roles": ROLES, "fields": {"ip": "ip_prefix", "sid": "drop", "n": "keep"}})
    pipeline = Pipeline(load_config(config), with_sinks=False)
    try:
        codec = ForwardCodec(pipeline.config.sidecar.schema)
        entries = [
            Entry("t", 1, {"uid": "u", "q": "x", "ip": "192.0.2.200", "sid": b"bin", "n": 3}),
            Entry("t", 2, {"uid": "u", "q": "y", "n": 4}),
        ]
        _, events = pipeline.transform(RecordBatch(entries, codec, "forward"))
        out = [codec.encode(ev) for ev in events]
    finally:
        pipeline.close()
    assert out[0].record == {"uid": "u", "q": "x", "ip": "192.0.2.0", "n": 3}
    assert out[1] is entries[1]  # unchanged: the very entry


def test_vector_records(tmp_path: Path) -> None:
    """Vector logs: a changed field is rewritten in the log's map (an integer field hashed becomes text); a log
    no policy changed is sent on as its very bytes."""
    config = _config(tmp_path, {"roles": ROLES, "fields": {"ip": "ip_prefix", "n": "hash", "ua": "user_agent"}})
    pipeline = Pipeline(load_config(config), with_sinks=False)
    try:
        codec = VectorCodec(pipeline.config.sidecar.schema)
        wires = []
        for values in ({"uid": b"u", "q": b"x", "ip": b"192.0.2.200", "n": 7}, {"uid": b"u", "q": b"y", "ua": b"-"}):
            wrapper = EventWrapper()
            fields = wrapper.log.value.map.fields
            for key, value in values.items():
                if isinstance(value, int):
                    fields[key].integer = value
                else:
                    fields[key].raw_bytes = value
            wires.append(wrapper.SerializeToString(deterministic=True))
        _, events = pipeline.transform(RecordBatch(wires, codec, "vector"))
        out = [codec.encode(ev) for ev in events]
    finally:
        pipeline.close()
    changed = EventWrapper.FromString(out[0]).log.value.map.fields
    assert changed["ip"].raw_bytes == b"192.0.2.0"
    assert re.fullmatch(rb"[0-9a-f]{16}", changed["n"].raw_bytes)
    assert out[1] == wires[1]


def test_grpc_attributes(tmp_path: Path) -> None:
    """A gRPC QueryEvent's attributes are its fields: policies apply to them, unlisted: drop removes the rest."""
    config = _config(tmp_path, {"fields": {"ip": "ip_encrypt"}, "unlisted": "drop"})
    pipeline = Pipeline(load_config(config), with_sinks=False)
    try:
        codec = ProtoCodec()
        message = QueryEvent(user="u", query="q", attributes={"ip": "192.0.2.1", "cookie": "c"})
        _, events = pipeline.transform(RecordBatch([message], codec, "grpc"))
        (out,) = [codec.encode(ev) for ev in events]
    finally:
        pipeline.close()
    assert dict(out.attributes) == {"ip": IpEncrypt(KEY.encode()).encrypt("192.0.2.1")}


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
    path = _config(tmp_path, {"roles": ROLES, **schema})
    with pytest.raises(ConfigError) as err:
        Pipeline(load_config(path), with_sinks=False, validate_only=True).close()
    assert err.value.key == key and problem in err.value.problem and err.value.line is not None


def test_a_short_key_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "short")
    path = _config(tmp_path, {"roles": ROLES, "fields": {"ip": "ip_encrypt"}})
    with pytest.raises(ConfigError, match="at least 16"):
        Pipeline(load_config(path), with_sinks=False, validate_only=True).close()


def test_check_config_sample_lists_fields_without_a_policy(tmp_path: Path) -> None:
    sample = tmp_path / "sample.jsonl"
    sample.write_text(_line(page=1, cookie="c") + "\n" + _line(page=2, ip="192.0.2.1") + "\n", encoding="utf-8")
    for unlisted, code in (("error", 2), ("drop", 0)):
        path = _config(tmp_path, {"roles": ROLES, "format": "jsonl", "fields": {"page": "keep"}, "unlisted": unlisted})
        result = CliRunner().invoke(check_config, [str(path), "--sample", str(sample)])
        assert result.exit_code == code, result.output
        lines = [ln for ln in result.stderr.splitlines() if "has no policy" in ln]
        assert [re.search(r"field '(\w+)'", ln).group(1) for ln in lines] == ["cookie", "ip"]  # type: ignore[union-attr]
        assert all("1 of 2 records" in ln for ln in lines)


# ---- properties ----------------------------------------------------------------------------------------------
NAMES = st.text(alphabet="abcdefghij_", min_size=1, max_size=6).filter(lambda n: n not in ("uid", "q", "t"))
VALUES = st.one_of(st.text(max_size=12), st.integers(), st.none(), st.booleans())
POLICIES = st.sampled_from(["keep", "drop", "hash", "ip_prefix", "ip_encrypt", "user_agent"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    declared=st.dictionaries(NAMES, POLICIES, max_size=4),
    records=st.lists(st.dictionaries(NAMES, VALUES, max_size=5), min_size=1, max_size=6),
    unlisted=st.sampled_from(["drop", "error"]),
)
def test_released_fields_are_roles_or_declared(
    tmp_path_factory: pytest.TempPathFactory, declared: dict[str, str], records: list[dict[str, Any]], unlisted: str
) -> None:
    """With unlisted drop or error, every field of a released record is a role or has a policy; with error, a
    record is released exactly when all its fields are declared."""
    tmp = tmp_path_factory.mktemp("prop")
    lines = [_line(**r) for r in records]
    out, pipeline = _run(_config(tmp, {"roles": ROLES, "format": "jsonl", "fields": declared, "unlisted": unlisted}),
                         lines, "jsonl")  # fmt: skip
    pipeline.close()
    for line in out:
        assert set(json.loads(line)) <= {"uid", "q", "t", *declared}
    if unlisted == "error":
        assert len(out) == sum(1 for r in records if set(r) <= set(declared))
    else:
        assert len(out) == len(records)


def _common_prefix(a: int, b: int, bits: int) -> int:
    return bits - (a ^ b).bit_length()


@settings(max_examples=200, deadline=None)
@given(a=st.integers(0, 2**32 - 1), b=st.integers(0, 2**32 - 1))
def test_ip_encrypt_preserves_prefixes_exactly(a: int, b: int) -> None:
    enc = IpEncrypt(KEY.encode())
    x, y = (ipaddress.IPv4Address(v) for v in (a, b))
    ex, ey = (int(ipaddress.IPv4Address(enc.address(v))) for v in (x, y))
    assert _common_prefix(ex, ey, 32) == _common_prefix(a, b, 32)


@settings(max_examples=60, deadline=None)
@given(a=st.integers(0, 2**128 - 1), b=st.integers(0, 2**128 - 1))
def test_ip_encrypt_preserves_ipv6_prefixes(a: int, b: int) -> None:
    enc = IpEncrypt(KEY.encode())
    ex, ey = (int(ipaddress.IPv6Address(enc.address(ipaddress.IPv6Address(v)))) for v in (a, b))
    assert _common_prefix(ex, ey, 128) == _common_prefix(a, b, 128)


@settings(max_examples=100, deadline=None)
@given(v4=st.integers(0, 2**32 - 1), v6=st.integers(0, 2**128 - 1))
def test_ip_encrypt_is_yacryptopan(v4: int, v6: int) -> None:
    """The batched Crypto-PAn writes what PyPI yacryptopan (the reference implementation) writes."""
    reference = yacryptopan.CryptoPAn(derive_key(KEY.encode(), "ip_encrypt"))
    enc = IpEncrypt(KEY.encode())
    assert enc.anonymize(v4, 32) == reference.anonymize_bin(v4, 4)
    assert enc.anonymize(v6, 128) == reference.anonymize_bin(v6, 6)


@settings(max_examples=100, deadline=None)
@given(address=st.integers(0, 2**32 - 1))
def test_ip_encrypt_is_keyed(address: int) -> None:
    """Same key, same pseudonym (two instances); another key, another one."""
    text = str(ipaddress.IPv4Address(address))
    one, same = IpEncrypt(KEY.encode()).encrypt(text), IpEncrypt(KEY.encode()).encrypt(text)
    other = IpEncrypt(b"a-different-key-for-the-test-0001").encrypt(text)
    assert one == same and one != other


@given(st.text(max_size=200))
def test_user_agent_writes_only_a_family_and_digits(text: str) -> None:
    assert re.fullmatch(r"[A-Za-z -]+?( \d{1,4})?", generalise(text))
    assert generalise(text) == "Other" or any(c.isalpha() for c in text)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    records=st.lists(
        st.fixed_dictionaries(
            {},
            optional={
                "page": st.integers(),
                "ip": st.sampled_from(["-", "", None]),
                "ua": st.sampled_from(["-", ""]),
                "sid": st.just(None),
            },
        ),
        min_size=1,
        max_size=5,
    ),
    spaces=st.booleans(),
)
def test_records_no_policy_changed_are_written_byte_for_byte(
    tmp_path_factory: pytest.TempPathFactory, records: list[dict[str, Any]], spaces: bool
) -> None:
    """The identity rule: policies that change nothing (keep, empty values, absent fields) leave the line as it
    came, its own spacing included."""
    tmp = tmp_path_factory.mktemp("ident")
    sep = (", ", ": ") if spaces else (",", ":")
    lines = [json.dumps({"uid": "u", "q": "x", "t": "1", **r}, separators=sep) for r in records]
    schema = {
        "roles": ROLES,
        "format": "jsonl",
        "fields": {"page": "keep", "ip": "ip_encrypt", "ua": "user_agent", "sid": "hash", "gone": "drop"},
        "unlisted": "drop",
    }
    out, pipeline = _run(_config(tmp, schema), lines, "jsonl")
    pipeline.close()
    assert out == lines


def test_events_without_codec_pass(tmp_path: Path, pipelines: list[Pipeline]) -> None:
    """An event built without a codec has no fields to account for."""
    pipeline = Pipeline(load_config(_config(tmp_path, {"roles": ROLES, "unlisted": "error"})), with_sinks=False)
    pipelines.append(pipeline)
    codec = pipeline.ctx.codec_for("jsonl")
    assert pipeline.fields is not None and codec is not None
    ev = Event("u", "q")
    assert pipeline.fields.apply([ev], RecordBatch([], codec, "x"), [], Counter()) == [ev]


# ---- serve ---------------------------------------------------------------------------------------------------
def test_serve_dead_letters_undeclared_fields_and_counts_them_by_name(tmp_path: Path) -> None:
    """`serve` (http source, JSON lines) with unlisted: error: the record with an undeclared field is a dead
    letter, the others of the body are delivered with their policies applied; /metrics counts it by field name."""
    cfg = {
        "state_dir": "state",
        "logging": {"level": "info", "format": "json"},
        "metrics_listen": "127.0.0.1:0",
        "schema": {
            "format": "jsonl",
            "roles": ROLES,
            "fields": {"ip": "ip_prefix", "page": "keep"},
            "unlisted": "error",
        },
        "sources": [{"http": {"listen": "127.0.0.1:0"}}],
        "sinks": [{"file": {"path": "out.jsonl", "format": "jsonl"}}],
    }
    path = tmp_path / "querylog.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    proc = subprocess.Popen(
        [QUERYLOG, "serve", "--config", str(path)], stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    log = ServeLog(proc)
    try:
        (port,) = log.ports("http")
        body = lines({"uid": "a", "q": "x", "ip": "192.0.2.9", "page": 1}, {"uid": "b", "q": "y", "cookie": "c"})
        answer = post(port, body)
        assert answer.status == 200
        out = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()]
        assert out == [{"uid": "a", "q": "x", "ip": "192.0.2.0", "page": 1}]
        with urllib.request.urlopen(f"http://127.0.0.1:{log.metrics_port()}/metrics", timeout=10) as resp:
            metrics = resp.read().decode()
        assert 'querylog_field_policy_total{field="cookie",outcome="undeclared"} 1.0' in metrics
        assert 'querylog_field_policy_total{field="ip",outcome="changed"} 1.0' in metrics
        assert 'querylog_dead_letters_total{reason="undeclared_field"} 1.0' in metrics
    finally:
        proc.send_signal(signal.SIGTERM)
        log.text()
    assert proc.returncode == 0
    (entry,) = [json.loads(x) for x in (tmp_path / "state" / "dead-letter.jsonl").read_text().splitlines()]
    assert entry["reason"] == "undeclared_field" and entry["field"] == "cookie"
