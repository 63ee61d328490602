"""A held record restores with its own codec, whichever source releases it after a restart (issue 24 item 13)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from sidecar.api import RecordBatch
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

CONFIG = "filters:\n  - category_buffer: {k: 5, time: query}\nsinks:\n  - file: {path: out.jsonl, format: jsonl}\n"
"""No category: every event goes to the ``unknown`` bucket, so the sources' events are re-paired together."""

KEYS = ("id", "AnonID", "request_id", "Query", "QueryTime", "ItemRank", "ClickURL", "note")
"""An HTTP-like record's keys in their own order: roles interleaved with keys that are no role."""


def _http_lines(n: int) -> list[str]:
    """JSON objects as an HTTP source posts them (compact JSON lines), with non-role keys."""
    return [
        json.dumps(
            {
                "id": i,
                "AnonID": f"h{i}",
                "request_id": f"req-{i}",
                "Query": f"held query {i}",
                "QueryTime": f"2006-03-01 10:00:0{i}",
                "ItemRank": None,
                "ClickURL": "",
                "note": {"nested": [i, "x"]},
            },
            separators=(",", ":"),
        )
        for i in range(n)
    ]


def _tsv_lines(n: int) -> list[str]:
    return [f"t{i}\tother query {i}\t2006-03-02 10:00:00\t\t" for i in range(n)]


def _proto_batch(n: int) -> RecordBatch:
    from adapters.grpc.codec import ProtoCodec, QueryEvent

    messages = [QueryEvent(user=f"g{i}", query=f"grpc query {i}", time="2006-03-02 11:00:00") for i in range(n)]
    return RecordBatch(messages, ProtoCodec(), "grpc:Ingest")


@pytest.mark.parametrize("other", ["tsv", "proto"])
def test_held_http_records_keep_every_key_when_another_source_releases_them(
    write_config: Callable[[str], Path], other: str
) -> None:
    """Four HTTP JSON records are held (k=5); the process restarts; a batch from another source (TSV lines or
    gRPC messages) releases them first: each released HTTP record keeps every key, in its order, and every
    value but the user (re-paired), instead of being rebuilt from its roles by the sink's codec."""
    path = write_config(CONFIG)
    first = Pipeline(load_config(path), seed=3)
    codec = first.ctx.codec_for("jsonl")  # what the HTTP source decodes with
    assert codec is not None
    lines = _http_lines(4)
    assert first.receive(RecordBatch(lines, codec, "http")).held == 4
    first.close()

    second = Pipeline(load_config(path), seed=3)
    if other == "tsv":
        tsv = second.ctx.codec_for("tsv")
        assert tsv is not None
        tsv.accept_header("AnonID\tQuery\tQueryTime\tItemRank\tClickURL")
        batch = RecordBatch(_tsv_lines(60), tsv, "file")
    else:
        batch = _proto_batch(60)
    receipt = second.receive(batch)
    second.close()
    assert receipt.delivered

    originals = {json.loads(line)["id"]: json.loads(line) for line in lines}
    out = (path.parent / "out.jsonl").read_text(encoding="utf-8").splitlines()
    restored = [json.loads(line) for line in out if "held query" in line]
    assert restored, "no held HTTP record was released"
    for rec in restored:
        assert tuple(rec) == KEYS, "keys or key order changed"
        orig = originals[rec["id"]]
        assert {k: v for k, v in rec.items() if k != "AnonID"} == {k: v for k, v in orig.items() if k != "AnonID"}
        assert rec["AnonID"] != orig["AnonID"]


@pytest.mark.parametrize("fmt", ["tsv", "jsonl", "proto", "vector", "forward"])
def test_every_source_format_resolves_by_name(fmt: str) -> None:
    """Every format a built-in source gives its records (the HTTP source: ``jsonl``) has a codec by name, so a
    held event of that format can be restored before any source of it ran in the process."""
    from sidecar.codecs import SchemaConfig
    from sidecar.pipeline import codec_lookup

    codec = codec_lookup(SchemaConfig())(fmt)
    assert codec is not None and codec.format == fmt


def test_held_tsv_rows_of_another_column_order_are_never_misplaced(write_config: Callable[[str], Path]) -> None:
    """TSV rows read with a header of their own (another column order, an extra column) are held; after a
    restart a gRPC batch releases them into a TSV file: the runtime's TSV codec (the schema's columns) cannot
    read those rows, so it is not used for them; each is written from its roles in the sink's columns (its
    extra column is not carried: see the README), never dead-lettered and never with a role in another column."""
    from sidecar.codecs import SchemaConfig, TsvCodec

    path = write_config(CONFIG.replace("out.jsonl, format: jsonl", "out.tsv, format: tsv"))
    first = Pipeline(load_config(path), seed=3)
    own = TsvCodec(SchemaConfig(header=True))
    own.accept_header("Query\tSession\tAnonID\tQueryTime\tItemRank\tClickURL")
    rows = [f"held query {i}\ts{i}\th{i}\t2006-03-01 10:00:0{i}\t{i}\thttp://r{i}.com" for i in range(4)]
    assert first.receive(RecordBatch(rows, own, "file")).held == 4
    first.close()

    second = Pipeline(load_config(path), seed=3)
    receipt = second.receive(_proto_batch(60))
    second.close()
    assert receipt.delivered and not receipt.reasons
    out = (path.parent / "out.tsv").read_text(encoding="utf-8").splitlines()
    restored = [line.split("\t") for line in out if "held query" in line]
    assert restored, "no held TSV row was released"
    for cols in restored:  # AnonID Query QueryTime ItemRank ClickURL
        i = int(cols[1].rsplit(" ", 1)[1])
        assert cols[1:] == [f"held query {i}", f"2006-03-01 10:00:0{i}", str(i), f"http://r{i}.com"]
        assert cols[0] != f"h{i}" and not cols[0].startswith("held")
