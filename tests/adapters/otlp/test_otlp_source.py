"""The ``otlp`` source driven by the real OpenTelemetry SDK (LoggerProvider + BatchLogRecordProcessor +
OTLPLogExporter, gRPC and HTTP) and by raw requests: every record arrives with its attributes, resource and scope;
the default chain scrubs the query; bad records are counted in ``partial_success`` (reasons, never values); garbage,
oversized requests and records, a missing token, TLS, and a full outbox answered with a status the exporters retry."""

from __future__ import annotations

import gzip
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import grpc
import pytest
import yaml
from helpers import ROOT, TEST_KEY, TEST_KEY_ENV
from helpers.certs import make_pki
from helpers.kb import kb_file
from helpers.otlp import export_request, log_record, otlp_sidecar, out_lines, sdk_logger, write_config
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

from adapters.otlp.throttle import retry_delay

METHOD = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"


def records_of(path: Path) -> list[dict[str, Any]]:
    """The log records of an OTLP/JSON file (one export request of one record per line), each with its resource
    attributes (``_resource``) and scope name (``_scope``)."""
    out = []
    for line in out_lines(path):
        (rl,) = line["resourceLogs"]
        (sl,) = rl["scopeLogs"]
        (lr,) = sl["logRecords"]
        lr["_resource"] = {a["key"]: a["value"] for a in rl.get("resource", {}).get("attributes", [])}
        lr["_scope"] = sl.get("scope", {}).get("name")
        out.append(lr)
    return out


def attrs(record: dict[str, Any]) -> dict[str, Any]:
    return {a["key"]: next(iter(a["value"].values())) for a in record.get("attributes", [])}


def grpc_export(endpoint: str, data: bytes, **kw: Any) -> ExportLogsServiceResponse:
    with grpc.insecure_channel(endpoint) as chan:
        export: Any = chan.unary_unary(METHOD)  # bytes in, bytes out
        reply: bytes = export(data, timeout=10, **kw)
    return ExportLogsServiceResponse.FromString(reply)


