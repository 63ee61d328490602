"""The ``vector`` sink against our ``vector`` source in another pipeline (no Vector binary is installable here):
byte-identical passthrough, typed round trips, the durable outbox through an outage, a restart and backpressure,
permanent refusals, TLS."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import grpc
import grpc.aio
import pytest
from helpers import wait_until
from helpers.certs import make_pki
from helpers.vector import ROLES_YAML, Running, log_event, port_of_a_stopped_sidecar, request, vector_sidecar

from adapters.vector.codec import VectorCodec, split_request
from adapters.vector.sink import VectorSink
from adapters.vector.stubs.event_pb2 import EventWrapper
from sidecar.api import Event, Filter, FilterConfig, RecordBatch, Sink, SinkConfig
from sidecar.codecs import JsonlCodec
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

FIXTURES = Path(__file__).resolve().parent / "testdata" / "fixtures"
FAST_RETRY = "retry_initial_seconds: 0.05, retry_max_seconds: 0.2, close_drain_seconds: 0"


class Keep(Sink[SinkConfig]):
    """Keeps the wire bytes of every event it is given (what the pipeline's vector source received)."""

    NAME = "keep"

    def __init__(self) -> None:
        super().__init__(SinkConfig(), None)  # a fake: no BuildContext
        self.codec = VectorCodec()
        self.wires: list[bytes] = []
        self.events: list[Event] = []

    def write(self, events: list[Event]) -> None:
        self.events.extend(events)
        self.wires.extend(e.record.wire for e in events)


class Upper(Filter[FilterConfig]):
    """Upper-cases every query (a stand-in for a scrubbing filter)."""

    NAME = "upper"

    def __init__(self) -> None:
        super().__init__(FilterConfig(), None)  # a fake: no BuildContext

    def process(self, batch: list[Event]) -> list[Event]:
        for ev in batch:
            ev.query = ev.query.upper()
        return batch


def downstream_config(folder: Path) -> Path:
    """B: a vector source into a JSON lines file (B/out.jsonl)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "b.yaml"
    path.write_text(
        "state_dir: state\n"
        + ROLES_YAML
        + "sources:\n  - vector: {}\nsinks:\n  - file: {path: out.jsonl, format: jsonl}\n",
        encoding="utf-8",
    )
    return path


def upstream_config(folder: Path, sink_options: str) -> Path:
    """A: a vector source into a vector sink with ``sink_options``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "a.yaml"
    path.write_text(
        "state_dir: state\n" + ROLES_YAML + f"sources:\n  - vector: {{}}\nsinks:\n  - vector: {{{sink_options}}}\n",
        encoding="utf-8",
    )
    return path


def vector_sink(a: Running) -> VectorSink:
    (sink,) = [s for s in a.pipeline.sinks if isinstance(s, VectorSink)]
    return sink


def downstream_lines(folder: Path) -> list[dict[str, Any]]:
    out = folder / "out.jsonl"
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] if out.exists() else []


def good_logs(data: bytes) -> list[bytes]:
    out = []
    for w in split_request(data):
        try:
            e = EventWrapper.FromString(w)
        except Exception:
            continue
        fields = e.log.value.map.fields if e.log.HasField("value") else e.log.fields
        if e.WhichOneof("event") == "log" and "message" in fields and "user_id" in fields:
            out.append(w)
    return out


def events(n: int, start: int = 0) -> bytes:
    return request([log_event({"user_id": f"u{i}", "message": f"query {i}", "n": i}) for i in range(start, start + n)])


def test_passthrough_is_byte_identical_between_two_pipelines(tmp_path: Path) -> None:
    """Every fixture, sent into A (vector source -> no filter -> vector sink) arrives at B's vector source as the
    very bytes of each log event (metadata, unknown fields and map order included), and B's file gets them."""
    keep = Keep()
    with vector_sidecar(downstream_config(tmp_path / "b"), extra_sinks=[keep]) as b:
        with vector_sidecar(upstream_config(tmp_path / "a", f"address: '{b.address}', batch_size: 2")) as a:
            sent: list[bytes] = []
            for fixture in sorted(FIXTURES.glob("*.bin")):
                data = fixture.read_bytes()
                assert a.push(data) == b""
                sent += good_logs(data)
            assert vector_sink(a).outbox.drain(15)
        assert keep.wires == sent
    assert len(downstream_lines(tmp_path / "b")) == len(sent)


