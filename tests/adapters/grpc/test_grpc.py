"""The gRPC service: Filter round trips, Ingest acknowledgements, Stats, health, bad input, GetProfile."""

from __future__ import annotations

import json
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers import wait_until
from helpers.grpc_sidecar import ROOT, SHARED_DATA, HoldAll, Profiles, sidecar, write_config

from adapters.grpc.client import channel, get_profile, get_stats
from adapters.grpc.codec import EventBatch, QueryEvent
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import IngestResponse
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub
from sidecar.tools.generate.synthetic import generate_log
from sidecar.tools.send import send_file

TSV_CASES = [
    # header, empty rank/url, unicode, tabs-only fields, CRLF line, no final newline
    "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n"
    "1\tweather\t2006-03-01 07:17:12\t\t\n"
    "1\tcafé ☕ 東京\t2006-03-01 07:18:00\t1\thttp://www.example.com\n"
    "2\tjobs \t2006-03-02 10:00:00\t10\thttp://jobs.example.org\r\n"
    "3\t-\t2006-03-03 11:00:00\t\t",
    "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n",
]


#: the server option that lets the `reader` fixture's token read profiles
READER = "profile_reader_token_env: QUERYLOG_TEST_READER"


def _passthrough(tmp_path: Path, src: Path, config: Path, batch_size: int = 1000, suffix: str = ".tsv") -> Path:
    out = tmp_path / f"out{suffix}"
    with sidecar(config) as sc:
        from sidecar.config import load_config

        summary = send_file(sc.chan, str(src), str(out), load_config(config).sidecar.schema, batch_size)
    assert summary.sent == summary.received
    return out


@pytest.mark.parametrize("text", TSV_CASES)
def test_filter_passthrough_is_byte_identical_for_edge_cases(tmp_path: Path, text: str) -> None:
    """Header, empty fields, unicode, CRLF and a missing final newline survive the round trip."""
    src = tmp_path / "in.tsv"
    src.write_bytes(text.encode("utf-8"))
    out = _passthrough(tmp_path, src, ROOT / "config" / "passthrough.yaml", batch_size=2)
    assert out.read_bytes() == src.read_bytes()


def test_filter_passthrough_generated_log(tmp_path: Path) -> None:
    """A generated log streamed through Filter with config/passthrough.yaml comes back byte for byte."""
    src = tmp_path / "in.tsv"
    with src.open("w", encoding="utf-8") as f:
        generate_log(300, 11, f)
    for batch_size in (1, 100, 1000):
        out = _passthrough(tmp_path, src, ROOT / "config" / "passthrough.yaml", batch_size)
        assert out.read_bytes() == src.read_bytes()


def test_filter_passthrough_jsonl_keeps_types_and_unknown_keys(tmp_path: Path) -> None:
    """JSON lines: integer ranks stay integers, unknown keys and key order are kept, no final newline kept."""
    lines = [
        '{"AnonID": 1, "Query": "weather", "QueryTime": "2006-03-01", "ItemRank": 2, "x": [1, 2]}',
        '{"extra":"é","AnonID":"7","Query":"maps","ClickURL":null}',
        '{"AnonID": 3, "Query": "news"}',
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines), encoding="utf-8")
    out = _passthrough(tmp_path, src, ROOT / "config" / "passthrough.yaml", 2, ".jsonl")
    assert out.read_bytes() == src.read_bytes()


def test_filter_passthrough_aol_sample(tmp_path: Path) -> None:
    """The real AOL sample through Filter over gRPC with config/passthrough.yaml is byte-identical."""
    src = SHARED_DATA / "aol-sample.tsv"
    if not src.is_file():
        pytest.skip("../shared/data is absent")
    out = _passthrough(tmp_path, src, ROOT / "config" / "passthrough.yaml")
    assert out.read_bytes() == src.read_bytes()


