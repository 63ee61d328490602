"""The ``http`` sink against a small local HTTP server: batches, gzip, headers and auth, retries (5xx, 408, 429,
connection refused) until delivered, dead letters for a refused batch, and the outbox across a restart."""

from __future__ import annotations

import base64
import gzip
import json
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import structlog
from helpers import wait_until
from helpers.httptest import Peer, lines

from adapters.http.sink import HttpSink
from sidecar.api import RecordBatch
from sidecar.codecs import SchemaConfig, TsvCodec
from sidecar.config import load_config
from sidecar.netsink import HttpClient, PeerUnavailable
from sidecar.pipeline import Pipeline

RECORDS = [{"AnonID": str(i), "Query": f"query {i}", "QueryTime": "2006-03-01 07:17:12"} for i in range(10)]
FAST = "retry_initial_seconds: 0.02, retry_max_seconds: 0.1"


@pytest.fixture
def pipeline_with(tmp_path: Path) -> Iterator[Callable[..., Pipeline]]:
    """``pipeline_with(sink_options_yaml)``: a JSON-lines pipeline whose only sink is ``http`` with those options."""
    made: list[Pipeline] = []

    def make(options: str, schema: str = "{format: jsonl}") -> Pipeline:
        config = tmp_path / "config.yaml"
        config.write_text(f"state_dir: state\nschema: {schema}\nsinks:\n  - http: {{{options}}}\n", encoding="utf-8")
        pipeline = Pipeline(load_config(config))
        made.append(pipeline)
        return pipeline

    yield make
    for p in made:
        p.close()


def receive(pipeline: Pipeline, records: list[dict[str, Any]]) -> None:
    codec = pipeline.ctx.codec_for("jsonl")
    assert codec is not None
    text = lines(*records).decode().splitlines()
    pipeline.receive(RecordBatch(text, codec, "test"))


def sink_of(pipeline: Pipeline) -> HttpSink:
    sink = pipeline.sinks[0]
    assert isinstance(sink, HttpSink)
    return sink


