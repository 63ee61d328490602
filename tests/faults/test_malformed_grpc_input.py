"""10,000 hypothesis-generated malformed requests to the gRPC source, `Ingest` and `Filter` (issue 11).

A real server runs in this process (``helpers.grpc_sidecar``: passthrough chain, a TSV file sink,
``limits.max_record_bytes: 512``). The client sends wire bytes through a channel with identity
serializers, so nothing on the client side checks them: arbitrary bytes, batches whose framing is cut,
and well-framed batches whose events carry invalid UTF-8 (in roles, attribute keys and values, the batch
id), wrong wire types, truncated or random event bytes, events over the record limit, and values with
tabs, newlines and CRs that would forge a TSV record. Good events (uniquely numbered) ride in the same
batches. What a request must count as is worked out on the client side, from the protobuf library and
the wire format: a batch that parses, each of its events (in, or dead-lettered when over the limit); a
batch whose framing holds, each event one by one (in, or dead-lettered when it does not parse); a
message whose framing is broken, one dead letter. For every RPC:

* the server answers (no crash, no INTERNAL);
* ``Ingest``: the response counts exactly the events that must go in, and in + dead-lettered = inputs + the
  events the TSV sink must refuse (a role value with a tab or a line break), which are not reported delivered;
* ``Filter``: exactly the events that must go in come back, every good one once;

and over the whole run the server's ``Stats`` moved by exactly the events in and the dead letters the
inputs must give. After the run it still answers health, ``Stats`` and a good batch on both RPCs; the TSV
output holds no forged line (every line has the five columns, the good events each once), and the
sidecar's logs carry no record value. Generated values are never printed: failures report counts only.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import structlog
from helpers.grpc_sidecar import Running, sidecar, write_config
from hypothesis import HealthCheck, Verbosity, given, settings
from hypothesis import strategies as st

from adapters.grpc.client import wait_serving
from adapters.grpc.codec import EventBatch, QueryEvent
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import IngestResponse, StatsRequest, StatsResponse

LIMIT = 512
EXAMPLES = 10_000
MARK = "zqmark"  # in every value the test plants: a log line holding it leaks a record value
SERVICE = "/querylog.v1.QueryLogFilter/"
INVALID_UTF8 = [b"\xff", b"\xc3(", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"]
FRAMING = ["\t", "\n", "\r", "\r\n", "\n777\tjohn smith\t\t\t"]


def check(condition: bool, message: str) -> None:
    """``assert`` without pytest's introspection, which would print generated values: counts only."""
    if not condition:
        raise AssertionError(message)


# --- protobuf wire format, written by hand (the client must be able to send what its library refuses) --


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def field(number: int, payload: bytes) -> bytes:
    """A length-delimited field."""
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def good_event(seq: int) -> bytes:
    return QueryEvent(
        user=f"u{seq}", query=f"{MARK} good {seq}", time="2006-03-01 00:00:00", seq=seq, attributes={"k": "v"}
    ).SerializeToString()


def cut_event(n: int) -> bytes:
    """An event like a good one (another query text): cut short, it may still parse."""
    return QueryEvent(
        user=f"u{n}", query=f"{MARK} cut {n}", time="2006-03-01 00:00:00", seq=n, attributes={"k": "v"}
    ).SerializeToString()


def _with_invalid_utf8(where: int, bad: bytes) -> bytes:
    """An event whose string field ``where`` (1-5 roles; 6 an attribute key, 7 an attribute value) is not UTF-8."""
    value = MARK.encode() + bad
    base = QueryEvent(user="u", query=f"{MARK} q").SerializeToString()
    if where <= 5:
        return base + field(where, value)
    entry = field(1, value) + field(2, b"v") if where == 6 else field(1, b"k") + field(2, value)
    return base + field(6, entry)


def _breaks_framing(where: str, text: str) -> bytes:
    values = {"user": "u", "query": f"{MARK} q", "time": "", "rank": "", "url": ""}
    values[where] = values[where] + text
    return QueryEvent(**values).SerializeToString()