def test_filter_applies_the_chain(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Changed roles are written back, dropped events do not come back, seq and attributes ride along."""
    monkeypatch.setenv("TEST_HMAC_KEY", "k" * 32)
    config = write_config(
        tmp_path,
        "filters:\n"
        "  - drop: {rules: [{role: query, equals: ['-']}]}\n"
        "  - pseudonymize: {key_env: TEST_HMAC_KEY}\n"
        "  - truncate_url: {}\n",
    )
    batch = EventBatch(batch_id="b1")
    batch.events.add(user="1", query="weather", url="http://www.example.com/a?b=c", seq=10, attributes={"k": "v"})
    batch.events.add(user="2", query="-", seq=11)
    batch.events.add(user="1", query="maps", time="2006-03-01 00:00:00", seq=12)
    with sidecar(config) as sc:
        (resp,) = list(QueryLogFilterStub(sc.chan).Filter(iter([batch])))
        stats = get_stats(sc.chan)
    assert resp.batch_id == "b1"
    assert [m.seq for m in resp.events] == [10, 12]
    a, b = resp.events
    assert a.user == b.user and a.user != "1" and len(a.user) == 16
    assert a.url == "http://www.example.com" and dict(a.attributes) == {"k": "v"}
    assert (b.query, b.time, b.url) == ("maps", "2006-03-01 00:00:00", "")
    assert (stats.events_in, stats.events_out, stats.events_dropped) == (3, 2, 1)
    by_name = {f.name: f for f in stats.filters}
    assert by_name["drop"].counts["dropped_rule_0"] == 1
    assert by_name["pseudonymize"].events_in == 2
    assert by_name["truncate_url"].counts["truncated"] == 1


def test_bad_input_is_dead_lettered_and_the_stream_goes_on(tmp_path: Path) -> None:
    """Garbage bytes and an oversized event are counted; good events still come back, and so do a blank and an
    empty query (valid events: issue 11, defect 13)."""
    config = write_config(tmp_path, "limits: {max_record_bytes: 1024}\nfilters: []\n")
    good = EventBatch(batch_id="ok")
    good.events.add(user="1", query="weather", seq=1)
    mixed = EventBatch(batch_id="mixed")
    mixed.events.add(user="1", query="   ", seq=2)
    mixed.events.add(user="1", query="x" * 5000, seq=3)
    mixed.events.add(user="1", query="maps", seq=4)
    mixed.events.add(user="1", query="", seq=5)
    requests = [b"\xff\xff\xff\xff garbage", good.SerializeToString(), mixed.SerializeToString()]
    with sidecar(config) as sc:
        raw = sc.chan.stream_stream(
            "/querylog.v1.QueryLogFilter/Filter",
            request_serializer=lambda b: b,
            response_deserializer=EventBatch.FromString,
        )
        responses = list(raw(iter(requests)))
        stats = get_stats(sc.chan)
        dead_file = sc.pipeline.config.dead_letter_path
    assert [[m.seq for m in r.events] for r in responses] == [[], [1], [2, 4, 5]]
    assert [m.query for m in responses[2].events] == ["   ", "maps", ""]
    assert dict(stats.dead_letters) == {"invalid_message": 1, "oversized_record": 1}
    assert stats.events_dead_lettered == 2
    assert stats.events_in == 4
    assert dead_file is not None
    reasons = [json.loads(line)["reason"] for line in dead_file.read_text().splitlines()]
    assert sorted(reasons) == ["invalid_message", "oversized_record"]


def test_ingest_acknowledges_after_delivery(tmp_path: Path) -> None:
    """Ingest answers only once the file sink holds every event (flushed), with the counts."""
    config = write_config(
        tmp_path,
        "limits: {max_record_bytes: 1024}\n"
        "filters:\n  - drop: {rules: [{role: query, equals: ['-']}]}\nsinks:\n  - file: {path: delivered.tsv}\n",
    )
    batches = []
    for b in range(3):
        batch = EventBatch()
        for i in range(100):
            batch.events.add(
                user=str(i),
                query="-" if i == 0 else f"query {b} {i}",
                rank="1",
                seq=b * 100 + i + 1,
                attributes={"Extra": "kept"} if i == 1 else {},
            )
        batches.append(batch)
    last = EventBatch()
    last.events.add(user="1", query="")  # an empty query: valid, delivered
    last.events.add(user="1", query="x" * 5000)  # over max_record_bytes: dead-lettered
    batches.append(last)
    with sidecar(config) as sc:
        resp: IngestResponse = QueryLogFilterStub(sc.chan).Ingest(iter(batches))
        # Acknowledged means delivered: the file is complete now, before the server stops.
        lines = (tmp_path / "delivered.tsv").read_text(encoding="utf-8").splitlines()
    assert (resp.accepted, resp.delivered, resp.dropped, resp.held, resp.dead_lettered) == (301, 298, 3, 0, 1)
    assert lines[0] == "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
    assert len(lines) == 1 + 298
    assert lines[1] == "1\tquery 0 1\t\t1\t"
    assert lines[-1] == "1\t\t\t\t"


def test_ingest_without_sinks_is_refused(tmp_path: Path) -> None:
    """Ingest on a sidecar whose config has no sinks fails with FAILED_PRECONDITION: nothing could be delivered, so
    nothing is acknowledged."""
    with sidecar(write_config(tmp_path)) as sc, pytest.raises(grpc.RpcError) as err:
        QueryLogFilterStub(sc.chan).Ingest(iter([EventBatch()]))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION


def test_health_is_serving(tmp_path: Path) -> None:
    """The standard health service answers SERVING both for the empty service name (the whole server) and for
    querylog.v1.QueryLogFilter."""
    with sidecar(write_config(tmp_path)) as sc:
        stub = health_pb2_grpc.HealthStub(sc.chan)
        for service in ("", "querylog.v1.QueryLogFilter"):
            resp = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=5)
            assert resp.status == health_pb2.HealthCheckResponse.SERVING


def test_get_profile_without_profile_filter(tmp_path: Path, reader: str) -> None:
    """GetProfile on a chain without a filter that has get_profile fails with FAILED_PRECONDITION and the details `no
    profile filter in the chain`."""
    config = write_config(tmp_path, f"server: {{{READER}}}\nfilters: []\n")
    with sidecar(config) as sc, channel(sc.address, token=reader) as rc, pytest.raises(grpc.RpcError) as err:
        get_profile(rc, "42")
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert err.value.details() == "no profile filter in the chain"


def test_get_profile_from_a_filter_with_get_profile(tmp_path: Path, reader: str) -> None:
    """Any filter with get_profile serves it (here with `profile_lookup: raw`); an unknown user is NOT_FOUND (without
    the id in the message)."""
    config = write_config(tmp_path, f"server: {{profile_lookup: raw, {READER}}}\nfilters: []\n")
    with sidecar(config, extra_filters=(Profiles(),)) as sc, channel(sc.address, token=reader) as rc:
        resp = get_profile(rc, "42")
        with pytest.raises(grpc.RpcError) as err:
            get_profile(rc, "unknown-user-77")
    assert dict(resp.counts) == {"Sports": 3, "Health": 1} and resp.total == 4
    assert resp.weights["Sports"] == pytest.approx(0.75)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert "unknown-user-77" not in (err.value.details() or "")


def test_timer_released_events_come_back_on_the_next_filter_response(tmp_path: Path) -> None:
    """With `filter_release: any_stream` (single-tenant), events a buffering filter releases come back in the next
    Filter response, not lost (each request asks the filters to release: the source runs no timer of its own)."""
    config = write_config(tmp_path, "server: {filter_release: any_stream}\nfilters: []\n")
    hold = HoldAll()
    first = EventBatch(batch_id="1")
    first.events.add(user="1", query="weather", seq=1)
    second = EventBatch(batch_id="2")
    second.events.add(user="2", query="maps", seq=2)

    def requests():  # local request generator
        yield first
        yield second
        yield EventBatch(batch_id="3")

    with sidecar(config, extra_filters=(hold,)) as sc:
        responses = list(QueryLogFilterStub(sc.chan).Filter(requests()))
        stats = get_stats(sc.chan)
    assert [[m.seq for m in r.events] for r in responses] == [[], [1], [2]]
    assert stats.events_out == 2 and stats.events_held == 0


def test_timer_released_events_go_to_sinks_when_configured(tmp_path: Path) -> None:
    """With a file sink configured, an event Ingest reports as held (accepted 1, delivered 0, held 1) is written to
    the sink's file once the runtime's release timer (every 0.05 s) releases it."""
    config = write_config(tmp_path, "flush_interval_seconds: 0.05\nsinks:\n  - file: {path: out.tsv}\n")
    hold = HoldAll()
    batch = EventBatch()
    batch.events.add(user="5", query="weather", seq=1)
    with sidecar(config, extra_filters=(hold,)) as sc:
        resp = QueryLogFilterStub(sc.chan).Ingest(iter([batch]))
        assert (resp.accepted, resp.delivered, resp.held) == (1, 0, 1)
        path = tmp_path / "out.tsv"
        wait_until(lambda: path.exists() and "weather" in path.read_text(), what="the timer's release in the file")
        assert path.read_text().splitlines()[1:] == ["5\tweather\t\t\t"]


def test_held_events_are_flushed_at_stop_and_not_lost(tmp_path: Path) -> None:
    """With `filter_release: any_stream` and no sinks, events still held at stop are released (final flush) into the
    dead-letter file."""
    config = write_config(tmp_path, "flush_interval_seconds: 3600\nserver: {filter_release: any_stream}\nfilters: []\n")
    batch = EventBatch()
    batch.events.add(user="5", query="weather", seq=1)
    with sidecar(config, extra_filters=(HoldAll(),), stop=False) as sc:
        list(QueryLogFilterStub(sc.chan).Filter(iter([batch])))
    sc.source.stop(grace=1.0)
    sc.pipeline.release(final=True)  # what serve does once every source stopped: the one final release
    counts = sc.pipeline.stats()
    sc.pipeline.close()  # the source leaves the runtime open; its owner closes it (dead letters flushed)
    assert counts["events_out"] == 1
    dead = sc.pipeline.config.dead_letter_path
    assert dead is not None
    assert [json.loads(x)["reason"] for x in dead.read_text().splitlines()] == ["undelivered_at_shutdown"]


def test_stats_reports_filter_extras(tmp_path: Path) -> None:
    """Stats carries a filter's stats() dict as the extras of that filter's entry, under its name: nested counts and
    plain numbers alike."""

    class WithExtras(Profiles):
        NAME = "with_extras"

        def stats(self):  # test double
            return {"k": {"Sports": 5}, "ratio": 0.5}

    with sidecar(write_config(tmp_path), extra_filters=(WithExtras(),)) as sc:
        stats = get_stats(sc.chan)
    (f,) = stats.filters
    assert f.name == "with_extras"
    assert f.extra["k"]["Sports"] == 5 and f.extra["ratio"] == 0.5


def test_fresh_message_from_a_tsv_event_carries_non_role_fields() -> None:
    """ProtoCodec.encode of an event decoded from TSV builds a new QueryEvent: the five roles as strings (empty for
    empty fields) and every non-role column (Ip) as an attribute."""
    from adapters.grpc.codec import ProtoCodec
    from sidecar.codecs import SchemaConfig, TsvCodec

    tsv = TsvCodec(SchemaConfig(header=False, columns=("AnonID", "Query", "QueryTime", "ItemRank", "ClickURL", "Ip")))
    ev = tsv.decode("9\tmaps\t2006\t\t\t10.0.0.1", "\n")
    m = ProtoCodec().encode(ev)
    assert isinstance(m, QueryEvent)
    assert (m.user, m.query, m.time, m.rank, m.url) == ("9", "maps", "2006", "", "")
    assert dict(m.attributes) == {"Ip": "10.0.0.1"}


def test_cancelled_stream_leaves_the_server_serving(tmp_path: Path) -> None:
    """A client that goes away mid-stream is not an error; the next stream works."""
    import threading

    gate = threading.Event()

    def slow():  # local request generator
        batch = EventBatch()
        batch.events.add(user="1", query="weather", seq=1)
        yield batch
        gate.wait(5)
        yield batch

    with sidecar(write_config(tmp_path)) as sc:
        call = QueryLogFilterStub(sc.chan).Filter(slow())
        assert [m.seq for m in next(call).events] == [1]
        call.cancel()
        gate.set()
        batch = EventBatch()
        batch.events.add(user="2", query="maps", seq=2)
        (resp,) = list(QueryLogFilterStub(sc.chan).Filter(iter([batch])))
        assert [m.seq for m in resp.events] == [2]
        assert get_stats(sc.chan).events_in == 2


def test_get_profile_served_by_the_profile_filter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reader: str) -> None:
    """The registered `profile` filter after `pseudonymize` answers GetProfile over gRPC for the pseudonym the
    sidecar emitted; Stats carries its extras."""
    monkeypatch.setenv("TEST_HMAC_KEY", "k" * 32)
    config = write_config(
        tmp_path,
        f"server: {{{READER}}}\nfilters:\n  - pseudonymize: {{key_env: TEST_HMAC_KEY}}\n  - profile: {{}}\n",
    )
    batch = EventBatch()
    for i in range(3):
        batch.events.add(user="u1", query=f"weather {i}", seq=i + 1)
    batch.events.add(user="u2", query="maps", seq=9)
    with sidecar(config) as sc, channel(sc.address, token=reader) as rc:
        (out,) = list(QueryLogFilterStub(sc.chan).Filter(iter([batch])))
        resp = get_profile(rc, out.events[0].user)
        stats = get_stats(sc.chan)
        with pytest.raises(grpc.RpcError) as err:
            get_profile(rc, "nobody")
    assert resp.total == 3 and sum(resp.counts.values()) == 3
    assert sum(resp.weights.values()) == pytest.approx(1.0)
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    assert [f.name for f in stats.filters] == ["pseudonymize", "profile"]
    assert stats.filters[1].extra["profiles"] == 2


def test_category_buffer_over_grpc_holds_repairs_and_releases(tmp_path: Path) -> None:
    """The real buffering filter with `filter_release: any_stream`: events come back re-paired (new Event objects
    sharing messages), held ones later; every query comes back once, never with its original user."""
    config = write_config(
        tmp_path,
        "server: {filter_release: any_stream}\n"
        "filters:\n  - category_buffer: {k: 2, unknown: bucket, avoid_repeat_pairs: 0}\n",
    )
    batches = []
    for b in range(4):
        batch = EventBatch(batch_id=str(b))
        for i in range(5):
            n = b * 5 + i
            batch.events.add(user=f"u{n % 4}", query=f"query {n}", seq=n + 1)
        batches.append(batch)
    with sidecar(config) as sc:
        responses = list(QueryLogFilterStub(sc.chan).Filter(iter(batches)))
        stats = get_stats(sc.chan)
    back = [m for r in responses for m in r.events]
    assert back and stats.events_out == len(back)
    assert stats.events_held == 20 - len(back) - stats.events_dropped
    queries = [m.query for m in back]
    assert len(set(queries)) == len(queries)
    for m in back:  # the message is the query's own (seq matches the query), the user is another one
        n = int(m.query.split()[1])
        assert m.seq == n + 1
        assert m.user != f"u{n % 4}"


def test_encode_without_a_kept_message_builds_a_fresh_one() -> None:
    """An event restored from a state store (record lost) still encodes."""
    from adapters.grpc.codec import ProtoCodec
    from sidecar.api import Event

    codec = ProtoCodec()
    m = codec.encode(Event("u", "q", None, "3", None, None, None, codec))
    assert (m.user, m.query, m.rank, dict(m.attributes)) == ("u", "q", "3", {})


def test_a_second_server_on_a_busy_port_fails(tmp_path: Path) -> None:
    """No silent port sharing (SO_REUSEPORT off): the second sidecar cannot bind."""
    from adapters.grpc.source import GrpcSource
    from sidecar.config import load_config
    from sidecar.pipeline import Pipeline

    config = write_config(tmp_path)
    with sidecar(config) as sc:
        cfg = load_config(config)
        pipeline = Pipeline(cfg)
        try:
            with pytest.raises((OSError, RuntimeError)):
                spec = cfg.source("grpc")
                assert spec is not None
                GrpcSource(spec.config, pipeline.ctx, listen=sc.address).start(pipeline)
        finally:
            pipeline.close()


def test_a_failing_filter_is_internal_without_values(tmp_path: Path, reader: str) -> None:
    """A filter bug ends the RPC with INTERNAL and the exception type only; the server keeps serving."""
    from structlog.testing import capture_logs

    class Boom(Profiles):
        NAME = "boom"

        def process(self, batch):  # test double
            raise ValueError(f"bad value {batch[0].query}")

        def get_profile(self, user: str) -> dict[str, int] | None:
            raise KeyError(user)

    batch = EventBatch()
    batch.events.add(user="secret-user", query="secret query text", seq=1)
    config = write_config(tmp_path, f"server: {{profile_lookup: raw, {READER}}}\nfilters: []\n")
    with sidecar(config, extra_filters=(Boom(),)) as sc, capture_logs() as logs:
        with pytest.raises(grpc.RpcError) as err:
            list(QueryLogFilterStub(sc.chan).Filter(iter([batch])))
        with pytest.raises(grpc.RpcError) as err2, channel(sc.address, token=reader) as rc:
            get_profile(rc, "secret-user")
        assert get_stats(sc.chan).events_in == 1
    assert err.value.code() == err2.value.code() == grpc.StatusCode.INTERNAL
    text = repr(logs) + (err.value.details() or "") + (err2.value.details() or "")
    assert "ValueError" in text and "KeyError" in text
    assert "secret" not in text


def test_ingest_writes_the_configured_schema(tmp_path: Path) -> None:
    """A sink fed from gRPC writes the config's columns (role fields plus carried attributes)."""
    config = write_config(
        tmp_path,
        "schema:\n  format: tsv\n  header: false\n  columns: [ip, uid, q]\n"
        "  roles: {user: uid, query: q, time: null, rank: null, url: null}\n"
        "sinks:\n  - file: {path: out.tsv}\n",
    )
    batch = EventBatch()
    batch.events.add(user="7", query="weather", attributes={"ip": "10.1.2.3"})
    with sidecar(config) as sc:
        resp = QueryLogFilterStub(sc.chan).Ingest(iter([batch]))
    assert resp.delivered == 1
    assert (tmp_path / "out.tsv").read_text() == "10.1.2.3\t7\tweather\n"


@pytest.mark.parametrize("method", ["GetProfile", "Stats"])
def test_garbage_to_unary_methods_is_invalid_argument(tmp_path: Path, method: str) -> None:
    """Bytes that are no request message get INVALID_ARGUMENT (not INTERNAL) and the server keeps serving
    (issue 11, defect 18)."""
    with sidecar(write_config(tmp_path)) as sc:
        call = sc.chan.unary_unary(f"/querylog.v1.QueryLogFilter/{method}")
        with pytest.raises(grpc.RpcError) as err:
            call(b"\xff\xff\xff\xff garbage", timeout=5)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # RpcError is also a Call
        stub = health_pb2_grpc.HealthStub(sc.chan)
        assert stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status == 1


@pytest.mark.parametrize(
    ("role", "value"),
    [
        ("time", "2006-03-01 10:00:00\n777\tjohn smith 555-123-4567\t\t\t"),
        ("rank", "1\textra\tcolumns"),
        ("user", "8\r9"),
        ("url", "http://a.com\nforged"),
        ("query", "two\tcolumns"),
    ],
)
def test_a_field_value_cannot_forge_tsv_records(tmp_path: Path, role: str, value: str) -> None:
    """A tab, line feed or carriage return in any gRPC field never reaches a TSV sink: that event goes to the
    dead-letter file (`field_breaks_framing`) and the good events of the batch are written (issue 11, defect 3)."""
    config = write_config(tmp_path, "sinks:\n  - file: {path: out.tsv}\n")
    batch = EventBatch()
    batch.events.add(user="1", query="weather", time="2006-03-01 09:00:00")
    bad = batch.events.add(user="2", query="news", time="2006-03-01 09:30:00")
    setattr(bad, role, value)
    batch.events.add(user="3", query="maps", time="2006-03-01 11:00:00")
    with sidecar(config) as sc:
        QueryLogFilterStub(sc.chan).Ingest(iter([batch]))
        dead = sc.pipeline.dead.counts
    lines = (tmp_path / "out.tsv").read_text().splitlines()
    assert [line.split("\t")[0] for line in lines[1:]] == ["1", "3"]
    assert all(line.count("\t") == 4 for line in lines)
    assert "john smith" not in (tmp_path / "out.tsv").read_text()
    assert dead["field_breaks_framing"] == 1


def test_one_invalid_utf8_event_does_not_discard_its_batch(tmp_path: Path) -> None:
    """A batch where one event has invalid UTF-8 in a string field: that event is dead-lettered with its bytes
    and the others go through (issue 11, defect 7)."""
    good = [QueryEvent(user=str(i), query=f"query {i}", seq=i).SerializeToString() for i in range(3)]
    broken = (
        QueryEvent(user="9", query="PLACEHOLDER", seq=9).SerializeToString().replace(b"PLACEHOLDER", b"bad \xff\xfe")
    )
    wire = b"".join(b"\x0a" + bytes([len(e)]) + e for e in [good[0], broken, good[1], good[2]])
    wire += b"\x12\x02b7"  # batch_id "b7"
    with sidecar(write_config(tmp_path)) as sc:
        call = sc.chan.stream_stream("/querylog.v1.QueryLogFilter/Filter", response_deserializer=EventBatch.FromString)
        (response,) = list(call(iter([wire]), timeout=10))
        dead = dict(sc.pipeline.dead.counts)
    assert [e.query for e in response.events] == ["query 0", "query 1", "query 2"]
    assert response.batch_id == "b7"
    assert dead == {"invalid_event": 1}
    lines = [json.loads(x) for x in (tmp_path / "state" / "dead-letter.jsonl").read_text().splitlines()]
    assert [d["reason"] for d in lines] == ["invalid_event"] and "record_b64" in lines[0]