def test_a_changed_query_is_the_only_change_downstream(tmp_path: Path) -> None:
    """With a filter that changes the query, B receives each event with the new query and every other value
    (integers, floats, bytes, timestamps to the nanosecond, nested values, metadata) as it was."""
    keep = Keep()
    original = (FIXTURES / "typed_log.bin").read_bytes()
    with vector_sidecar(downstream_config(tmp_path / "b"), extra_sinks=[keep]) as b:
        config = upstream_config(tmp_path / "a", f"address: '{b.address}'")
        with vector_sidecar(config, extra_filters=[Upper()]) as a:
            assert a.push(original) == b""
            assert vector_sink(a).outbox.drain(15)
    ((before,),) = [[EventWrapper.FromString(w) for w in split_request(original)]]
    after = EventWrapper.FromString(keep.wires[0])
    b_map, a_map = before.log.value.map.fields, after.log.value.map.fields
    assert a_map["message"].raw_bytes == b"CHEAP FLIGHTS TO LISBON"
    assert set(a_map) == set(b_map)
    for key in b_map:
        if key != "message":
            assert a_map[key] == b_map[key], key
    assert (a_map["timestamp"].timestamp.seconds, a_map["timestamp"].timestamp.nanos) == (1714564800, 123456789)
    assert a_map["trace_id"].raw_bytes == bytes.fromhex("00ff10ee")


def test_events_of_another_format_become_typed_logs(tmp_path: Path) -> None:
    """JSON lines handed to A's runtime leave through the vector sink as logs with typed values (a JSON integer
    an integer, a float a float, true a boolean, null a null, nested objects maps); a value Vector cannot carry
    (an integer beyond int64) is dead-lettered and the rest go on."""
    keep = Keep()
    with vector_sidecar(downstream_config(tmp_path / "b"), extra_sinks=[keep]) as b:
        cfg = load_config(upstream_config(tmp_path / "a", f"address: '{b.address}'"))
        pipeline = Pipeline(cfg, seed=1)
        try:
            codec = JsonlCodec(cfg.sidecar.schema)
            records = [
                '{"user_id":1,"message":"a","score":0.5,"ok":true,"x":null,"o":{"k":[1,"two"]}}',
                '{"user_id":18446744073709551616,"message":"too big a user"}',
                '{"user_id":"u3","message":"c"}',
            ]
            receipt = pipeline.receive(RecordBatch(records, codec, "test"))
            assert receipt.accepted == 3
            assert pipeline.sinks[0].outbox.drain(15)
            assert pipeline.dead.counts == {"integer_out_of_range": 1}
        finally:
            pipeline.close()
    first = EventWrapper.FromString(keep.wires[0]).log.value.map.fields
    assert [first[k].WhichOneof("kind") for k in ("user_id", "message", "score", "ok", "x", "o")] == [
        "integer",
        "raw_bytes",
        "float",
        "boolean",
        "null",
        "map",
    ]
    assert [e.query for e in keep.events] == ["a", "c"]


def test_outage_fills_the_outbox_then_backpressure_then_recovery(tmp_path: Path) -> None:
    """With B down, A acknowledges while its outbox has room (the batches are durable there), then answers
    RESOURCE_EXHAUSTED (Vector retries); when B comes up the outbox drains in order and A acknowledges again."""
    port = port_of_a_stopped_sidecar(downstream_config(tmp_path / "b"))  # B is down
    sink_options = f"address: '127.0.0.1:{port}', outbox_max_batches: 2, {FAST_RETRY}"
    with vector_sidecar(upstream_config(tmp_path / "a", sink_options)) as a:
        outbox = vector_sink(a).outbox
        assert a.push(events(2, 0)) == b""
        assert a.push(events(2, 2)) == b""
        assert outbox.pending().batches == 2
        with pytest.raises(grpc.RpcError) as err:
            a.push(events(2, 4))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        with vector_sidecar(downstream_config(tmp_path / "b"), port=port):
            assert outbox.drain(20)
            assert a.push(events(2, 6)) == b""
            assert outbox.drain(20)
        assert outbox.stats()["retries"] >= 1
    got = [line["message"] for line in downstream_lines(tmp_path / "b")]
    assert got == [f"query {i}" for i in (0, 1, 2, 3, 6, 7)]


