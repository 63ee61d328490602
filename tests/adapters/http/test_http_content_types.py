"""What real shippers POST by default, byte for byte, into the ``http`` source (issue 27 item 2).

* Fluent Bit's ``http`` output (``format msgpack``, its default): the chunk's records as a msgpack stream, each
  ``[EventTime, map]`` (Fluent Bit < 2.1) or ``[[EventTime, metadata], map]`` (2.1 and later), EventTime being
  msgpack ext type 0 of 8 bytes (seconds, nanoseconds, big-endian); ``[integer, map]`` from older forwarders.
  The fixtures below are written from that format definition, byte by byte (not produced by our encoder).
* Vector's ``http`` sink: ``application/json`` with the ``json`` codec (one JSON array per batch), or NDJSON
  (``framing.method: newline_delimited``, ``application/x-ndjson``); ``text/plain`` with the ``text`` codec.
* syslog-ng's ``http()`` with ``body("${MSG}")`` and ``delimiter("\\n")``: raw lines, here ``text/plain`` TSV.

A 415 lists what is accepted (``accepted`` in the JSON body, ``Accept-Post``; ``Accept-Encoding`` for an
encoding). Property tests (hypothesis) for the body parsers: any msgpack stream of maps in any of the three
entry shapes comes back as its maps, in order; any bytes give records or counted reasons, never an exception,
and never more records than the body has bytes.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import msgpack
import pytest
from helpers.httptest import Served, post
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.http.body import ACCEPTED_TYPES, BodyError, body_format, msgpack_records, split_records, text_format
from adapters.http.config import HttpSourceConfig
from adapters.http.source import HttpSource
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

# {"AnonID": "142", "Query": "rentdirect.com", "QueryTime": "2006-03-01 07:17:12"}: fixmap of 3 (83), fixstr keys
# and values (a6 "AnonID", a3 "142", a5 "Query", ae "rentdirect.com", a9 "QueryTime", b3 "2006-03-01 07:17:12")
MAP = (
    "83 a6 41 6e 6f 6e 49 44 a3 31 34 32 a5 51 75 65 72 79 ae 72 65 6e 74 64 69 72 65 63 74 2e 63 6f 6d"
    " a9 51 75 65 72 79 54 69 6d 65 b3 32 30 30 36 2d 30 33 2d 30 31 20 30 37 3a 31 37 3a 31 32"
)
# EventTime 1141197432.000000500: fixext 8 (d7), type 0, seconds 0x44054a78, nanoseconds 0x000001f4
EVENT_TIME = "d7 00 44 05 4a 78 00 00 01 f4"
FLUENT_BIT_V1 = bytes.fromhex(f"92 {EVENT_TIME} {MAP}")  # fixarray 2: [EventTime, map]
FLUENT_BIT_V2 = bytes.fromhex(f"92 92 {EVENT_TIME} 80 {MAP}")  # [[EventTime, {} (80)], map]
INTEGER_TIME = bytes.fromhex(f"92 ce 44 05 4a 78 {MAP}")  # [uint32 seconds, map]
PLAIN_MAP = bytes.fromhex(MAP)
RECORD = {"AnonID": "142", "Query": "rentdirect.com", "QueryTime": "2006-03-01 07:17:12"}

# Vector's http sink, json codec: one array per batch; NDJSON framing: one object per line
VECTOR_ARRAY = b'[{"AnonID":"142","Query":"rentdirect.com"},{"AnonID":"217","Query":"lottery"}]'
VECTOR_NDJSON = b'{"AnonID":"142","Query":"rentdirect.com"}\n{"AnonID":"217","Query":"lottery"}\n'
TSV_LINES = b"142\trentdirect.com\t2006-03-01 07:17:12\t\t\n217\tlottery\t2006-03-01 11:58:51\t1\thttp://x.example\n"
HEADER = b"AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"


@pytest.fixture
def serve_schema(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """``serve_schema(fmt, out_name)``: a pipeline whose schema has format ``fmt`` (TSV without a header line:
    records from a stream), a file sink, a started ``http`` source on port 0."""
    started: list[Served] = []

    def start(fmt: str, out_name: str) -> Served:
        out = tmp_path / out_name
        config = tmp_path / f"config{len(started)}.yaml"
        schema = f"{{format: {fmt}, header: false}}"
        config.write_text(f"state_dir: state\nschema: {schema}\nsinks:\n  - file: {{path: {out}}}\n", encoding="utf-8")
        pipeline = Pipeline(load_config(config))
        source = HttpSource(HttpSourceConfig(listen="127.0.0.1:0"), pipeline.ctx)
        source.start(pipeline)
        served = Served(pipeline, source, out, tmp_path / "state")
        started.append(served)
        return served

    yield start
    for served in started:
        served.source.stop(grace=2)
        served.pipeline.close()


class TestShippersDefaults:
    @pytest.mark.parametrize(
        "body",
        [FLUENT_BIT_V1, FLUENT_BIT_V2, INTEGER_TIME, PLAIN_MAP],
        ids=["fluent-bit-v1", "fluent-bit-v2-metadata", "integer-time", "plain-map"],
    )
    def test_fluent_bit_msgpack_entries(self, serve_schema: Any, body: bytes) -> None:
        """Each entry shape of Fluent Bit's msgpack stream gives its record; two entries, two records."""
        served = serve_schema("jsonl", "out.jsonl")
        answer = post(served.port, body + body, headers={"Content-Type": "application/msgpack"})
        assert answer.status == 200 and answer.body["accepted"] == 2, answer.body
        rows = [json.loads(line) for line in served.out.read_text(encoding="utf-8").splitlines()]
        assert rows == [RECORD, RECORD]

    @pytest.mark.parametrize(
        ("content_type", "body"),
        [("application/json", VECTOR_ARRAY), ("application/x-ndjson", VECTOR_NDJSON)],
        ids=["vector-json-array", "vector-ndjson"],
    )
    def test_vector_http_sink_bodies(self, serve_schema: Any, content_type: str, body: bytes) -> None:
        served = serve_schema("jsonl", "out.jsonl")
        answer = post(served.port, body, headers={"Content-Type": content_type})
        assert answer.status == 200 and answer.body["accepted"] == 2, answer.body
        assert [json.loads(x)["AnonID"] for x in served.out.read_text(encoding="utf-8").splitlines()] == ["142", "217"]

    @pytest.mark.parametrize("fmt", ["tsv", "auto"])
    def test_text_plain_tsv_lines(self, serve_schema: Any, fmt: str) -> None:
        """text/plain: TSV of schema.columns, byte for byte (auto: the first line has no ``{``); the header line
        of those columns is skipped, a line of the wrong width dead-lettered beside the good ones."""
        served = serve_schema(fmt, "out.tsv")
        body = HEADER + TSV_LINES + b"just a message\n"
        answer = post(served.port, body, headers={"Content-Type": "text/plain; charset=utf-8"})
        assert answer.status == 200, answer.body
        assert answer.body["accepted"] == 2 and answer.body["reasons"] == {"wrong_column_count": 1}
        assert served.out.read_bytes() == TSV_LINES
        assert served.source.stats()["header_lines"] == 1

    @pytest.mark.parametrize("fmt", ["jsonl", "auto"])
    def test_text_plain_json_lines(self, serve_schema: Any, fmt: str) -> None:
        served = serve_schema(fmt, "out.jsonl")
        answer = post(served.port, VECTOR_NDJSON, headers={"Content-Type": "text/plain"})
        assert answer.status == 200 and answer.body["accepted"] == 2, answer.body
        assert served.out.read_bytes() == VECTOR_NDJSON


