"""The ``otlp`` codec and wire framing: requests split into records and framed back, roles read and written in
place, an unchanged record re-encoded byte for byte (golden files made by the OpenTelemetry SDK's own encoder),
bad records by reason, the state store round trip, OTLP/JSON lines."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from google.protobuf import json_format
from helpers.otlp import export_request, log_record
from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from adapters.otlp.codec import OtlpCodec
from adapters.otlp.values import from_hex_ids, role_key
from adapters.otlp.wire import Piece, TooMany, frame, split_request
from sidecar.api import RolesConfig, SchemaConfig

TESTDATA = Path(__file__).resolve().parent / "testdata"
SCHEMA = SchemaConfig(
    roles=RolesConfig(user="attributes.user_id", query="body", time="time_unix_nano", rank=None, url=None)
)
TRACE = bytes(range(16))
SPAN = bytes(range(8))


def sdk_request() -> bytes:
    """An export request as the OpenTelemetry SDK's own encoder writes it (two resources, trace ids, kinds)."""
    from opentelemetry._logs import LogRecord as ApiRecord
    from opentelemetry._logs import SeverityNumber
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope
    from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context

    span = SpanContext(int.from_bytes(TRACE, "big"), int.from_bytes(SPAN, "big"), False, TraceFlags(1))
    context = set_span_in_context(NonRecordingSpan(span))
    resources = [Resource({"service.name": f"search-{i}", "host.name": "web-1"}) for i in range(2)]
    scope = InstrumentationScope("shop.search", "1.2")
    batch = []
    for i in range(6):
        record = ApiRecord(
            timestamp=1_700_000_000_000_000_000 + i,
            observed_timestamp=1_700_000_000_000_000_500 + i,
            context=context,
            severity_text="INFO",
            severity_number=SeverityNumber.INFO,
            body=f"cheap flights to city {i}",
            attributes={"user_id": f"u{i}", "page": i, "ratio": 0.5, "tags": ["a", "b"], "ok": True},
        )
        batch.append(ReadableLogRecord(record, resources[i % 2], scope))
    return bytes(encode_logs(batch).SerializeToString())


def golden(name: str, data: bytes) -> bytes:
    """The golden file ``name`` (written from ``data`` when QUERYLOG_REGEN_GOLDEN=1)."""
    path = TESTDATA / name
    if os.environ.get("QUERYLOG_REGEN_GOLDEN") == "1":
        path.write_bytes(data)
    return path.read_bytes()


def test_the_sdk_request_golden_file_is_what_the_sdk_writes() -> None:
    """The golden input is the request the installed SDK's encoder makes (two resources, one scope each)."""
    data = golden("sdk_request.bin", sdk_request())
    assert data == sdk_request()
    want = ExportLogsServiceRequest.FromString(data)
    assert len(want.resource_logs) == 2
    assert sum(len(sl.log_records) for rl in want.resource_logs for sl in rl.scope_logs) == 6


def test_passthrough_of_the_sdk_request_is_byte_identical() -> None:
    """Split, decoded, encoded unchanged and framed again: the very bytes the SDK sent (records, resources, scopes
    and their order), and each record's bytes are its input bytes."""
    data = golden("sdk_request.bin", sdk_request())
    codec = OtlpCodec(SCHEMA)
    bad: list[tuple[int, str]] = []
    pieces = split_request(data, 100)
    events = codec.decode_many(pieces, "\n", bad)
    assert bad == [] and len(events) == 6
    out = [codec.encode(e) for e in events]
    assert all(o is p for o, p in zip(out, pieces, strict=True))
    assert frame(out) == data
    assert frame(out) == golden("passthrough_request.bin", frame(out))


def test_roles_are_read_from_body_attributes_resource_and_time() -> None:
    schema = SchemaConfig(
        roles=RolesConfig(
            user="resource.service.instance.id", query="attributes.http.query", time="time_unix_nano", rank="page"
        )
    )
    request = export_request(
        [
            (
                {"service.instance.id": "pod-7"},
                "s",
                [log_record("GET /", {"http.query": "q", "page": 3}, time_unix_nano=5)],
            )
        ]
    )
    (event,) = OtlpCodec(schema).decode_many(split_request(request.SerializeToString(), 10), "\n", [])
    assert (event.user, event.query, event.time, event.rank, event.url) == ("pod-7", "q", 5, 3, None)
    assert role_key("attributes.a.b.c") == ("attr", "a.b.c")
    assert role_key("resource.service.name") == ("resource", "service.name")
    assert role_key("AnonID") == ("attr", "AnonID")