def test_undelivered_batches_survive_a_restart(tmp_path: Path) -> None:
    """Batches acknowledged upstream but not yet delivered stay in the state store when A stops; a new A on the
    same state sends them at start, before any new event."""
    port = port_of_a_stopped_sidecar(downstream_config(tmp_path / "b"))  # B is down
    config = upstream_config(tmp_path / "a", f"address: '127.0.0.1:{port}', {FAST_RETRY}")
    with vector_sidecar(config) as a:
        assert a.push(events(3)) == b""
        assert vector_sink(a).outbox.pending().events == 3
    with vector_sidecar(downstream_config(tmp_path / "b"), port=port), vector_sidecar(config) as again:
        assert vector_sink(again).outbox.drain(20)
    assert [line["message"] for line in downstream_lines(tmp_path / "b")] == ["query 0", "query 1", "query 2"]


@contextmanager
def refusing_server(code: grpc.StatusCode | None) -> Iterator[tuple[str, list[bytes]]]:
    """A vector.Vector server that answers every PushEvents with ``code`` (None: never answers); yields its
    address and the requests it got."""
    got: list[bytes] = []
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def push(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        got.append(request)
        if code is None:
            await asyncio.Event().wait()  # until the server stops
        await context.abort(code or grpc.StatusCode.UNAVAILABLE, "refused")
        return b""

    async def start() -> tuple[grpc.aio.Server, int]:
        server = grpc.aio.server()
        handler = grpc.method_handlers_generic_handler(
            "vector.Vector", {"PushEvents": grpc.unary_unary_rpc_method_handler(push)}
        )
        server.add_generic_rpc_handlers((handler,))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        return server, port

    server, port = asyncio.run_coroutine_threadsafe(start(), loop).result()
    try:
        yield f"127.0.0.1:{port}", got
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(0), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()


def test_permanent_refusal_is_dead_lettered_not_retried_forever(tmp_path: Path) -> None:
    """A batch the downstream refuses with a status Vector never retries (INVALID_ARGUMENT) goes to the
    dead-letter file (vector_rejected_invalid_argument) so later batches are not blocked behind it."""
    with refusing_server(grpc.StatusCode.INVALID_ARGUMENT) as (address, got):
        with vector_sidecar(upstream_config(tmp_path / "a", f"address: '{address}', {FAST_RETRY}")) as a:
            assert a.push(events(2)) == b""
            assert vector_sink(a).outbox.drain(15)
            assert a.pipeline.dead.counts == {"vector_rejected_invalid_argument": 1}
        assert len(got) == 1
    (letter,) = (tmp_path / "a" / "state" / "dead-letter.jsonl").read_text().splitlines()
    assert json.loads(letter)["reason"] == "vector_rejected_invalid_argument"


def test_retriable_refusal_is_retried(tmp_path: Path) -> None:
    """UNAVAILABLE from the downstream keeps the batch in the outbox and sends it again."""
    with refusing_server(grpc.StatusCode.UNAVAILABLE) as (address, got):
        with vector_sidecar(upstream_config(tmp_path / "a", f"address: '{address}', {FAST_RETRY}")) as a:
            assert a.push(events(1)) == b""
            wait_until(lambda: len(got) >= 3, what="three sends of the batch")
            assert vector_sink(a).outbox.pending().batches == 1
            assert not a.pipeline.dead.counts
        assert len(set(got)) == 1  # the same batch each time


def test_sink_over_tls(tmp_path: Path) -> None:
    """The sink with tls_ca_file (and gzip compression) delivers to a source with tls_cert_file/tls_key_file."""
    pki = make_pki(tmp_path / "pki")
    b_config = downstream_config(tmp_path / "b")
    text = b_config.read_text().replace(
        "- vector: {}", f"- vector: {{tls_cert_file: {pki.server.cert}, tls_key_file: {pki.server.key}}}"
    )
    b_config.write_text(text)
    with vector_sidecar(b_config) as b:
        sink_options = f"address: '{b.address}', tls_ca_file: {pki.ca}, tls_server_name: localhost, compression: true"
        with vector_sidecar(upstream_config(tmp_path / "a", sink_options)) as a:
            assert a.push(events(2)) == b""
            assert vector_sink(a).outbox.drain(15)
    assert [line["message"] for line in downstream_lines(tmp_path / "b")] == ["query 0", "query 1"]


def test_batches_are_cut_by_events_and_bytes(tmp_path: Path) -> None:
    """batch_size and max_batch_bytes bound each PushEventsRequest; flush sends the last partial batch."""
    port = port_of_a_stopped_sidecar(downstream_config(tmp_path / "b"))  # nothing listens there
    config = upstream_config(
        tmp_path / "a", f"address: '127.0.0.1:{port}', batch_size: 3, max_batch_bytes: 1024, close_drain_seconds: 0"
    )
    with vector_sidecar(config) as a:
        sink = vector_sink(a)
        sink.outbox.stop()
        small = request([log_event({"user_id": "u", "message": f"q{i}"}) for i in range(7)])
        big = request([log_event({"user_id": "u", "message": "x" * 700}) for _ in range(2)])
        assert a.push(small) == b""
        assert sink.outbox.pending().batches == 3  # 3 + 3 + 1
        assert a.push(big) == b""
        assert sink.outbox.pending().batches == 5  # one 700-byte event per batch
        assert sink.outbox.pending().events == 9


def test_close_does_not_wait_for_a_downstream_that_never_answers(tmp_path: Path) -> None:
    """Closing the sink cancels a PushEvents that has no reply (timeout_seconds: 60) instead of waiting for it;
    the batch stays in the outbox for the next start."""
    with refusing_server(None) as (address, got):
        config = upstream_config(tmp_path / "a", f"address: '{address}', timeout_seconds: 60, {FAST_RETRY}")
        with vector_sidecar(config) as a:
            assert a.push(events(2)) == b""
            wait_until(lambda: len(got) == 1, what="the PushEvents to reach the server")
            closing = threading.Thread(target=a.pipeline.close)
            closing.start()
            closing.join(20)
            assert not closing.is_alive(), "close waited for the call"
            a.pipeline.close = lambda: None  # closed above
        pipeline = Pipeline(load_config(config))
        try:
            assert pipeline.sinks[0].outbox.pending().events == 2
        finally:
            pipeline.close()


def test_events_held_by_category_buffer_survive_a_restart_with_their_types(tmp_path: Path) -> None:
    """A Vector event held by category_buffer (its record kept in the state store by the vector codec) is
    restored after a restart and, when released, reaches B as a typed log: the drawn user's user_id and ip (a
    user field, read and written through the codec), the query's own message, timestamp (to the nanosecond)
    and every other key."""

    def event(user: str, ip: str, query: str, nanos: int) -> EventWrapper:
        w = log_event({"user_id": user, "message": query, "ip": ip, "category": "Travel", "n": 1, "f": 0.5})
        stamp = w.log.value.map.fields["timestamp"].timestamp
        stamp.seconds, stamp.nanos = 1714564800, nanos
        return w

    keep = Keep()
    with vector_sidecar(downstream_config(tmp_path / "b"), extra_sinks=[keep]) as b:
        config = upstream_config(tmp_path / "a", f"address: '{b.address}'")
        config.write_text(
            config.read_text()
            + "filters:\n  - category_buffer: {k: 2, category_field: category, user_fields: [ip], time: query}\n"
        )
        first = event("u1", "10.0.0.1", "lisbon flights", 111)
        with vector_sidecar(config) as a:
            assert a.push(request([first])) == b""
            assert a.pipeline.held() == 1
        second = event("u2", "10.0.0.2", "porto hotels", 222)
        with vector_sidecar(config) as a:
            assert a.pipeline.held() == 1  # restored from the state store
            assert a.push(request([second])) == b""
            assert vector_sink(a).outbox.drain(15)
    assert keep.wires, "nothing was released"
    originals = {"lisbon flights": first, "porto hotels": second}
    users = {"u1": "10.0.0.1", "u2": "10.0.0.2"}
    for data in keep.wires:
        got = EventWrapper.FromString(data).log.value.map.fields
        query = got["message"].raw_bytes.decode()
        source = originals[query].log.value.map.fields
        assert users[got["user_id"].raw_bytes.decode()] == got["ip"].raw_bytes.decode()  # travelled together
        for key in ("timestamp", "category", "n", "f"):
            assert got[key] == source[key], key