class TestRefusals:
    def test_415_lists_the_accepted_types(self, serve_schema: Any) -> None:
        served = serve_schema("jsonl", "out.jsonl")
        answer = post(served.port, VECTOR_NDJSON, headers={"Content-Type": "application/x-www-form-urlencoded"})
        assert answer.status == 415
        assert answer.body == {"error": "unsupported_media_type", "accepted": list(ACCEPTED_TYPES)}
        assert answer.headers["accept-post"] == ", ".join(ACCEPTED_TYPES)
        for kind in ("application/x-ndjson", "application/json", "application/msgpack", "text/plain"):
            assert kind in answer.body["accepted"]
        assert not served.out.exists() or served.out.read_bytes() == b""

    def test_415_for_an_encoding_names_the_accepted_encodings(self, serve_schema: Any) -> None:
        served = serve_schema("jsonl", "out.jsonl")
        answer = post(served.port, VECTOR_NDJSON, headers={"Content-Encoding": "br"})
        assert answer.status == 415
        assert answer.body == {"error": "unsupported_encoding", "accepted": ["gzip", "deflate", "identity"]}
        assert answer.headers["accept-encoding"] == "gzip, deflate, identity"

    def test_body_format(self) -> None:
        assert body_format("text/plain; charset=utf-8", None) == ("text", "")
        assert body_format(None, "GZIP") == ("ndjson", "gzip")
        assert body_format("Application/JSON", None) == ("json", "")
        assert body_format("application/vnd.msgpack", "deflate") == ("msgpack", "deflate")
        with pytest.raises(BodyError) as refused:
            body_format("text/csv", None)
        assert refused.value.status == 415 and refused.value.accepted == ACCEPTED_TYPES


