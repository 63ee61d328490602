"""UBI records (``format: ubi``) into S3 (moto's server): each object's lines are the UBI records as the file sink
writes them, with their own keys, order and nesting (the golden outputs of the spec fixtures, a passthrough byte
for byte and a keyed chain), under a ``.jsonl.gz`` key; an s3 sink of ``format: jsonl`` writes the same lines."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from helpers.ubicodec import KEY, KEYED_CHAIN, KEYED_SCHEMA, golden_ubi
from helpers.ubipipe import EVENTS, QUERIES, feed, write_config

from sidecar.config import load_config
from sidecar.pipeline import Pipeline

from .conftest import Moto, add_sink


@pytest.mark.parametrize(("chain", "fmt"), [("passthrough", "auto"), ("keyed", "auto"), ("passthrough", "jsonl")])
def test_objects_hold_the_ubi_records_with_their_own_keys(
    moto: Moto, s3_credentials: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chain: str, fmt: str
) -> None:
    monkeypatch.setenv("UBI_KEY", KEY)
    keyed = chain == "keyed"
    config = write_config(tmp_path, KEYED_CHAIN if keyed else "", KEYED_SCHEMA if keyed else "", out="out.ubi")
    bucket = moto.bucket()
    pipe = Pipeline(load_config(config), seed=1)
    add_sink(pipe, moto.url, bucket, format=fmt)
    try:
        feed(pipe, [*QUERIES, *EVENTS])
    finally:
        pipe.close()  # the final close makes an object of what is staged and uploads it
    ((key, body),) = moto.objects(bucket).items()
    assert key.endswith(".jsonl.gz")
    text = gzip.decompress(body).decode("utf-8")
    assert text == golden_ubi("pseudonymized.jsonl" if keyed else "passthrough.jsonl")
    assert text == (tmp_path / "out.ubi").read_text(encoding="utf-8")  # as the file sink wrote them
    assert '"AnonID"' not in text and '"Query"' not in text