bad_events = st.one_of(
    st.tuples(st.integers(1, 7), st.sampled_from(INVALID_UTF8)).map(lambda t: _with_invalid_utf8(*t)),
    # a good event cut short (at a field boundary it still parses: the oracle below decides)
    st.tuples(st.integers(0, 10_000), st.integers(1, 40)).map(lambda t: cut_event(t[0])[: -t[1]]),
    st.binary(max_size=48),
    # a known field with another wire type, a group, an 11-byte varint, a length past the end
    st.sampled_from(
        [
            varint(2 << 3 | 0) + varint(5),
            varint(1 << 3 | 5) + b"\0\0\0\0",
            varint(7 << 3 | 2) + varint(1) + b"x",
            varint(9 << 3 | 3) + varint(9 << 3 | 4),
            varint(7 << 3 | 0) + b"\xff" * 10 + b"\x01",
            varint(2 << 3 | 2) + varint(100) + b"short",
        ]
    ),
    # over the record limit
    st.sampled_from([LIMIT, 2 * LIMIT, 8 * LIMIT]).map(
        lambda n: QueryEvent(user="u", query=MARK + "z" * n).SerializeToString()
    ),
    # a tab, a line feed or a CR (a forged record) in a role
    st.tuples(st.sampled_from(["user", "query", "time", "rank", "url"]), st.sampled_from(FRAMING)).map(
        lambda t: _breaks_framing(*t)
    ),
    # an empty or blank query (valid or dead-lettered, as the codec decides: counted either way)
    st.sampled_from(["", " ", "\t"]).map(lambda q: QueryEvent(user="u", query=q).SerializeToString()),
)


@dataclasses.dataclass
class Request:
    """One request message: its bytes and the ``seq`` of the good events in it."""

    data: bytes
    good: list[int]


@st.composite
def requests(draw: st.DrawFn, first_seq: int) -> Request:
    kind = draw(st.integers(0, 5))
    if kind == 0:  # arbitrary bytes
        return Request(draw(st.binary(max_size=80)), [])
    items = draw(st.lists(st.one_of(st.none(), bad_events), min_size=1, max_size=5))
    chunks: list[bytes] = []
    good: list[int] = []
    for i, item in enumerate(items):
        if item is None:
            good.append(first_seq + i)
            chunks.append(good_event(first_seq + i))
        else:
            chunks.append(item)
    data = b"".join(field(1, c) for c in chunks)
    extra = draw(st.sampled_from([b"", field(2, b"batch-1"), field(2, b"\xffbatch"), varint(3 << 3) + varint(1)]))
    data = extra + data if draw(st.booleans()) else data + extra
    if kind == 1 and chunks[-1] and not extra:  # framing cut inside the last event: the whole message is bad
        return Request(data[: -draw(st.integers(1, len(chunks[-1])))], [])
    return Request(data, good)


@st.composite
def rpcs(draw: st.DrawFn) -> tuple[str, list[Request]]:
    method = draw(st.sampled_from(["Ingest", "Filter"]))
    base = draw(st.integers(0, 10**9)) * 100
    n = draw(st.integers(1, 2))
    return method, [draw(requests(base + 10 * i)) for i in range(n)]


# --- what the server must do with a request (the client's protobuf library is the oracle) -----------


@dataclasses.dataclass
class Expected:
    """For one request: the inputs it must be counted as (events in + dead letters), and how many of its
    events must enter the chain."""

    inputs: int
    events_in: int
    #: events that go in but that the TSV sink must refuse (a role value with a tab, LF or CR: see FRAMING)
    refused: int = 0


def breaks_tsv(event: QueryEvent) -> bool:
    """True when a role value the AOL-columns TSV sink writes holds a tab, a line feed or a carriage return."""
    return any(c in v for v in (event.user, event.query, event.time, event.rank, event.url) for c in "\t\n\r")


def wire_chunks(data: bytes) -> list[bytes] | None:
    """The field-1 (``events``) payloads of a message when its top-level framing holds (varint, fixed and
    length-delimited fields, any field number), else None. Written from the wire format, not the server."""
    chunks: list[bytes] = []
    pos = 0

    def read_varint() -> int:
        nonlocal pos
        value = shift = 0
        while pos < len(data) and shift < 64:
            byte = data[pos]
            pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7
        raise ValueError

    def skip_group(number: int, depth: int) -> None:
        """Past the end tag of group ``number`` (protobuf skips unknown groups; nested ones too)."""
        nonlocal pos
        if depth > 64:
            raise ValueError
        while pos < len(data):
            key = read_varint()
            inner, wire = key >> 3, key & 7
            if inner == 0:
                raise ValueError
            if wire == 4:
                if inner != number:
                    raise ValueError
                return
            if wire == 3:
                skip_group(inner, depth + 1)
            elif wire == 2:
                pos += read_varint()
            elif wire == 0:
                read_varint()
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                raise ValueError
            if pos > len(data):
                raise ValueError
        raise ValueError

    try:
        while pos < len(data):
            key = read_varint()
            wire = key & 7
            if key >> 3 == 0:
                return None  # no field has number 0: protobuf refuses the message
            if wire == 3:
                skip_group(key >> 3, 0)
            elif wire == 2:
                size = read_varint()
                if pos + size > len(data):
                    return None
                if key >> 3 == 1:
                    chunks.append(data[pos : pos + size])
                pos += size
            elif wire == 0:
                read_varint()
            elif wire in (1, 5):
                pos += 8 if wire == 1 else 4
            else:
                return None  # an end group without its start, or no wire type at all
    except ValueError:
        return None
    return chunks if pos == len(data) else None


