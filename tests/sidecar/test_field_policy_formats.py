"""Field policies on every format with field access: TSV by column name, forward entries, Vector logs, gRPC
attributes, and `serve` dead-lettering undeclared fields (JSON lines over the http source)."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import urllib.request
from pathlib import Path

import pytest
import yaml
from helpers import QUERYLOG
from helpers.fields import FIREFOX, KEY, KEY_ENV, ROLES, run_records, write_config
from helpers.httptest import lines, post
from helpers.serving import ServeLog

from adapters.forward.codec import ForwardCodec
from adapters.forward.protocol import Entry
from adapters.grpc.codec import ProtoCodec
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import QueryEvent
from adapters.vector.codec import EventWrapper, VectorCodec
from sidecar.api import RecordBatch
from sidecar.config import load_config
from sidecar.fieldvalues import IpEncrypt
from sidecar.pipeline import Pipeline


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, KEY)


# ---- other codecs --------------------------------------------------------------------------------------------
def test_tsv_by_column_name(tmp_path: Path) -> None:
    """TSV fields are its columns by name: drop empties the column (TSV keeps its columns)."""
    columns = ["uid", "q", "t", "ip", "ua", "cookie"]
    lines = [f"u1\tflights\t2026-11-27 10:00:00\t192.0.2.33\t{FIREFOX}\tsess-1", "u2\tq2\tt2\t-\t\t"]
    fields = {"ip": "ip_prefix", "ua": "user_agent", "cookie": "drop"}
    schema = {"roles": ROLES, "format": "tsv", "header": False, "columns": columns, "fields": fields}
    out, pipeline = run_records(write_config(tmp_path, schema), lines, "tsv")
    pipeline.close()
    assert out[0] == "u1\tflights\t2026-11-27 10:00:00\t192.0.2.0\tFirefox 121\t"
    assert out[1] == lines[1]


def test_forward_records(tmp_path: Path) -> None:
    config = write_config(tmp_path, {"roles": ROLES, "fields": {"ip": "ip_prefix", "sid": "drop", "n": "keep"}})
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
    config = write_config(tmp_path, {"roles": ROLES, "fields": {"ip": "ip_prefix", "n": "hash", "ua": "user_agent"}})
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
    config = write_config(tmp_path, {"fields": {"ip": "ip_encrypt"}, "unlisted": "drop"})
    pipeline = Pipeline(load_config(config), with_sinks=False)
    try:
        codec = ProtoCodec()
        message = QueryEvent(user="u", query="q", attributes={"ip": "192.0.2.1", "cookie": "c"})
        _, events = pipeline.transform(RecordBatch([message], codec, "grpc"))
        (out,) = [codec.encode(ev) for ev in events]
    finally:
        pipeline.close()
    assert dict(out.attributes) == {"ip": IpEncrypt(KEY.encode()).encrypt("192.0.2.1")}


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