def http_post(
    url: str, data: bytes, content_type: str, headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    request = urllib.request.Request(url, data=data, headers={"Content-Type": content_type, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def sdk_exporter(kind: str, endpoint: str, **kw: Any) -> Any:
    if kind == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcExporter

        return GrpcExporter(endpoint=endpoint, insecure="credentials" not in kw, timeout=10, **kw)
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpExporter

    return HttpExporter(endpoint=endpoint, timeout=10, **kw)


@pytest.mark.parametrize("kind", ["grpc", "http"])
def test_the_sdk_exporters_deliver_every_record_with_its_attributes_resource_and_scope(
    kind: str, tmp_path: Path
) -> None:
    with otlp_sidecar(write_config(tmp_path)) as sc:
        endpoint = sc.grpc_endpoint if kind == "grpc" else sc.http_endpoint
        logger, provider = sdk_logger(sdk_exporter(kind, endpoint))
        for i in range(300):
            logger.warning("cheap flights to city %d", i, extra={"user_id": f"u{i % 7}", "page": i, "lang": "en"})
        provider.force_flush()
        provider.shutdown()
        counts = sc.source.stats()
    got = records_of(tmp_path / "out.jsonl")
    assert [r["body"]["stringValue"] for r in got] == [f"cheap flights to city {i}" for i in range(300)]
    for i, r in enumerate(got):
        a = attrs(r)
        assert (a["user_id"], a["page"], a["lang"]) == (f"u{i % 7}", str(i), "en")  # int64 as a JSON string
        assert list(a)[:3] == ["user_id", "page", "lang"]  # the SDK's order, kept
        assert r["severityText"] == "WARN" and r["severityNumber"] == 13 and int(r["timeUnixNano"]) > 0
        assert r["_resource"]["service.name"] == {"stringValue": "search-frontend"}
        assert r["_scope"].startswith("otlp-test-")
    assert counts["records_accepted"] == 300 and counts.get("records_rejected", 0) == 0


def default_chain() -> str:
    """config/default.yaml's filters (classify on the session's KB, the test key), as a YAML list body."""
    filters: list[Any] = yaml.safe_load((ROOT / "config" / "default.yaml").read_text(encoding="utf-8"))["filters"]
    for f in filters:
        if "classify" in f:
            f["classify"] = {**(f["classify"] or {}), "kb_path": str(kb_file()), "rebuild": False}
        if "pseudonymize" in f:
            f["pseudonymize"]["key_env"] = TEST_KEY_ENV
    return "".join("  " + line + "\n" for line in yaml.safe_dump(filters, sort_keys=False).splitlines())


def test_through_the_default_chain_the_query_is_scrubbed_and_the_user_pseudonymized(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    with otlp_sidecar(write_config(tmp_path, filters=default_chain())) as sc:
        logger, provider = sdk_logger(sdk_exporter("grpc", sc.grpc_endpoint))
        logger.info("call john.doe@example.com about cheap flights", extra={"user_id": "alice", "page": 1})
        logger.info("ssn 212-48-3391 tax form", extra={"user_id": "bob", "page": 2})
        provider.force_flush()
        provider.shutdown()
    text = (tmp_path / "out.jsonl").read_text(encoding="utf-8")
    for secret in ("john.doe@example.com", "212-48-3391", "alice", "bob"):
        assert secret not in text
    got = records_of(tmp_path / "out.jsonl")
    assert len(got) == 2 and "cheap flights" in got[0]["body"]["stringValue"]
    assert [attrs(r)["page"] for r in got] == ["1", "2"]  # the other attributes untouched


def bad_batch() -> bytes:
    good = [log_record(f"query {i}", {"user_id": f"u{i}"}) for i in range(3)]
    bad = [log_record(None, {"user_id": "secret-user"}), log_record("secret query", {})]
    return export_request(
        [({"service.name": "s"}, "scope", [good[0], bad[0], good[1], bad[1], good[2]])]
    ).SerializeToString()


def test_bad_records_are_counted_in_partial_success_and_the_good_ones_delivered(tmp_path: Path) -> None:
    with otlp_sidecar(write_config(tmp_path)) as sc:
        grpc_reply = grpc_export(sc.grpc_endpoint, bad_batch())
        status, _, body = http_post(sc.http_endpoint, bad_batch(), "application/x-protobuf")
        http_reply = ExportLogsServiceResponse.FromString(body)
    for reply in (grpc_reply, http_reply):
        assert reply.partial_success.rejected_log_records == 2
        message = reply.partial_success.error_message
        assert "missing_query: 1" in message and "missing_user: 1" in message
        assert "secret" not in message
    assert status == 200
    assert [r["body"]["stringValue"] for r in records_of(tmp_path / "out.jsonl")] == [
        "query 0",
        "query 1",
        "query 2",
    ] * 2
    dead = (tmp_path / "state" / "dead-letter.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(dead) == 4


def test_otlp_json_with_hex_ids_and_gzip(tmp_path: Path) -> None:
    body = {
        "resourceLogs": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "web"}}]},
                "scopeLogs": [
                    {
                        "scope": {"name": "s"},
                        "logRecords": [
                            {
                                "timeUnixNano": "1700000000000000000",
                                "severityNumber": 9,
                                "traceId": "5b8efff798038103d269b633813fc60c",
                                "spanId": "eee19b7ec3c1b174",
                                "body": {"stringValue": "weather"},
                                "attributes": [{"key": "user_id", "value": {"stringValue": "u1"}}],
                            },
                            {"body": {"intValue": "5"}, "attributes": [{"key": "user_id", "value": {"intValue": 3}}]},
                        ],
                    }
                ],
            }
        ]
    }
    with otlp_sidecar(write_config(tmp_path)) as sc:
        status, headers, reply = http_post(
            sc.http_endpoint, gzip.compress(json.dumps(body).encode()), "application/json", {"Content-Encoding": "gzip"}
        )
        garbage = http_post(sc.http_endpoint, b'{"resourceLogs": [{"scopeLogs": "x"}]}', "application/json")
    assert status == 200 and headers["Content-Type"].startswith("application/json")
    assert json.loads(reply)["partialSuccess"]["rejectedLogRecords"] == "1"
    (record,) = records_of(tmp_path / "out.jsonl")
    assert record["traceId"] == "5b8efff798038103d269b633813fc60c" and record["spanId"] == "eee19b7ec3c1b174"
    assert record["timeUnixNano"] == "1700000000000000000"
    assert garbage[0] == 400