def expect(req: Request) -> Expected:
    """How a request must be counted: a batch that parses whole, each of its events; else, when the framing
    holds, each event one by one (in, or dead-lettered); else the message as one dead letter."""
    try:
        whole = EventBatch.FromString(req.data)
    except Exception:
        whole = None
    if whole is not None:
        taken = [e for e in whole.events if e.ByteSize() <= LIMIT]
        return Expected(len(whole.events), len(taken), sum(map(breaks_tsv, taken)))
    chunks = wire_chunks(req.data)
    if chunks is None:
        return Expected(1, 0)
    good = refused = 0
    for chunk in chunks:
        with contextlib.suppress(Exception):
            event = QueryEvent.FromString(chunk)
            if event.ByteSize() <= LIMIT:
                good += 1
                refused += breaks_tsv(event)
    return Expected(len(chunks), good, refused)


# --- the run --------------------------------------------------------------------------------------


@dataclasses.dataclass
class Tally:
    rpcs: Counter[str] = dataclasses.field(default_factory=Counter)
    messages: int = 0
    inputs: int = 0
    events_in: int = 0
    dead: int = 0
    good_sent: Counter[str] = dataclasses.field(default_factory=Counter)
    good_back: int = 0


def _source_dead(stats: StatsResponse) -> int:
    """Dead letters of the source (the sink's own rejections, ``field_breaks_framing``, apart)."""
    return stats.events_dead_lettered - stats.dead_letters.get("field_breaks_framing", 0)


@pytest.fixture
def running(tmp_path: Path) -> Iterator[Running]:
    cfg = write_config(
        tmp_path,
        "dead_letter_file: dead.jsonl\n"
        f"dead_letter_max_bytes: {1 << 40}\n"
        f"limits: {{max_record_bytes: {LIMIT}}}\n"
        "filters: []\n"
        f"sinks:\n  - file: {{path: {tmp_path / 'out.tsv'}}}\n",
    )
    with sidecar(cfg) as run:
        yield run


