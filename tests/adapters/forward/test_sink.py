"""The forward sink (adapters/forward/sink.py): PackedForward through the durable outbox, acks, handshake, TLS,
retries and restarts — delivered into our own forward source and into a bare test server."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until
from helpers.certs import make_pki
from helpers.forward import RawClient, Served, write_sidecar_config

from adapters.forward.codec import ForwardCodec
from adapters.forward.protocol import Entry, EventTime, FrameDecoder, make_ack, packb, parse_message
from adapters.forward.sink import ForwardSink
from adapters.forward.source import ForwardSource
from sidecar.api import RecordBatch
from sidecar.codecs import SchemaConfig, TsvCodec
from sidecar.config import load_config
from sidecar.outbox import OutboxFull
from sidecar.pipeline import Pipeline

R1 = {"AnonID": "217", "Query": "lottery", "QueryTime": "2006-03-01 07:17:12", "ItemRank": 1, "ClickURL": b"\x00b"}
R2 = {"AnonID": "1326", "Query": "westchester.gov", "extra": {"nested": [1, 2.5, None]}}
ENTRIES = [Entry("app.search", 1141251120, R1), Entry("app.other", EventTime(1141251180, 999), R2)]
Serve = Callable[..., Served]


def port_of_a_stopped_source(serve_forward: Serve) -> int:
    """A forward source started on port 0 and stopped: the port it bound, where nothing listens now (a downstream
    that went down). A test brings the server back there (``listen``): a restart keeps its address, so the port
    is one a server bound itself, not one picked before any bind."""
    served = serve_forward(name="down.yaml")
    served.source.stop(grace=0)
    return served.port


@pytest.fixture
def sink_pipeline(tmp_path: Path) -> Iterator[Callable[..., Pipeline]]:
    """A pipeline (passthrough) whose only sink is a forward sink with the given options, state in tmp_path/out."""
    made: list[Pipeline] = []

    def build(folder: str = "out", **options: Any) -> Pipeline:
        options.setdefault("retry_initial_seconds", 0.05)
        options.setdefault("retry_max_seconds", 0.2)
        options.setdefault("close_drain_seconds", 2)
        (tmp_path / folder).mkdir(exist_ok=True)
        cfg = load_config(write_sidecar_config(tmp_path / folder, {"sinks": [{"forward": options}]}))
        p = Pipeline(cfg, seed=3)
        made.append(p)
        return p

    yield build
    for p in made:
        p.close()


def send(pipeline: Pipeline, entries: list[Entry]) -> None:
    pipeline.receive(RecordBatch(entries, ForwardCodec(), "test"))


def sink_of(pipeline: Pipeline) -> ForwardSink:
    sink = pipeline.sinks[0]
    assert isinstance(sink, ForwardSink)
    return sink


def test_entries_arrive_as_they_came(serve_forward: Serve, sink_pipeline: Callable[..., Pipeline]) -> None:
    """Through the sink into a forward source: every tag, time (int and EventTime) and key as sent, byte for byte
    when packed again; acked chunks empty the outbox."""
    served = serve_forward()
    out = sink_pipeline(address=f"127.0.0.1:{served.port}")
    send(out, ENTRIES)
    wait_until(lambda: len(served.capture.events) == 2, what="both entries to arrive")
    got = sorted(served.capture.entries(), key=lambda e: e.tag)
    assert [packb(e) for e in got] == [packb(e) for e in sorted(ENTRIES, key=lambda e: e.tag)]
    sink = sink_of(out)
    assert sink.outbox is not None and sink.outbox.drain(5)
    assert sink.stats()["sent_events"] == 2 and served.source.stats()["acks"] >= 1


def test_gzip_shared_key_user_and_tls(
    serve_forward: Serve, sink_pipeline: Callable[..., Pipeline], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CompressedPackedForward over TLS, after the HELO/PING/PONG handshake with a shared key and a user."""
    pki = make_pki(tmp_path / "pki")
    monkeypatch.setenv("FWD_KEY", "the-key-0123456789")
    (tmp_path / "pw").write_text("bob-pw\n")
    served = serve_forward(
        shared_key_env="FWD_KEY",
        users=[{"username": "bob", "password_file": str(tmp_path / "pw")}],
        tls_cert_file=str(pki.server.cert),
        tls_key_file=str(pki.server.key),
    )
    out = sink_pipeline(
        address=f"localhost:{served.port}",
        compress="gzip",
        shared_key_env="FWD_KEY",
        username="bob",
        password_file=str(tmp_path / "pw"),
        tls=True,
        tls_ca_file=str(pki.ca),
    )
    send(out, ENTRIES)
    wait_until(lambda: len(served.capture.events) == 2, what="both entries to arrive")
    stats = served.source.stats()
    assert stats["messages_compressed_packed_forward"] >= 1 and stats["handshakes"] >= 1