def test_garbage_is_refused_dead_lettered_and_the_server_goes_on(tmp_path: Path) -> None:
    with otlp_sidecar(write_config(tmp_path)) as sc:
        with pytest.raises(grpc.RpcError) as err:
            grpc_export(sc.grpc_endpoint, b"\x0a\xff\xff\xff\x0fgarbage")
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert http_post(sc.http_endpoint, b"\x0a\x05\x0a", "application/x-protobuf")[0] == 400
        assert http_post(sc.http_endpoint, b"x", "text/plain")[0] == 415
        assert http_post(sc.http_endpoint.replace("/v1/logs", "/v1/traces"), b"", "application/x-protobuf")[0] == 404
        assert grpc_export(sc.grpc_endpoint, bad_batch()).partial_success.rejected_log_records == 2
        stats = sc.source.stats()
    assert stats["requests_refused_invalid_request"] == 2 and stats["requests_refused_unsupported_media_type"] == 1
    reasons = [json.loads(x)["reason"] for x in (tmp_path / "state" / "dead-letter.jsonl").read_text().splitlines()]
    assert reasons.count("invalid_request") == 2


def test_limits_bound_a_request_and_a_record(tmp_path: Path) -> None:
    """A huge attribute makes its record rejected (record_too_large, not kept); a request over max_message_bytes
    or with more than max_records_per_request records is refused whole, before any record is taken."""
    config = write_config(tmp_path)
    config.write_text(config.read_text() + "limits: {max_record_bytes: 2048}\n")
    huge = log_record("q", {"user_id": "u", "blob": "x" * 10_000})
    request = export_request([({}, "s", [log_record("ok", {"user_id": "u"}), huge])]).SerializeToString()
    many = export_request([({}, "s", [log_record("q", {"user_id": "u"})] * 11)]).SerializeToString()
    big = export_request([({}, "s", [log_record("q" * 1500, {"user_id": "u"})] * 20)]).SerializeToString()
    with otlp_sidecar(config, max_records_per_request=10, max_message_bytes=16_384) as sc:
        reply = grpc_export(sc.grpc_endpoint, request)
        assert reply.partial_success.rejected_log_records == 1
        assert "record_too_large: 1" in reply.partial_success.error_message
        for data, code, status in (
            (many, grpc.StatusCode.INVALID_ARGUMENT, 400),
            (big, grpc.StatusCode.RESOURCE_EXHAUSTED, 413),
        ):
            with pytest.raises(grpc.RpcError) as err:
                grpc_export(sc.grpc_endpoint, data)
            assert err.value.code() == code
            assert http_post(sc.http_endpoint, data, "application/x-protobuf")[0] == status
        bomb = gzip.compress(b"\x00" * 1_000_000)
        assert http_post(sc.http_endpoint, bomb, "application/x-protobuf", {"Content-Encoding": "gzip"})[0] == 413
    assert [r["body"]["stringValue"] for r in records_of(tmp_path / "out.jsonl")] == ["ok"]