@pytest.mark.slow
def test_malformed_grpc_requests_are_each_counted_and_never_take_good_events(
    running: Running, tmp_path: Path, debug_structlog: None
) -> None:
    """10,000 generated RPCs (Ingest or Filter, 1-3 messages each): the server never fails, counts every
    input once, passes every good event, writes no forged TSV line, logs no record value, and still
    answers afterwards."""
    chan = running.chan
    ingest = chan.stream_unary(
        SERVICE + "Ingest", request_serializer=None, response_deserializer=IngestResponse.FromString
    )
    filter_ = chan.stream_stream(
        SERVICE + "Filter", request_serializer=None, response_deserializer=EventBatch.FromString
    )
    stats_rpc = chan.unary_unary(
        SERVICE + "Stats", request_serializer=None, response_deserializer=StatsResponse.FromString
    )
    tally = Tally()
    first = stats_rpc(StatsRequest().SerializeToString(), timeout=30)

    def one(example: tuple[str, list[Request]]) -> None:
        method, reqs = example
        n = sum(tally.rpcs.values())
        expected = [expect(r) for r in reqs]
        inputs = sum(e.inputs for e in expected)
        known = sum(e.events_in for e in expected)
        refused = sum(e.refused for e in expected)
        datas = [r.data for r in reqs]
        try:
            if method == "Ingest":
                resp = ingest(iter(datas), timeout=30)
                got_in, got_dead = resp.accepted, resp.dead_lettered
                check(got_in == known, f"rpc {n} (Ingest): {got_in} events in, expected {known}")
                check(
                    got_in + got_dead - refused == inputs,
                    f"rpc {n} (Ingest): {got_in} in + {got_dead} dead ({refused} refused by the sink), {inputs} inputs",
                )
                check(resp.delivered == known - refused, f"rpc {n} (Ingest): {resp.delivered} delivered")
                for r in reqs:
                    tally.good_sent.update(f"{MARK} good {s}" for s in r.good)
            else:
                responses = list(filter_(iter(datas), timeout=30))
                check(len(responses) >= len(reqs), f"rpc {n}: {len(responses)} responses to {len(reqs)} requests")
                got_in = sum(len(b.events) for b in responses)  # passthrough: every event that went in comes back
                check(got_in == known, f"rpc {n} (Filter): {got_in} events back, expected {known}")
                back = Counter((m.seq, m.query) for b in responses for m in b.events)
                for r in reqs:
                    missing = [s for s in r.good if back[(s, f"{MARK} good {s}")] != 1]
                    check(not missing, f"rpc {n}: {len(missing)} good events did not come back once")
                tally.good_back += sum(len(r.good) for r in reqs)
        except grpc.RpcError as exc:
            raise AssertionError(f"rpc {n} ({method}): {exc.code()} {exc.details()}") from None
        tally.rpcs[method] += 1
        tally.messages += len(reqs)
        tally.inputs += inputs
        tally.events_in += known
        tally.dead += inputs - known

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        verbosity=Verbosity.quiet,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )
    @given(rpcs())
    def run(example: tuple[str, list[Request]]) -> None:
        one(example)

    with structlog.testing.capture_logs() as logs:
        run()

    # the server still answers: health, Stats, and a good batch on both RPCs
    assert wait_serving(chan, 10)
    good = field(1, good_event(7)) + field(2, b"after")
    assert ingest(iter([good]), timeout=30).accepted == 1
    back = list(filter_(iter([good]), timeout=30))
    assert [m.seq for b in back for m in b.events] == [7]
    tally.good_sent[f"{MARK} good 7"] += 1
    final = stats_rpc(StatsRequest().SerializeToString(), timeout=30)
    # every input counted once, on both RPCs: the server's counters moved by what the inputs must give
    moved_in = final.events_in - first.events_in - 2
    moved_dead = _source_dead(final) - _source_dead(first)
    check(moved_in == tally.events_in, f"Stats: {moved_in} events in, expected {tally.events_in}")
    check(moved_dead == tally.dead, f"Stats: {moved_dead} dead letters of the source, expected {tally.dead}")

    running.pipeline.flush_sinks()
    lines = (tmp_path / "out.tsv").read_text(encoding="utf-8").split("\n")
    check(lines[0] == "AnonID\tQuery\tQueryTime\tItemRank\tClickURL" and lines[-1] == "", "the TSV header and end")
    rows = lines[1:-1]
    forged = sum(1 for row in rows if row.count("\t") != 4 or "\r" in row)
    check(forged == 0, f"{forged} TSV lines that are not one five-column record")
    written = Counter(row.split("\t")[1] for row in rows)
    missing = sum(1 for q, n in tally.good_sent.items() if written[q] != n)
    check(missing == 0, f"{missing} good Ingest events not written exactly once")
    leaked = [e.get("event") for e in logs if MARK in json.dumps(e, default=repr)]
    reasons = dict(sorted(final.dead_letters.items()))
    print(
        f"gRPC source: rpcs={dict(tally.rpcs)} messages={tally.messages} inputs counted={tally.inputs} "
        f"events in={tally.events_in} dead-lettered={tally.dead} by reason={reasons} "
        f"good sent={sum(tally.good_sent.values())}+{tally.good_back} TSV lines={len(rows)}"
    )
    assert not leaked, f"log events carrying a record value: {leaked}"
    assert sum(tally.rpcs.values()) >= EXAMPLES
    assert tally.dead >= 10_000, "at least 10,000 malformed inputs"


# --- defects the generated inputs ran into (runtime code outside this suite's reach: reported) ---------


def _ingest(running: Running) -> grpc.StreamUnaryMultiCallable:
    return running.chan.stream_unary(
        SERVICE + "Ingest", request_serializer=None, response_deserializer=IngestResponse.FromString
    )


def test_an_event_the_sink_refuses_is_not_reported_as_delivered(running: Running, tmp_path: Path) -> None:
    good = QueryEvent(user="1", query=f"{MARK} fine").SerializeToString()
    forged = QueryEvent(user="2", query=f"{MARK} x", rank="1\t2").SerializeToString()
    resp = _ingest(running)(iter([field(1, good) + field(1, forged)]), timeout=30)
    running.pipeline.flush_sinks()
    assert (tmp_path / "out.tsv").read_text(encoding="utf-8").count("\n") == 2  # the header and one record
    assert resp.accepted == 2
    assert resp.delivered + resp.dead_lettered == 2 and resp.delivered == 1


def test_a_message_with_field_number_0_is_a_counted_dead_letter(running: Running) -> None:
    resp = _ingest(running)(iter([b"\x00\x20"]), timeout=30)
    assert resp.dead_lettered == 1


def test_a_group_field_does_not_make_one_bad_event_take_its_batch(running: Running) -> None:
    good = QueryEvent(user="1", query=f"{MARK} fine").SerializeToString()
    group = varint(9 << 3 | 3) + varint(9 << 3 | 4)
    resp = _ingest(running)(iter([field(1, good) + field(1, _with_invalid_utf8(2, b"\xff")) + group]), timeout=30)
    assert (resp.accepted, resp.dead_lettered) == (1, 1)