def test_wrong_shared_key_keeps_the_batch(
    serve_forward: Serve, sink_pipeline: Callable[..., Pipeline], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refused handshake is counted and retried; the batch stays in the outbox (never dropped)."""
    monkeypatch.setenv("FWD_KEY", "server-key-0123456789")
    monkeypatch.setenv("FWD_WRONG", "client-key-0123456789")
    served = serve_forward(shared_key_env="FWD_KEY")
    out = sink_pipeline(address=f"127.0.0.1:{served.port}", shared_key_env="FWD_WRONG", close_drain_seconds=0)
    send(out, ENTRIES)
    sink = sink_of(out)
    wait_until(lambda: sink.client.handshake_failures >= 2, what="two refused handshakes")
    assert sink.outbox is not None and sink.outbox.pending().events == 2
    assert served.capture.events == []


def test_server_down_then_up(serve_forward: Serve, sink_pipeline: Callable[..., Pipeline]) -> None:
    """With the server down flush still returns (the batch is durable in the outbox); it is delivered once the
    server listens, after retries."""
    port = port_of_a_stopped_source(serve_forward)
    out = sink_pipeline(address=f"127.0.0.1:{port}")
    send(out, ENTRIES)
    sink = sink_of(out)
    assert sink.outbox is not None
    wait_until(lambda: sink.outbox is not None and sink.outbox.stats()["retries"] >= 2, what="two retries")
    served = serve_forward(listen=f"127.0.0.1:{port}")
    wait_until(lambda: len(served.capture.events) == 2, what="both entries to arrive")
    assert sink.outbox.drain(5)


def test_a_restart_sends_what_was_left(
    serve_forward: Serve, sink_pipeline: Callable[..., Pipeline], tmp_path: Path
) -> None:
    """Batches left undelivered when the sidecar stopped are sent by the next run (same state folder)."""
    port = port_of_a_stopped_source(serve_forward)
    first = sink_pipeline(address=f"127.0.0.1:{port}", close_drain_seconds=0)
    send(first, ENTRIES)
    first.close()
    served = serve_forward(listen=f"127.0.0.1:{port}")
    sink_pipeline(address=f"127.0.0.1:{port}")  # the next run: nothing new is sent
    wait_until(lambda: len(served.capture.events) == 2, what="both entries to arrive")


class WithholdingServer:
    """A bare forward server: acks every chunk except the first ``withhold`` messages it sees (kept in ``messages``)."""

    def __init__(self, withhold: int) -> None:
        self.withhold = withhold
        self.chunks: list[str] = []
        self.messages: list[Any] = []
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._conn, args=(conn,), daemon=True).start()

    def _conn(self, conn: socket.socket) -> None:
        decoder = FrameDecoder(1 << 20)
        with conn:
            while data := conn.recv(65536):
                for obj in decoder.feed(data):
                    self.messages.append(obj)
                    m = parse_message(obj)
                    assert m.chunk is not None
                    self.chunks.append(m.chunk)
                    if len(self.chunks) > self.withhold:
                        conn.sendall(make_ack(m.chunk))

    def close(self) -> None:
        self.sock.close()


def test_a_missing_ack_sends_the_batch_again(sink_pipeline: Callable[..., Pipeline]) -> None:
    """No ack within ack_timeout_seconds: the connection is dropped and the same message (same chunk id) is sent
    again until it is acked (at least once)."""
    server = WithholdingServer(withhold=1)
    try:
        out = sink_pipeline(address=f"127.0.0.1:{server.port}", ack_timeout_seconds=0.3)
        send(out, ENTRIES[:1])
        sink = sink_of(out)
        assert sink.outbox is not None and sink.outbox.drain(10)
        assert len(server.chunks) == 2 and server.chunks[0] == server.chunks[1]
        assert sink.outbox.stats()["failures_by_error"] == {"TimeoutError": 1}
    finally:
        server.close()


def test_full_outbox_refuses(serve_forward: Serve, sink_pipeline: Callable[..., Pipeline]) -> None:
    """With the downstream gone the outbox fills to its bound; then the runtime's receive raises OutboxFull (the
    source does not acknowledge) instead of dropping."""
    out = sink_pipeline(
        address=f"127.0.0.1:{port_of_a_stopped_source(serve_forward)}", outbox_max_batches=1, close_drain_seconds=0
    )
    send(out, ENTRIES)
    with pytest.raises(OutboxFull):
        send(out, ENTRIES)
    sink = sink_of(out)
    assert sink.outbox is not None and sink.outbox.pending().batches == 1 and sink.outbox.full()


def test_events_of_another_format_get_the_configured_tag(
    serve_forward: Serve, sink_pipeline: Callable[..., Pipeline]
) -> None:
    """TSV events become entries tagged `tag`, timed now, with the record's columns as keys."""
    served = serve_forward()
    out = sink_pipeline(address=f"127.0.0.1:{served.port}", tag="search.tsv")
    tsv = TsvCodec(SchemaConfig())
    tsv.accept_header("AnonID\tQuery\tQueryTime\tItemRank\tClickURL")
    out.receive(RecordBatch(["9\tq one\t2006-03-01 07:17:12\t\t"], tsv, "test.tsv"))
    wait_until(lambda: len(served.capture.events) == 1, what="the entry to arrive")
    (entry,) = served.capture.entries()
    assert entry.tag == "search.tsv" and isinstance(entry.time, EventTime)
    assert entry.record == {"AnonID": "9", "Query": "q one", "QueryTime": "2006-03-01 07:17:12", "ItemRank": "",
                            "ClickURL": ""}  # fmt: skip