def test_a_bearer_token_is_required_on_both_protocols(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTLP_TEST_TOKEN", "s3cret-token")
    with otlp_sidecar(write_config(tmp_path), auth_token_env="OTLP_TEST_TOKEN") as sc:
        assert sc.source.authentication() == ["token"]
        with pytest.raises(grpc.RpcError) as err:
            grpc_export(sc.grpc_endpoint, bad_batch())
        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
        assert http_post(sc.http_endpoint, bad_batch(), "application/x-protobuf")[0] == 401
        wrong = {"Authorization": "Bearer nope"}
        assert http_post(sc.http_endpoint, bad_batch(), "application/x-protobuf", wrong)[0] == 401
        auth = {"authorization": "Bearer s3cret-token"}
        for kind, endpoint in (("grpc", sc.grpc_endpoint), ("http", sc.http_endpoint)):
            exporter = sdk_exporter(kind, endpoint, headers=auth)
            logger, provider = sdk_logger(exporter)
            logger.info("with token", extra={"user_id": "u"})
            provider.force_flush()
            provider.shutdown()
    assert len(records_of(tmp_path / "out.jsonl")) == 2


def test_tls_on_both_protocols_with_the_sdk_exporters(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):  # requests lets these override the exporter's CA file
        monkeypatch.delenv(name, raising=False)
    pki = make_pki(tmp_path / "pki")
    with otlp_sidecar(
        write_config(tmp_path), tls_cert_file=str(pki.server.cert), tls_key_file=str(pki.server.key)
    ) as sc:
        creds = grpc.ssl_channel_credentials(root_certificates=pki.ca.read_bytes())
        for exporter in (
            sdk_exporter("grpc", sc.grpc_endpoint, credentials=creds),
            sdk_exporter("http", sc.http_endpoint.replace("http:", "https:"), certificate_file=str(pki.ca)),
        ):
            logger, provider = sdk_logger(exporter)
            logger.info("over tls", extra={"user_id": "u"})
            provider.force_flush()
            provider.shutdown()
        with pytest.raises(OSError):  # plaintext: no answer
            http_post(sc.http_endpoint, bad_batch(), "application/x-protobuf")
    assert len(records_of(tmp_path / "out.jsonl")) == 2


def test_a_full_outbox_answers_resource_exhausted_and_503_with_retry_after(tmp_path: Path) -> None:
    """A sink whose peer is down fills its outbox (one batch at most): then nothing more is taken, with the status
    the exporters retry (gRPC RESOURCE_EXHAUSTED, HTTP 503 + Retry-After)."""
    sinks = (
        "  - file: {path: out.jsonl}\n"
        "  - otlp: {endpoint: 'http://127.0.0.1:9/v1/logs', outbox_max_batches: 1, close_drain_seconds: 0,"
        " retry_initial_seconds: 30, retry_max_seconds: 30, timeout_seconds: 1}\n"
    )
    with otlp_sidecar(write_config(tmp_path, sinks=sinks)) as sc:
        first = grpc_export(sc.grpc_endpoint, bad_batch())
        assert first.partial_success.rejected_log_records == 2
        with pytest.raises(grpc.RpcError) as err:
            grpc_export(sc.grpc_endpoint, bad_batch())
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert retry_delay(err.value.trailing_metadata()) == 2.0  # OTLP's throttling: RetryInfo in the details
        status, headers, _ = http_post(sc.http_endpoint, bad_batch(), "application/x-protobuf")
        assert status == 503 and headers["Retry-After"] == "2"
    assert len(records_of(tmp_path / "out.jsonl")) == 3  # the first request only


def test_mutual_tls_takes_a_client_certificate_of_the_ca_only(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    options = {
        "tls_cert_file": str(pki.server.cert),
        "tls_key_file": str(pki.server.key),
        "tls_client_ca_file": str(pki.ca),
    }
    with otlp_sidecar(write_config(tmp_path), **options) as sc:
        assert sc.source.authentication() == ["mtls"]
        ca = pki.ca.read_bytes()
        for pair, ok in ((pki.client, True), (pki.stranger, False), (None, False)):
            cert = (pair.key.read_bytes(), pair.cert.read_bytes()) if pair is not None else (None, None)
            creds = grpc.ssl_channel_credentials(ca, private_key=cert[0], certificate_chain=cert[1])
            with grpc.secure_channel(sc.grpc_endpoint, creds) as chan:
                export: Any = chan.unary_unary(METHOD)
                if ok:
                    ExportLogsServiceResponse.FromString(export(bad_batch(), timeout=10))
                else:
                    with pytest.raises(grpc.RpcError):
                        export(bad_batch(), timeout=10)
    assert len(records_of(tmp_path / "out.jsonl")) == 3


def test_a_body_nested_past_protobufs_depth_limit_is_rejected_and_the_others_go_on(tmp_path: Path) -> None:
    """Arrays nested 300 deep (a few KiB): the record is rejected as invalid_log_record, never a crash or a hang;
    OTLP/JSON nested 100,000 deep is a 400."""
    from adapters.otlp.wire import Piece, frame, varint

    inner = b"\x0a\x01x"  # AnyValue{string_value: "x"}
    for _ in range(300):
        array = b"\x0a" + varint(len(inner)) + inner  # ArrayValue{values: [inner]}
        inner = b"\x2a" + varint(len(array)) + array  # AnyValue{array_value: ...}
    user = log_record(None, {"user_id": "u"}).SerializeToString()
    deep = b"\x2a" + varint(len(inner)) + inner + user  # LogRecord{body: ..., attributes: [user_id]}
    good = log_record("fine", {"user_id": "u"}).SerializeToString()
    request = frame([Piece(b"", b"", deep), Piece(b"", b"", good)])
    deep_json = b'{"resourceLogs": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with otlp_sidecar(write_config(tmp_path)) as sc:
        reply = grpc_export(sc.grpc_endpoint, request)
        assert http_post(sc.http_endpoint, deep_json, "application/json")[0] == 400
    assert reply.partial_success.rejected_log_records == 1
    assert "invalid_log_record: 1" in reply.partial_success.error_message
    assert [r["body"]["stringValue"] for r in records_of(tmp_path / "out.jsonl")] == ["fine"]
