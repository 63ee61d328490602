"""UBI records (``format: ubi``) over OTLP: an otlp source of ``format: ubi`` reads a log record's body as the UBI
record (a map, as the OpenTelemetry SDK sends a structured log; or a string holding the JSON line, as the
Collector's filelog receiver sends a tailed ``.jsonl``), or its attributes when it has no body
(:mod:`adapters.otlp.objects`), and joins the clicks to their queries. The SDK's exporters (gRPC and HTTP) carry the
spec fixtures, which leave as they came, byte for byte."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest
from helpers.otlp import QUICK, export_request, log_record, otlp_sidecar, sdk_logger
from helpers.ubicodec import KEY, KEYED_CHAIN, KEYED_SCHEMA, golden_ubi
from helpers.ubipipe import EVENTS, QUERIES, dead, feed, write_config
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

from sidecar.config import load_config
from sidecar.pipeline import Pipeline


def sdk_exporter(kind: str, endpoint: str) -> object:
    if kind == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcExporter

        return GrpcExporter(endpoint=endpoint, insecure=True, timeout=10)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpExporter

    return HttpExporter(endpoint=endpoint, timeout=10)


@pytest.mark.parametrize("kind", ["grpc", "http"])
def test_the_sdk_sends_ubi_records_as_map_bodies_that_join_and_leave_as_they_came(kind: str, tmp_path: Path) -> None:
    with otlp_sidecar(write_config(tmp_path, "", out="out.jsonl")) as sc:
        endpoint = sc.grpc_endpoint if kind == "grpc" else sc.http_endpoint
        logger, provider = sdk_logger(sdk_exporter(kind, endpoint))
        for line in [*QUERIES, *EVENTS]:
            logger.info(json.loads(line))  # a dict message: the SDK's body is that map
        provider.force_flush()
        provider.shutdown()
        held = sc.pipeline.joins.held()
    assert (tmp_path / "out.jsonl").read_text(encoding="utf-8") == golden_ubi("passthrough.jsonl")
    assert held == 1 and dead(tmp_path) == ["missing_query_id"]


def post(url: str, data: bytes) -> ExportLogsServiceResponse:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/x-protobuf"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        assert resp.status == 200
        return ExportLogsServiceResponse.FromString(resp.read())


def test_a_json_line_body_or_attributes_carry_a_record_and_other_bodies_are_dead_lettered(tmp_path: Path) -> None:
    """The click as the filelog receiver sends a tailed line (the body a string), its query with no body and the
    record in its attributes; a body of another kind, a string that is no JSON, bytes (no JSON text) are refused in
    partial_success by reason, never delivered."""
    click, query = EVENTS[0], json.loads(QUERIES[0])
    records = [
        log_record(click, {"log.file.name": "ubi_events.jsonl"}),
        log_record(None, query),
        log_record(42, {}),
        log_record("{not json", {}),
        log_record({**json.loads(QUERIES[1]), "blob": b"\x00\x01"}, {}),
        log_record("a plain message", {}),
    ]
    with otlp_sidecar(write_config(tmp_path, "", out="out.jsonl")) as sc:
        reply = post(sc.http_endpoint, export_request([({"service.name": "shop"}, "ubi", records)]).SerializeToString())
    assert reply.partial_success.rejected_log_records == 4
    message = reply.partial_success.error_message
    assert "body_not_object: 2" in message and "invalid_json: 1" in message and "not_json: 1" in message
    out = (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines()
    assert out == [json.dumps(query, separators=(",", ":")), click]  # the query, then its click as it came
    assert sorted(dead(tmp_path)) == ["body_not_object", "body_not_object", "invalid_json", "not_json"]


def test_the_otlp_sink_sends_a_ubi_record_as_a_map_body(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A (``format: ubi``, the keyed chain) -> otlp sink -> B's otlp source (``format: ubi``): the body is the
    record, keys in their order, so B writes the golden output byte for byte (passthrough in B)."""
    monkeypatch.setenv("UBI_KEY", KEY)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with otlp_sidecar(write_config(tmp_path / "b", "", out="out.jsonl")) as b:
        sink = f"  - otlp: {{endpoint: '{b.grpc_endpoint}', protocol: grpc, {QUICK}}}\n"
        config = write_config(tmp_path / "a", KEYED_CHAIN, KEYED_SCHEMA)
        config.write_text(config.read_text(encoding="utf-8").split("sinks:")[0] + "sinks:\n" + sink, encoding="utf-8")
        a = Pipeline(load_config(config), seed=1)
        try:
            feed(a, [*QUERIES, *EVENTS])
            assert a.sinks[0].outbox.drain(15)  # type: ignore[attr-defined]
        finally:
            a.close()
    assert (tmp_path / "b" / "out.jsonl").read_text(encoding="utf-8") == golden_ubi("pseudonymized.jsonl")