class TestDelivery:
    def test_batches_are_ndjson_lines_of_the_input(self, peer: Peer, pipeline_with: Any) -> None:
        """Each POST carries at most batch_max_events lines, the input's lines byte for byte, in order."""
        pipeline = pipeline_with(f"url: '{peer.url}', batch_max_events: 4")
        receive(pipeline, RECORDS)
        wait_until(lambda: len(peer.requests) == 3, what="the peer to receive 3 requests")
        assert [len(r.text.splitlines()) for r in peer.requests] == [4, 4, 2]
        assert peer.delivered() == lines(*RECORDS).decode().splitlines()
        first = peer.requests[0]
        assert first.path == "/ingest" and first.headers["content-type"] == "application/x-ndjson"

    def test_batch_max_bytes(self, peer: Peer, pipeline_with: Any) -> None:
        big = [{"AnonID": str(i), "Query": "x" * 600} for i in range(5)]
        pipeline = pipeline_with(f"url: '{peer.url}', batch_max_bytes: 1300")
        receive(pipeline, big)
        wait_until(
            lambda: sum(len(r.text.splitlines()) for r in peer.requests) == 5, what="the peer to receive 5 lines"
        )
        assert all(len(r.body) <= 1300 for r in peer.requests) and len(peer.requests) == 3

    def test_gzip(self, peer: Peer, pipeline_with: Any) -> None:
        pipeline = pipeline_with(f"url: '{peer.url}', compression: gzip")
        receive(pipeline, RECORDS[:3])
        wait_until(lambda: len(peer.requests) == 1, what="the peer to receive a request")
        sent = peer.requests[0]
        assert sent.headers["content-encoding"] == "gzip"
        assert gzip.decompress(sent.body) == lines(*RECORDS[:3])

    def test_tsv_input_goes_out_as_json_objects(self, peer: Peer, tmp_path: Path) -> None:
        """Events from TSV become one JSON object per line with the header's columns."""
        config = tmp_path / "tsv.yaml"
        config.write_text(f"state_dir: state\nsinks:\n  - http: {{url: '{peer.url}'}}\n", encoding="utf-8")
        tsv = TsvCodec(SchemaConfig())
        tsv.accept_header("AnonID\tQuery\tQueryTime\tItemRank\tClickURL")
        pipeline = Pipeline(load_config(config))
        try:
            pipeline.receive(RecordBatch(["7\tq\t2006-03-01 07:17:12\t\t"], tsv, "in.tsv"))
            wait_until(lambda: len(peer.requests) == 1, what="the peer to receive a request")
        finally:
            pipeline.close()
        assert [json.loads(line) for line in peer.delivered()] == [
            {"AnonID": "7", "Query": "q", "QueryTime": "2006-03-01 07:17:12", "ItemRank": "", "ClickURL": ""}
        ]

    def test_headers_and_auth_from_env_and_files(
        self, peer: Peer, pipeline_with: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        monkeypatch.setenv("QUERYLOG_TEST_SINK_TOKEN", "tok-1")
        monkeypatch.setenv("QUERYLOG_TEST_API_KEY", "key-2")
        (tmp_path / "tenant").write_text("tenant-3\n")
        pipeline = pipeline_with(
            f"url: '{peer.url}', bearer_token_env: QUERYLOG_TEST_SINK_TOKEN, headers: {{X-Static: plain}}, "
            f"headers_env: {{X-Api-Key: QUERYLOG_TEST_API_KEY}}, headers_file: {{X-Tenant: {tmp_path / 'tenant'}}}"
        )
        receive(pipeline, RECORDS[:1])
        wait_until(lambda: len(peer.requests) == 1, what="the peer to receive a request")
        h = peer.requests[0].headers
        assert (h["authorization"], h["x-static"], h["x-api-key"], h["x-tenant"]) == (
            "Bearer tok-1",
            "plain",
            "key-2",
            "tenant-3",
        )

    def test_basic_auth(self, peer: Peer, pipeline_with: Any, tmp_path: Path) -> None:
        (tmp_path / "pw").write_text("p@ss\n")
        pipeline = pipeline_with(f"url: '{peer.url}', basic_user: sidecar, basic_password_file: {tmp_path / 'pw'}")
        receive(pipeline, RECORDS[:1])
        wait_until(lambda: len(peer.requests) == 1, what="the peer to receive a request")
        assert peer.requests[0].headers["authorization"] == "Basic " + base64.b64encode(b"sidecar:p@ss").decode()


class TestFailures:
    def test_5xx_and_request_errors_are_retried_until_delivered(self, peer: Peer, pipeline_with: Any) -> None:
        """The same batch is sent again after 500, 503, 408, 429 and 401/403/404 (a wrong token or URL, fixed by
        an operator), then delivered once, nothing dead-lettered."""
        peer.script = [500, 503, 408, 429, 401, 403, 404]
        pipeline = pipeline_with(f"url: '{peer.url}', {FAST}")
        receive(pipeline, RECORDS[:3])
        wait_until(lambda: len(peer.requests) == 8, what="the peer to receive 8 requests")
        assert len({r.body for r in peer.requests}) == 1
        assert peer.delivered() == lines(*RECORDS[:3]).decode().splitlines()
        sink = sink_of(pipeline)
        assert sink.outbox is not None and sink.outbox.drain(5)
        stats = sink.stats()
        assert stats["retries"] == 7 and stats["sent_events"] == 3 and "rejected_by_peer" not in stats

    def test_4xx_dead_letters_the_batch_and_goes_on(self, peer: Peer, pipeline_with: Any, tmp_path: Path) -> None:
        """A 400 refuses the batch for good: its events are dead-lettered (rejected_by_peer, counted), never sent
        again, and the next batch is delivered."""
        peer.script = [400]
        pipeline = pipeline_with(f"url: '{peer.url}', batch_max_events: 2, {FAST}")
        receive(pipeline, RECORDS[:4])
        wait_until(lambda: len(peer.requests) == 2, what="the peer to receive 2 requests")
        sink = sink_of(pipeline)
        assert sink.outbox is not None and sink.outbox.drain(5)
        assert len(peer.requests) == 2 and peer.delivered() == lines(*RECORDS[2:4]).decode().splitlines()
        assert sink.stats()["rejected_by_peer"] == 2
        dead = [json.loads(line) for line in (tmp_path / "state" / "dead-letter.jsonl").read_text().splitlines()]
        assert [(d["reason"], json.loads(d["record"])) for d in dead] == [
            ("rejected_by_peer", RECORDS[0]),
            ("rejected_by_peer", RECORDS[1]),
        ]

    def test_peer_down_then_up_loses_nothing(self, pipeline_with: Any) -> None:
        """Connection refused: batches wait in the outbox (pending), and arrive once the peer listens."""
        down = socket.socket()  # bound, not listening: connections are refused until the peer takes it over
        down.bind(("127.0.0.1", 0))
        port = down.getsockname()[1]
        pipeline = pipeline_with(f"url: 'http://127.0.0.1:{port}/ingest', batch_max_events: 3, {FAST}")
        receive(pipeline, RECORDS)
        sink = sink_of(pipeline)
        assert sink.outbox is not None
        assert sink.outbox.pending().events == 10
        late = Peer()
        late.start(sock=down)
        try:
            assert sink.outbox.drain(10)
            assert late.delivered() == lines(*RECORDS).decode().splitlines()
        finally:
            late.stop()

    def test_undelivered_batches_survive_a_restart(self, peer: Peer, tmp_path: Path) -> None:
        """What the outbox holds when the sidecar stops is sent by the next one (state in the same state_dir)."""
        peer.script = [503] * 1000
        config = tmp_path / "config.yaml"
        config.write_text(
            f"state_dir: state\nschema: {{format: jsonl}}\nsinks:\n  - http: {{url: '{peer.url}', {FAST}, "
            "close_drain_seconds: 0}\n",
            encoding="utf-8",
        )
        first = Pipeline(load_config(config))
        receive(first, RECORDS[:5])
        first.close()
        assert peer.delivered() == []
        peer.script.clear()
        second = Pipeline(load_config(config))
        try:
            sink = sink_of(second)
            assert sink.outbox is not None and sink.outbox.drain(10)
            assert peer.delivered() == lines(*RECORDS[:5]).decode().splitlines()
        finally:
            second.close()

    def test_logs_carry_no_values_or_secrets(self, peer: Peer, pipeline_with: Any, monkeypatch: Any) -> None:
        monkeypatch.setenv("QUERYLOG_TEST_SINK_TOKEN", "tok-abc123")
        peer.script = [500, 401, 400]
        with structlog.testing.capture_logs() as logs:
            pipeline = pipeline_with(f"url: '{peer.url}', bearer_token_env: QUERYLOG_TEST_SINK_TOKEN, {FAST}")
            receive(pipeline, [{"AnonID": "u-4242", "Query": "secret query text"}])
            wait_until(lambda: len(peer.requests) == 3, what="the peer to receive 3 requests")
            sink = sink_of(pipeline)
            assert sink.outbox is not None and sink.outbox.drain(5)
        text = repr(logs)
        assert "http_batch_retried" in text and "http_batch_rejected" in text
        for needle in ("u-4242", "secret query", "tok-abc123"):
            assert needle not in text


def test_client_reports_no_peer_without_details() -> None:
    """Connection refused is PeerUnavailable naming the peer and the error type only."""
    with socket.socket() as down:  # bound, never listening: connections to it are refused
        down.bind(("127.0.0.1", 0))
        port = down.getsockname()[1]
        client = HttpClient(f"http://127.0.0.1:{port}/x?token=abc", timeout=2)
        with pytest.raises(PeerUnavailable) as err:
            client.request("POST", "/x", b"{}")
    assert str(err.value) == f"http://127.0.0.1:{port}: ConnectionRefusedError"
