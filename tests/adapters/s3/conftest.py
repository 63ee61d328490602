"""An S3 API for the s3 sink's tests: moto's server (``ThreadedMotoServer``) in this process, bound to port 0.

moto's ``moto_server`` command takes ``-p 0`` but does not report the port it bound; ``ThreadedMotoServer(port=0)``
binds port 0 and ``get_host_and_port()`` reads the bound port back. Its buckets live in this process's moto
backends, so a server stopped and started again on its port (a peer down, then up) still has them.
"""

from __future__ import annotations

import dataclasses
import gzip
import secrets
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from adapters.s3.config import S3SinkConfig
from adapters.s3.sink import S3Sink
from sidecar.api import RecordBatch
from sidecar.codecs import codec_for
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
KEY_ENV, SECRET_ENV = "QUERYLOG_TEST_S3_KEY", "QUERYLOG_TEST_S3_SECRET"


class Moto:
    """A running moto server: its URL, a boto3 client of it, and stop/start on the same port."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._cls = ThreadedMotoServer
        self.server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self.server.start()
        self.host, self.port = self.server.get_host_and_port()
        self.url = f"http://{self.host}:{self.port}"
        self.running = True

    def stop(self) -> None:
        if self.running:
            self.server.stop()
            self.running = False

    def start_again(self) -> None:
        """The server back on its port (the sink's endpoint), with the buckets it had."""
        self.server = self._cls(ip_address="127.0.0.1", port=self.port, verbose=False)
        self.server.start()
        self.running = True

    def client(self) -> Any:
        import boto3

        return boto3.client(
            "s3", endpoint_url=self.url, region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s"
        )

    def bucket(self) -> str:
        name = "querylog-" + secrets.token_hex(6)
        self.client().create_bucket(Bucket=name)
        return name

    def count(self, bucket: str) -> int:
        """How many objects the bucket holds (up to 1,000)."""
        return int(self.client().list_objects_v2(Bucket=bucket).get("KeyCount", 0))

    def objects(self, bucket: str, prefix: str = "") -> dict[str, bytes]:
        """Every object under ``prefix``: key -> body (as stored: gzip)."""
        client = self.client()
        out: dict[str, bytes] = {}
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for item in page.get("Contents", []):
                out[item["Key"]] = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
        return out


class MotoTls:
    """moto's S3 app served over TLS (``https://127.0.0.1:<port 0>``) with a certificate of ``make_pki``'s CA."""

    def __init__(self, cert: Path, key: Path) -> None:
        import ssl

        from moto.moto_server.werkzeug_app import DomainDispatcherApplication, MotoRequestHandler, create_backend_app
        from werkzeug.serving import make_server

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(cert), str(key))
        app = DomainDispatcherApplication(create_backend_app)
        self.server = make_server(
            "127.0.0.1", 0, app, threaded=True, request_handler=MotoRequestHandler, ssl_context=context
        )
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, name="moto-tls", daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join()


@pytest.fixture
def moto() -> Iterator[Moto]:
    server = Moto()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """Credentials from environment variables named in the sink's options (moto takes any)."""
    monkeypatch.setenv(KEY_ENV, "test-key-id")
    monkeypatch.setenv(SECRET_ENV, "test-secret")


def pipeline(folder: Path, fmt: str = "tsv") -> Pipeline:
    """A runtime with a file sink (``out.<fmt>``), to compare the objects with."""
    folder.mkdir(parents=True, exist_ok=True)
    body = {"state_dir": "state", "schema": {"format": fmt}, "filters": [], "sinks": [{"file": {"path": f"out.{fmt}"}}]}
    path = folder / "sidecar.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    return Pipeline(load_config(path), seed=None)


def add_sink(pipe: Pipeline, url: str, bucket: str, clock: Callable[[], float] | None = None, **options: Any) -> S3Sink:
    """An s3 sink built with the runtime's context (and ``clock``), delivered to with the file sink."""
    options = {
        "prefix": "logs/%Y/%m/%d/",
        "access_key_id_env": KEY_ENV,
        "secret_access_key_env": SECRET_ENV,
        "retry_initial_seconds": 0.05,
        "retry_max_seconds": 0.2,
        **options,
    }
    ctx = pipe.ctx if clock is None else dataclasses.replace(pipe.ctx, clock=clock)
    sink = S3Sink(S3SinkConfig(bucket=bucket, endpoint_url=url, **options), ctx)
    pipe.sinks.append(sink)
    return sink


def rows(n: int, start: int = 0) -> list[str]:
    """TSV records with values found nowhere else (a query per record, a click on every third)."""
    out = []
    for i in range(start, start + n):
        url = "http://www.example.org/s3" if i % 3 == 0 else ""
        rank = "1" if url else ""
        out.append(f"{9100 + i % 7}\ts3 archive test query {i}\t2006-03-01 07:{i % 60:02d}:12\t{rank}\t{url}")
    return out


def receive(pipe: Pipeline, lines: list[str]) -> None:
    codec = codec_for(replace(pipe.config.sidecar.schema, format="tsv"), None)
    codec.accept_header(HEADER)
    receipt = pipe.receive(RecordBatch(lines, codec, "test", last_eol="\n"))
    assert receipt.accepted == len(lines)


def records_of(objects: dict[str, bytes]) -> list[str]:
    """The records of the objects, in key order, without each object's header."""
    out: list[str] = []
    for key in sorted(objects):
        text = gzip.decompress(objects[key]).decode("utf-8")
        assert text.startswith(HEADER + "\n") and text.endswith("\n")
        out += text.split("\n")[1:-1]
    return out