# ---- property tests of the parsers ------------------------------------------------------------------------

_values = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1), st.text(max_size=20), st.floats(allow_nan=False)
)
_maps = st.dictionaries(st.text(max_size=10), _values, max_size=5)


def _entry(shape: int, record: dict[str, Any], seconds: int) -> bytes:
    """One Fluent Bit entry of ``shape`` 0 (the map), 1 ([EventTime, map]) or 2 ([[EventTime, {}], map])."""
    if shape == 0:
        return msgpack.packb(record)
    time = msgpack.ExtType(0, struct.pack(">II", seconds, 0))
    return msgpack.packb([time, record] if shape == 1 else [[time, {}], record])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), _maps, st.integers(0, 2**32 - 1)), max_size=20))
def test_any_stream_of_entries_gives_its_maps_in_order(entries: list[tuple[int, dict[str, Any], int]]) -> None:
    body = b"".join(_entry(shape, record, seconds) for shape, record, seconds in entries)
    lines, positions, bad = msgpack_records(body, 1 << 20)
    assert bad == []
    assert positions == list(range(1, len(entries) + 1))
    assert [json.loads(line) for line in lines] == [json.loads(json.dumps(record)) for _, record, _ in entries]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_as_msgpack_never_raise(body: bytes) -> None:
    """Garbage is counted (by position and reason), never raised; no more records than bytes."""
    lines, positions, bad = msgpack_records(body, 64)
    assert len(lines) == len(positions) and len(lines) + len(bad) <= max(len(body), 1)
    assert all(isinstance(reason, str) and record is None for _, reason, record in bad)
    assert all(len(line.encode("utf-8")) <= 64 for line in lines)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=300), st.booleans())
def test_any_bytes_as_lines_never_raise(body: bytes, array: bool) -> None:
    lines, positions, bad = split_records(body, array, 32)
    assert len(lines) == len(positions)
    assert len(lines) + len(bad) <= (max(len(body), 1) if array else body.count(b"\n") + 1)
    assert all(len(line.encode("utf-8", "surrogatepass")) <= 32 for line in lines)


_line = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n"), max_size=30)


@settings(max_examples=200, deadline=None)
@given(st.lists(_line, max_size=20))
def test_text_lines_come_back_with_their_positions(text_lines: list[str]) -> None:
    """A text body's lines, blank ones skipped, each with its 1-based line number."""
    body = "".join(f"{line}\n" for line in text_lines).encode("utf-8")
    lines, positions, bad = split_records(body, False, 1 << 20)
    kept = [(i, line) for i, line in enumerate(text_lines, 1) if line.strip()]
    assert bad == [] and list(zip(positions, lines, strict=True)) == kept


@given(st.lists(_line, min_size=1, max_size=3))
def test_text_format_follows_the_schema_or_the_first_line(text_lines: list[str]) -> None:
    assert text_format("tsv", text_lines) == "tsv" and text_format("jsonl", text_lines) == "jsonl"
    assert text_format("auto", text_lines) == ("jsonl" if text_lines[0].lstrip().startswith("{") else "tsv")