def test_a_changed_role_is_rewritten_in_place_and_everything_else_kept() -> None:
    record = log_record(
        "my ssn is 123",
        {"a": 1, "user_id": "u1", "z": "last"},
        time_unix_nano=9,
        severity_text="WARN",
        trace_id=TRACE,
        span_id=SPAN,
        flags=1,
    )
    data = export_request([({"service.name": "s"}, "scope", [record])]).SerializeToString()
    codec = OtlpCodec(SCHEMA)
    (piece,) = split_request(data, 10)
    (event,) = codec.decode_many([piece], "\n", [])
    event.query = "my ssn is [ssn]"
    event.user = 42
    out = codec.encode(event)
    assert out.resource == piece.resource and out.scope == piece.scope
    changed = LogRecord.FromString(out.log)
    assert changed.body.string_value == "my ssn is [ssn]"
    assert [kv.key for kv in changed.attributes] == ["a", "user_id", "z"]  # order kept
    assert changed.attributes[1].value.string_value == "42"  # the kind of the attribute kept (a string)
    original = LogRecord.FromString(piece.log)
    for name in ("time_unix_nano", "severity_text", "trace_id", "span_id", "flags"):
        assert getattr(changed, name) == getattr(original, name)


def test_a_changed_resource_role_gives_that_record_its_own_resource() -> None:
    schema = SchemaConfig(roles=RolesConfig(user="resource.host.name", query="body", time=None, rank=None, url=None))
    data = export_request([({"host.name": "web-1", "k": "v"}, "s", [log_record("q1"), log_record("q2")])])
    codec = OtlpCodec(schema)
    pieces = split_request(data.SerializeToString(), 10)
    first, second = codec.decode_many(pieces, "\n", [])
    first.user = "host-*"
    a, b = codec.encode(first), codec.encode(second)
    assert b is pieces[1] and a.resource != b.resource
    request = ExportLogsServiceRequest.FromString(frame([a, b]))
    assert [rl.resource.attributes[0].value.string_value for rl in request.resource_logs] == ["host-*", "web-1"]
    assert [kv.key for kv in request.resource_logs[0].resource.attributes] == ["host.name", "k"]


def test_bad_records_are_reported_by_reason_and_the_good_ones_go_on() -> None:
    records = [
        log_record("ok", {"user_id": "u"}),
        log_record(None, {"user_id": "u"}),
        log_record(7, {"user_id": "u"}),
        log_record("no user"),
        log_record("", {"user_id": "u"}),  # an empty query is a valid event
    ]
    pieces = split_request(export_request([({}, "s", records)]).SerializeToString(), 10)
    pieces.append(Piece(b"", b"", b"\xff\xff\xff"))
    bad: list[tuple[int, str]] = []
    events = OtlpCodec(SCHEMA).decode_many(pieces, "\n", bad)
    assert [e.query for e in events] == ["ok", ""]
    assert bad == [(1, "missing_query"), (2, "query_not_string"), (3, "missing_user"), (5, "invalid_log_record")]


def test_garbage_and_too_many_records_are_refused_before_any_record() -> None:
    with pytest.raises(ValueError):
        split_request(b"\x0a\xff\xff\xff\x0f", 10)
    data = export_request([({}, "s", [log_record("q", {"user_id": "u"})] * 3)]).SerializeToString()
    with pytest.raises(TooMany):
        split_request(data, 2)


def test_the_state_store_round_trip_restores_the_record_and_its_identity() -> None:
    data = export_request([({"r": 1}, "s", [log_record("q", {"user_id": "u"})])]).SerializeToString()
    codec = OtlpCodec(SCHEMA)
    (event,) = codec.decode_many(split_request(data, 10), "\n", [])
    restored = OtlpCodec().unpack_record(codec.pack_record(event.record))  # a codec without the schema
    assert restored.piece == event.record.piece and restored.orig == event.record.orig
    assert OtlpCodec().unpack_record(b"garbage") is None


def test_json_line_is_otlp_json_of_one_record_with_its_resource_and_scope() -> None:
    record = log_record("q", {"user_id": "u", "n": 5}, trace_id=TRACE, span_id=SPAN, severity_number=9)
    data = export_request([({"service.name": "s"}, "shop", [record])]).SerializeToString()
    codec = OtlpCodec(SCHEMA)
    (event,) = codec.decode_many(split_request(data, 10), "\n", [])
    line = json.loads(codec.json_line(event))
    (rl,) = line["resourceLogs"]
    (sl,) = rl["scopeLogs"]
    (lr,) = sl["logRecords"]
    assert rl["resource"]["attributes"] == [{"key": "service.name", "value": {"stringValue": "s"}}]
    assert sl["scope"] == {"name": "shop"}
    assert lr["traceId"] == TRACE.hex() and lr["spanId"] == SPAN.hex() and lr["severityNumber"] == 9
    assert lr["attributes"][1] == {"key": "n", "value": {"intValue": "5"}}


def test_an_event_of_another_format_becomes_a_log_record_of_its_fields() -> None:
    from sidecar.api import Event

    event = Event("u1", "cheap flights", 1_700_000_000, None, None)
    piece = OtlpCodec(SCHEMA).encode(event)
    record = LogRecord.FromString(piece.log)
    assert record.body.string_value == "cheap flights" and record.time_unix_nano == 1_700_000_000
    assert [(kv.key, kv.value.string_value) for kv in record.attributes] == [("user_id", "u1")]


