"""The s3 sink against moto's S3 server: objects are gzip'd copies of what a file sink writes, closed by size or age,
never overwritten, uploaded at least once through the outbox (a peer down then up, a restart), multipart when large."""

from __future__ import annotations

import gzip
import re
import secrets
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until

from adapters.s3.config import S3SinkConfig
from adapters.s3.sink import S3Sink
from sidecar.api import ConfigValueError, RecordBatch

from .conftest import HEADER, Moto, add_sink, pipeline, receive, records_of, rows

#: 2024-02-29 13:14:15 UTC: the placeholders of ``logs/%Y/%m/%d/`` and the key's time come from it
FIXED = 1709212455.0
KEY = re.compile(r"logs/2024/02/29/20240229T131415Z-[0-9a-f]{16}-\d{6}\.tsv\.gz")


def no_sink_threads() -> bool:
    return not [t for t in threading.enumerate() if t.name.startswith(("querylog-s3-", "querylog-outbox-s3"))]


def test_an_object_is_the_file_sinks_output_gzipped_under_the_dated_prefix(
    moto: Moto, s3_credentials: None, tmp_path: Path
) -> None:
    bucket = moto.bucket()
    pipe = pipeline(tmp_path)
    sink = add_sink(pipe, moto.url, bucket, clock=lambda: FIXED)
    try:
        for part in range(3):
            receive(pipe, rows(40, part * 40))
        assert sink.stats()["pending_events"] == 120  # staged: durable, not yet an object
        assert moto.objects(bucket) == {}
    finally:
        pipe.close()  # the final close makes an object of what is staged and uploads it
    objects = moto.objects(bucket)
    (key,) = objects
    assert KEY.fullmatch(key), key
    assert gzip.decompress(objects[key]) == (tmp_path / "out.tsv").read_bytes()  # byte for byte
    head = moto.client().head_object(Bucket=bucket, Key=key)
    assert head["ContentType"] == "application/gzip" and head["Metadata"] == {"querylog-events": "120"}
    wait_until(no_sink_threads, what="the sink's threads to end")


def test_jsonl_records_leave_as_the_file_sink_writes_them(moto: Moto, s3_credentials: None, tmp_path: Path) -> None:
    bucket = moto.bucket()
    pipe = pipeline(tmp_path, fmt="jsonl")
    add_sink(pipe, moto.url, bucket)
    lines = [f'{{"AnonID": "{i}", "Query": "s3 json query {i}", "extra": [1, {{"k": "v"}}]}}' for i in range(30)]
    try:
        codec = pipe.ctx.codec_for("jsonl")
        assert codec is not None
        assert pipe.receive(RecordBatch(lines, codec, "test", last_eol="\n")).accepted == 30
    finally:
        pipe.close()
    (body,) = moto.objects(bucket).values()
    assert gzip.decompress(body) == (tmp_path / "out.jsonl").read_bytes() == ("\n".join(lines) + "\n").encode()


def test_objects_close_by_size_in_order_and_never_share_a_name(
    moto: Moto, s3_credentials: None, tmp_path: Path
) -> None:
    bucket = moto.bucket()
    pipe = pipeline(tmp_path)
    sink = add_sink(pipe, moto.url, bucket, clock=lambda: FIXED, max_object_bytes=2048)
    lines = rows(400)
    try:
        for start in range(0, 400, 20):
            receive(pipe, lines[start : start + 20])
        wait_until(lambda: len(moto.objects(bucket)) >= 5, what="objects closed by size while records come")
    finally:
        pipe.close()
    objects = moto.objects(bucket)
    assert all(KEY.fullmatch(k) for k in objects)  # the same second for all: the sequence tells them apart
    assert records_of(objects) == lines  # every record once, in order
    sizes = [len(gzip.decompress(objects[k])) - len(HEADER) - 1 for k in sorted(objects)]
    assert all(s >= 2048 for s in sizes[:-1]) and all(s < 2048 + 20 * 80 for s in sizes)
    assert sink.stats()["objects_uploaded"] == len(objects)
    # a second run in the same second: new names (another run id), the first run's objects untouched
    again = pipeline(tmp_path / "again")
    add_sink(again, moto.url, bucket, clock=lambda: FIXED)
    try:
        receive(again, rows(5, 1000))
    finally:
        again.close()
    after = moto.objects(bucket)
    assert len(after) == len(objects) + 1 and all(after[k] == v for k, v in objects.items())


def test_an_object_closes_by_age_when_no_more_records_come(moto: Moto, s3_credentials: None, tmp_path: Path) -> None:
    bucket = moto.bucket()
    pipe = pipeline(tmp_path)
    add_sink(pipe, moto.url, bucket, max_object_seconds=0.3)
    try:
        receive(pipe, rows(10))
        wait_until(lambda: len(moto.objects(bucket)) == 1, what="the object closed by its age", timeout=20)
        assert records_of(moto.objects(bucket)) == rows(10)
    finally:
        pipe.close()
    assert len(moto.objects(bucket)) == 1


