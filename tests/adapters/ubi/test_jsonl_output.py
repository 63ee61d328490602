"""A ``.jsonl`` output of ``format: ubi`` writes each UBI record in the schema it came in: its own keys
(``user_query``, ``client_id``, ``query_id``, ``timestamp``...), in their order, nesting kept — not its roles under
``schema.roles``' keys with the nested fields flattened. Golden files: the spec fixtures through a passthrough
(byte for byte) and through a keyed chain (QUERYLOG_REGEN_GOLDEN=1 writes them again)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.ubipipe import EVENTS, QUERIES, feed, write_config

from sidecar.config import load_config
from sidecar.pipeline import Pipeline

TESTDATA = Path(__file__).parent / "testdata"
KEY = "k" * 32


def golden(name: str, text: str) -> str:
    """The golden file ``name`` (written from ``text`` when QUERYLOG_REGEN_GOLDEN=1)."""
    path = TESTDATA / name
    if os.environ.get("QUERYLOG_REGEN_GOLDEN") == "1":
        path.write_text(text, encoding="utf-8")
    return path.read_text(encoding="utf-8")


def shape(value: Any) -> Any:
    """A record's keys in order, nested objects' too (values left out)."""
    return [(k, shape(v)) for k, v in value.items()] if isinstance(value, dict) else None


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("UBI_KEY", KEY)
    made: list[Pipeline] = []

    def go(filters: str, schema: str = "") -> str:
        p = Pipeline(load_config(write_config(tmp_path, filters, schema, out="out.jsonl")), seed=1)
        made.append(p)
        feed(p, [*QUERIES, *EVENTS])
        p.close()
        return (tmp_path / "out.jsonl").read_text(encoding="utf-8")

    yield go


def test_passthrough_into_jsonl_is_byte_for_byte(run: Any) -> None:
    text = run("")
    assert text == golden("passthrough.jsonl", text)
    assert sorted(text.splitlines()) == sorted([*QUERIES, *EVENTS[:4]])  # held: EVENTS[4]; dead: EVENTS[5]


def test_a_changed_record_keeps_its_ubi_keys_order_and_nesting(run: Any) -> None:
    scrub = "  fields:\n    event_attributes.object.description: scrub\n"
    text = run("  - hipaa_scrub: {}\n  - pseudonymize: {key_env: UBI_KEY}\n", scrub)
    assert text == golden("pseudonymized.jsonl", text)
    originals = {(r["query_id"], r.get("action_name")): r for r in map(json.loads, [*QUERIES, *EVENTS[:4]])}
    out = [json.loads(line) for line in text.splitlines()]
    assert len(out) == len(originals)
    users = {r["query_id"]: r["client_id"] for r in out if "user_query" in r}
    for record in out:
        before = originals[(record["query_id"], record.get("action_name"))]
        assert shape(record) == shape(before)  # the same keys in the same order, nested objects kept
        assert record["client_id"] != before["client_id"] and record["client_id"] == users[record["query_id"]]
        assert not {"AnonID", "Query", "QueryTime"} & set(record)
    assert "jane.roe@example.com" not in text