def test_messages_are_split_at_max_message_bytes(serve_forward: Serve, sink_pipeline: Callable[..., Pipeline]) -> None:
    """A large batch becomes several PackedForward messages (one chunk id each), grouped by tag, none much over
    max_message_bytes."""
    out = sink_pipeline(address=f"127.0.0.1:{port_of_a_stopped_source(serve_forward)}", max_message_bytes=1024)
    sink = sink_of(out)
    entries = [Entry("a" if i % 2 else "b", i, {"AnonID": str(i), "Query": "x" * 100}) for i in range(40)]
    sink.write(ForwardCodec().decode_many(entries, "\n", []))
    payload, events = sink.payload()
    decoder = FrameDecoder(1 << 20)
    messages = [parse_message(o) for o in decoder.feed(payload)]
    assert events == 40 and len(messages) >= 4
    assert sum(len(m.entries) for m in messages) == 40
    assert len({m.chunk for m in messages}) == len(messages)
    assert {m.tag for m in messages} == {"a", "b"}


def test_passthrough_is_byte_for_byte(tmp_path: Path) -> None:
    """forward source -> passthrough chain -> forward sink: the packed entries leave as the very bytes that came in
    (EventTime in its ext8 form, a float32, invalid UTF-8 in a str)."""
    server = WithholdingServer(withhold=0)
    body = {
        "sources": [{"forward": {"listen": "127.0.0.1:0"}}],
        "sinks": [{"forward": {"address": f"127.0.0.1:{server.port}"}}],
    }
    cfg = load_config(write_sidecar_config(tmp_path, body))
    pipeline = Pipeline(cfg)
    spec = cfg.source("forward")
    assert spec is not None
    source = ForwardSource(spec.config, pipeline.ctx)
    source.start(pipeline)
    blob = bytes.fromhex(
        "92 c7 08 00 44 06 1c 30 00 00 01 f4"  # [EventTime(1141251120, 500) as ext8,
        " 84 a6 41 6e 6f 6e 49 44 a3 32 31 37"  # {"AnonID": "217",
        " a5 51 75 65 72 79 a7 6c 6f 74 74 65 72 79"  # "Query": "lottery",
        " a1 66 ca 3f c0 00 00"  # "f": 1.5 as float32,
        " a1 75 a2 ff fe"  # "u": a str holding ff fe (not UTF-8)}]
    )
    try:
        client = RawClient(source.port)
        client.send(["app", blob + blob, {"chunk": "in"}])
        assert client.read() == {"ack": "in"}
        wait_until(lambda: len(server.messages) == 1, what="the message to arrive")
        tag, out_blob, option = server.messages[0]
        assert (tag, out_blob, option["size"]) == ("app", blob + blob, 2)
        client.close()
    finally:
        source.stop(1.0)
        pipeline.close()
        server.close()