def test_a_retried_upload_writes_the_same_key_once(moto: Moto, s3_credentials: None, tmp_path: Path) -> None:
    bucket = moto.bucket()
    pipe = pipeline(tmp_path)
    sink = add_sink(pipe, moto.url, bucket)
    assert sink.outbox is not None
    put, payloads = sink.outbox.put, []

    def keep(payload: bytes, events: int) -> int:
        payloads.append(payload)
        return put(payload, events)

    sink.outbox.put = keep  # type: ignore[method-assign]
    try:
        receive(pipe, rows(10))
        sink.close()  # closes the object and uploads it
        (payload,) = payloads
        before = moto.objects(bucket)
        sink.uploader = sink.uploader or _uploader(sink)
        sink.send(payload)  # the outbox sending it again (an answer lost on the way back)
        assert moto.objects(bucket) == before and len(before) == 1
    finally:
        pipe.close()


def _uploader(sink: S3Sink) -> Any:
    from adapters.s3.upload import Uploader

    return Uploader(sink.config, sink.ctx)


def test_a_large_object_goes_up_in_parts(moto: Moto, s3_credentials: None, tmp_path: Path) -> None:
    bucket = moto.bucket()
    pipe = pipeline(tmp_path)
    mib = 1024 * 1024
    parts = {"multipart_threshold_bytes": 5 * mib, "multipart_chunk_bytes": 5 * mib}
    add_sink(pipe, moto.url, bucket, max_object_bytes=64 * mib, **parts)
    # about 12 MiB of records whose queries do not compress (hex of random bytes): about 6 MiB of gzip
    lines = [f"{i % 50}\t{secrets.token_hex(60)}\t2006-03-01 07:00:00\t\t" for i in range(80_000)]
    try:
        for start in range(0, len(lines), 10_000):
            receive(pipe, lines[start : start + 10_000])
    finally:
        pipe.close()
    objects = moto.objects(bucket)
    (key,) = objects
    assert len(objects[key]) > 5 * mib
    etag = moto.client().head_object(Bucket=bucket, Key=key)["ETag"]
    assert re.fullmatch(r'"[0-9a-f]{32}-2"', etag), etag  # a multipart upload of two parts
    assert gzip.decompress(objects[key]) == (tmp_path / "out.tsv").read_bytes()


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"bucket": "No_Such"}, "bucket"),
        ({"bucket": "ok-bucket", "prefix": "/logs"}, "prefix"),
        ({"bucket": "ok-bucket", "prefix": "a\nb"}, "prefix"),
        ({"bucket": "ok-bucket", "access_key_id_env": "K"}, "secret_access_key_env"),
        ({"bucket": "ok-bucket", "access_key_id_env": "K", "access_key_id_file": "f"}, "access_key_id_file"),
        (
            {"bucket": "ok-bucket", "secret_access_key_env": "not a name", "access_key_id_env": "K"},
            "secret_access_key_env",
        ),
        ({"bucket": "ok-bucket", "session_token_env": "T"}, "session_token_env"),
        ({"bucket": "ok-bucket", "endpoint_url": "localhost:9000"}, "endpoint_url"),
        ({"bucket": "ok-bucket", "outbox_name": "a-b"}, "outbox_name"),
    ],
)
def test_bad_options_are_located(options: dict[str, Any], key: str) -> None:
    with pytest.raises(ConfigValueError) as err:
        S3SinkConfig(**options)
    assert err.value.key == key
    assert "not a name" not in err.value.problem


def test_a_credential_variable_that_is_not_set_is_reported_at_its_key(tmp_path: Path) -> None:
    pipe = pipeline(tmp_path)
    try:
        config = S3SinkConfig(bucket="ok-bucket", access_key_id_env="QUERYLOG_UNSET_X", secret_access_key_env="Y")
        with pytest.raises(ConfigValueError) as err:
            S3Sink(config, pipe.ctx)
        assert err.value.key == "access_key_id_env"
    finally:
        pipe.close()


def test_without_boto3_the_error_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "boto3", None)  # import boto3 -> ImportError
    pipe = pipeline(tmp_path)
    try:
        with pytest.raises(ConfigValueError) as err:
            S3Sink(S3SinkConfig(bucket="ok-bucket"), pipe.ctx)
        assert err.value.problem == "the s3 sink needs boto3, in the [s3] extra: pip install 'querylog-sidecar[s3]'"
    finally:
        pipe.close()


def test_real_queries_archived_byte_for_byte(moto: Moto, s3_credentials: None, tmp_path: Path) -> None:
    """Independent data: the 39,092 lines of the real AOL excerpt (../shared/data) through a file sink and an s3
    sink cutting 256 KiB objects: the objects' records, in key order, are the file sink's lines byte for byte."""
    from helpers import SHARED_DATA

    sample = SHARED_DATA / "aol-sample.tsv"
    if not sample.is_file():
        pytest.skip("no ../shared/data/aol-sample.tsv")
    header, *lines = sample.read_text(encoding="utf-8").splitlines()
    assert header == HEADER
    bucket = moto.bucket()
    pipe = pipeline(tmp_path)
    add_sink(pipe, moto.url, bucket, max_object_bytes=256 * 1024)
    try:
        for start in range(0, len(lines), 2000):
            receive(pipe, lines[start : start + 2000])
    finally:
        pipe.close()
    objects = moto.objects(bucket)
    written = (tmp_path / "out.tsv").read_text(encoding="utf-8").split("\n")
    assert len(objects) > 5
    assert records_of(objects) == written[1:-1] and len(written) - 2 == len(lines)