_values = st.one_of(st.text(max_size=8), st.integers(-(2**63), 2**63 - 1), st.booleans(), st.binary(max_size=8))


@settings(max_examples=60, deadline=None)
@given(
    groups=st.lists(
        st.tuples(
            st.dictionaries(st.text(max_size=5), _values, max_size=3),
            st.text(max_size=5),
            st.lists(
                st.tuples(st.text(max_size=12), st.dictionaries(st.text(max_size=5), _values, max_size=4)), max_size=4
            ),
        ),
        max_size=4,
    )
)
def test_split_and_frame_keep_every_record_resource_and_scope_in_order(groups: list) -> None:  # type: ignore[type-arg]
    request = export_request([(res, scope, [log_record(b, attrs) for b, attrs in recs]) for res, scope, recs in groups])
    data = request.SerializeToString()
    pieces = split_request(data, 10_000)
    assert [LogRecord.FromString(p.log) for p in pieces] == [
        r for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records
    ]
    again = ExportLogsServiceRequest.FromString(frame(pieces))
    flat = [(rl.resource, sl.scope, r) for rl in again.resource_logs for sl in rl.scope_logs for r in sl.log_records]
    want = [(rl.resource, sl.scope, r) for rl in request.resource_logs for sl in rl.scope_logs for r in sl.log_records]
    assert flat == want


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_split_never_raises_anything_but_value_error_on_garbage(data: bytes) -> None:
    try:
        pieces = split_request(data, 100)
    except ValueError:
        return
    OtlpCodec(SCHEMA).decode_many(pieces, "\n", [])  # bad records are reported, never raised


def parsed(line: str) -> ExportLogsServiceRequest:
    """An OTLP/JSON line read back by protobuf's own JSON mapping (hex ids turned to its base64 first)."""
    data = json.loads(line)
    from_hex_ids(data)
    return json_format.ParseDict(data, ExportLogsServiceRequest())


def test_json_line_reads_back_as_the_very_request_of_the_sdk() -> None:
    codec = OtlpCodec(SCHEMA)
    pieces = split_request(golden("sdk_request.bin", sdk_request()), 100)
    for event, piece in zip(codec.decode_many(pieces, "\n", []), pieces, strict=True):
        assert parsed(codec.json_line(event)) == ExportLogsServiceRequest.FromString(frame([piece]))


@settings(max_examples=60, deadline=None)
@given(
    body=st.one_of(st.text(max_size=8), st.lists(_values, max_size=3)),
    attrs=st.dictionaries(st.text(max_size=5), st.one_of(_values, st.floats(allow_nan=False)), max_size=4),
    resource=st.dictionaries(st.text(max_size=5), _values, max_size=3),
    ids=st.booleans(),
)
def test_json_line_reads_back_as_the_record_with_its_resource_and_scope(
    body: object, attrs: dict, resource: dict, ids: bool
) -> None:  # type: ignore[type-arg]
    fields = {"trace_id": TRACE, "span_id": SPAN, "flags": 1, "severity_number": 5} if ids else {}
    record = log_record(
        body, {**attrs, "user_id": "u", "q": "query"}, time_unix_nano=7, observed_time_unix_nano=8, **fields
    )
    (piece,) = split_request(export_request([(resource, "scope", [record])]).SerializeToString(), 10)
    schema = SchemaConfig(
        roles=RolesConfig(user="attributes.user_id", query="attributes.q", time=None, rank=None, url=None)
    )
    (event,) = OtlpCodec(schema).decode_many([piece], "\n", [])
    assert parsed(OtlpCodec(schema).json_line(event)) == ExportLogsServiceRequest.FromString(frame([piece]))


def test_a_repeated_role_key_keeps_no_old_value_once_changed() -> None:
    """OTLP forbids repeated attribute keys; a sender may repeat one anyway. Decoding reads the first; a changed
    role leaves the record with one copy of the key, the new value, in the first one's place."""
    record = log_record("q", {"user_id": "u"})
    record.attributes.extend([kv for kv in log_record("x", {"user_id": "second", "z": 1}).attributes])
    (piece,) = split_request(export_request([({}, "s", [record])]).SerializeToString(), 10)
    codec = OtlpCodec(SCHEMA)
    (event,) = codec.decode_many([piece], "\n", [])
    assert event.user == "u"
    event.user = "pseudonym"
    changed = LogRecord.FromString(codec.encode(event).log)
    assert [(kv.key, kv.value.string_value) for kv in changed.attributes if kv.key == "user_id"] == [
        ("user_id", "pseudonym")
    ]
    assert [kv.key for kv in changed.attributes] == ["user_id", "z"]
