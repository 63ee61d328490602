"""The compiled fast path (adapters/otlp/scan.py) against protobuf: a record it reads means exactly what protobuf
parses (the same roles, the same OTLP/JSON), anything else it leaves to protobuf; garbage never raises. Run here
interpreted (the same source mypyc compiles), and through the codec with the scan switched on."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

from adapters.otlp import scan as scanning
from adapters.otlp.codec import OtlpCodec
from adapters.otlp.scan import EMPTY, scan, scanned_role, scanned_text
from adapters.otlp.values import record_text, set_value
from adapters.otlp.wire import Piece, split_request
from sidecar.api import Event, RolesConfig, SchemaConfig

TESTDATA = Path(__file__).resolve().parent / "testdata"

texts = st.text(max_size=140)
values = st.one_of(texts, texts, st.integers(-(2**63), 2**63 - 1), st.booleans(), st.binary(max_size=8))
u64 = st.integers(0, 2**64 - 1)


@st.composite
def records(draw: st.DrawFn) -> bytes:
    """A ``LogRecord``'s bytes: mostly the common shape, sometimes another value kind, long text, unknown fields,
    fields repeated or out of order."""
    r = LogRecord(
        time_unix_nano=draw(st.one_of(st.just(0), u64)),
        observed_time_unix_nano=draw(st.one_of(st.just(0), u64)),
        severity_number=draw(st.sampled_from([0, 1, 9, 17, 24, 200, -3])),  # type: ignore[arg-type]
        severity_text=draw(st.sampled_from(["", "INFO", "wärn"])),
        dropped_attributes_count=draw(st.sampled_from([0, 3, 300])),
        flags=draw(st.sampled_from([0, 1, 2**31])),
        trace_id=draw(st.sampled_from([b"", bytes(range(16))])),
        span_id=draw(st.sampled_from([b"", bytes(range(8))])),
        event_name=draw(st.sampled_from(["", "query"])),
    )
    body = draw(st.one_of(st.none(), st.just(EMPTY), values))
    if body is EMPTY:
        r.body.SetInParent()
    elif body is not None:
        set_value(r.body, body)
    for key, value in draw(st.lists(st.tuples(st.sampled_from(["AnonID", "Query", "q", "é", ""]), values), max_size=6)):
        kv = r.attributes.add()
        kv.key = key
        set_value(kv.value, value)
    data = r.SerializeToString()
    extra = draw(st.sampled_from([b"", b"\x2a\x00", b"\x09" + bytes(8), b"\x78\x01", b"\x2a\x04\x0a\x02hi"]))
    return data + extra if draw(st.booleans()) else extra + data


ROLE_NAMES = ("body", "time_unix_nano", "observed_time_unix_nano")


@settings(max_examples=400, deadline=None)
@given(records())
def test_a_scanned_record_means_what_protobuf_parses(data: bytes) -> None:
    msg = LogRecord.FromString(data)
    got = scan(data)
    if got is None:
        return  # left to protobuf
    assert scanned_text(got) == record_text(msg)
    assert [(k, v) for k, v, _ in got.attributes] == [(kv.key, kv.value.string_value) for kv in msg.attributes]
    assert scanned_role(got, True, "body") == (msg.body.string_value if msg.body.HasField("string_value") else None)
    for name in ROLE_NAMES[1:]:
        assert scanned_role(got, False, name) == (getattr(msg, name) or None)


def test_the_common_shape_is_read_and_the_others_left_to_protobuf() -> None:
    common = LogRecord(
        time_unix_nano=5,
        severity_number=9,  # type: ignore[arg-type]
        severity_text="INFO",
        trace_id=bytes(16),
    )
    common.body.SetInParent()
    for key, value in (("AnonID", "650"), ("Query", "cheap flights"), ("ItemRank", "")):
        kv = common.attributes.add()
        kv.key, kv.value.string_value = key, value
    assert scan(common.SerializeToString()) is not None
    other = LogRecord()
    other.CopyFrom(common)
    other.attributes[0].value.int_value = 650
    assert scan(other.SerializeToString()) is None  # an int attribute
    other.CopyFrom(common)
    other.attributes[1].value.string_value = "x" * 200
    assert scan(other.SerializeToString()) is None  # a two-byte length
    assert scan(common.SerializeToString() + b"\x78\x01") is None  # an unknown field


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=80))
def test_garbage_is_never_read_as_a_record_protobuf_refuses(data: bytes) -> None:
    got = scan(data)  # never raises
    if got is not None:
        assert scanned_text(got) == record_text(LogRecord.FromString(data))


def test_invalid_utf8_is_left_to_protobuf() -> None:
    data = b"\x32\x0b\x0a\x01q\x12\x06\x0a\x04\xff\xfe\xfd\xfc"
    assert scan(data) is None


SCHEMA = SchemaConfig(roles=RolesConfig(user="AnonID", query="Query", time="time_unix_nano", rank="body", url=None))


def _roles(events: list[Event]) -> list[tuple[object, ...]]:
    return [(e.user, e.query, e.time, e.rank, e.url) for e in events]


@settings(max_examples=200, deadline=None)
@given(st.lists(records(), min_size=1, max_size=8))
def test_the_codec_decodes_and_writes_the_same_with_and_without_the_scan(logs: list[bytes]) -> None:
    plain, fast = OtlpCodec(SCHEMA), OtlpCodec(SCHEMA)
    plain.scan, fast.scan = None, scanning.scan
    pieces = [Piece(b"\x0a\x00", b"", log) for log in logs]
    bad_plain: list[tuple[int, str]] = []
    bad_fast: list[tuple[int, str]] = []
    slow = plain.decode_many(pieces, "\n", bad_plain)
    quick = fast.decode_many(pieces, "\n", bad_fast)
    assert bad_fast == bad_plain
    assert _roles(quick) == _roles(slow)
    assert [fast.json_line(e) for e in quick] == [plain.json_line(e) for e in slow]
    assert all(fast.encode(e) is e.record.piece for e in quick)  # unchanged: the bytes as sent


def test_the_scan_is_used_only_compiled() -> None:
    assert (OtlpCodec().scan is not None) == scanning.COMPILED
    assert (not scanning.__file__.endswith(".py")) == scanning.COMPILED


def test_the_sdk_golden_request_passes_through_the_scan_byte_identical() -> None:
    schema = SchemaConfig(roles=RolesConfig(user="attributes.user_id", query="body", rank=None, url=None))
    codec = OtlpCodec(schema)
    codec.scan = scanning.scan
    pieces = split_request((TESTDATA / "sdk_request.bin").read_bytes(), 100)
    events = codec.decode_many(pieces, "\n", [])
    assert len(events) == len(pieces) == 6
    assert [codec.encode(e) for e in events] == pieces


def test_aol_records_of_the_sdk_are_all_scanned_and_written_as_protobuf_would() -> None:
    from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

    from sidecar.tools.bench.network import aol_records
    from sidecar.tools.bench.otlp import sdk_batches

    request = encode_logs(sdk_batches(aol_records(300, 1), 300)[0]).SerializeToString()
    plain, fast = OtlpCodec(), OtlpCodec()
    plain.scan, fast.scan = None, scanning.scan
    pieces = split_request(request, 1000)
    slow, quick = plain.decode_many(pieces, "\n", []), fast.decode_many(pieces, "\n", [])
    assert len(quick) == 300
    assert all(e.record.scanned is not None for e in quick)
    assert _roles(quick) == _roles(slow)
    assert [fast.json_line(e) for e in quick] == [plain.json_line(e) for e in slow]
