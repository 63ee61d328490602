"""The forward source (adapters/forward/source.py) driven by a client written from the specification."""

from __future__ import annotations

import contextlib
import gzip
import socket
import ssl
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import structlog
from helpers.certs import make_pki
from helpers.forward import Capture, RawClient, Served
from helpers.waiting import wait_until

from adapters.forward.protocol import (
    Entry,
    EventTime,
    Helo,
    ProtocolError,
    check_pong,
    make_ping,
    pack_entries,
    packb,
    parse_helo,
)
from sidecar.outbox import Outbox

R1 = {"AnonID": "217", "Query": "lottery", "QueryTime": "2006-03-01 07:17:12", "ItemRank": "", "ClickURL": ""}
R2 = {"AnonID": "1326", "Query": "westchester.gov", "city": b"\x01bin"}
Serve = Callable[..., Served]
Connect = Callable[..., RawClient]


def str_packed_forward(tag: str, blob: bytes, option: dict[str, Any]) -> bytes:
    """PackedForward with the entries in a msgpack str (str32: d9 would limit them to 255 bytes), as Fluentd sends."""
    return b"\x93" + packb(tag) + b"\xdb" + len(blob).to_bytes(4, "big") + blob + packb(option)


def partial_bytes(served: Served, want: int) -> Callable[[], bool]:
    """A condition: the source holds ``want`` bytes of partial frames."""
    return lambda: served.source.stats()["partial_frame_bytes"] == want


class TestModesAndAcks:
    @pytest.mark.parametrize(
        "message",
        [
            ["app", 1141251120, R1, {"chunk": "c1"}],
            ["app", [[1141251120, R1], [EventTime(1141251180, 7), R2]], {"chunk": "c1", "size": 2}],
            ["app", pack_entries([(1141251120, R1), (EventTime(1141251180, 7), R2)]), {"chunk": "c1"}],
            str_packed_forward("app", pack_entries([(1, R1)]), {"chunk": "c1"}),
            [
                "app",
                gzip.compress(pack_entries([(1141251120, R1), (EventTime(1141251180, 7), R2)])),
                {"chunk": "c1", "compressed": "gzip", "size": 2},
            ],
        ],
        ids=["message", "forward", "packed_forward", "packed_forward_str", "compressed_packed_forward"],
    )
    def test_every_mode_is_delivered_then_acked(self, serve_forward: Serve, clients: Connect, message: Any) -> None:
        """Each mode's entries reach the sinks with tag, time and every key as sent; the ack names the chunk."""
        served = serve_forward()
        c = clients(served.port)
        c.send(message)
        assert c.read() == {"ack": "c1"}
        assert served.capture.flushes >= 1  # acked only after the sinks were flushed
        got = served.capture.entries()
        assert got and all(e.tag == "app" for e in got)
        assert got[0] in (Entry("app", 1141251120, R1), Entry("app", 1, R1))
        if len(got) == 2:
            assert got[1] == Entry("app", EventTime(1141251180, 7), R2)
            assert type(got[1].record["city"]) is bytes

    def test_no_chunk_no_answer(self, serve_forward: Serve, clients: Connect) -> None:
        """Without a chunk option the server sends nothing back (and delivers)."""
        served = serve_forward()
        c = clients(served.port)
        c.send(["app", 1, R1])
        wait_until(lambda: len(served.capture.events) == 1, what="the event delivered")
        with pytest.raises(TimeoutError):
            c.read(timeout=0.2)

    def test_ack_waits_for_the_delivery(self, serve_forward: Serve, clients: Connect) -> None:
        """While the sinks' flush has not returned, no ack is sent; it comes right after."""
        served = serve_forward()
        served.capture.gate.clear()
        c = clients(served.port)
        c.send(["app", 1, R1, {"chunk": "later"}])
        with pytest.raises(TimeoutError):
            c.read(timeout=0.3)
        served.capture.gate.set()
        assert c.read() == {"ack": "later"}

    def test_failed_receive_is_not_acked_and_closes(self, serve_forward: Serve, clients: Connect) -> None:
        """When the runtime raises (a full outbox, a full disk), there is no ack and the connection is closed;
        the client sends again on a new connection and then gets its ack."""
        served = serve_forward()
        served.capture.fail = OSError(28, "No space left on device")
        c = clients(served.port)
        c.send(["app", 1, R1, {"chunk": "c9"}])
        assert c.closed_by_server()
        assert served.source.stats()["closed_receive_failed"] == 1
        served.capture.fail = None
        again = clients(served.port)
        again.send(["app", 1, R1, {"chunk": "c9"}])
        assert again.read() == {"ack": "c9"}

    def test_bad_entries_are_dead_lettered_the_rest_acked(self, serve_forward: Serve, clients: Connect) -> None:
        """In one message, entries of the wrong shape and records without a query are dead-lettered by reason;
        the good entries are delivered and the chunk is acked."""
        served = serve_forward()
        c = clients(served.port)
        c.send(["app", [[1, R1], ["x", R1], [2, {"AnonID": "1"}], [3, R2]], {"chunk": "m"}])
        assert c.read() == {"ack": "m"}
        assert [e.record for e in served.capture.entries()] == [R1, R2]
        assert served.pipeline.dead_letters.counts == {"bad_time": 1, "missing_query": 1}

    def test_size_mismatch_is_counted_not_refused(self, serve_forward: Serve, clients: Connect) -> None:
        """An option size that does not match the entries is counted; the entries are taken."""
        served = serve_forward()
        c = clients(served.port)
        c.send(["app", [[1, R1]], {"size": 5, "chunk": "s"}])
        assert c.read() == {"ack": "s"}
        assert served.source.stats()["size_mismatch"] == 1


class TestBadPeers:
    @pytest.mark.parametrize(
        ("data", "reason"),
        [
            (b"\xc1\xc1\xc1", "invalid_msgpack"),  # c1 is never used in msgpack
            (packb({"not": "an array"}), "bad_message"),
            (packb([1, 2, 3]), "bad_tag"),
            (b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", "bad_message"),  # G is fixint 0x47: a number, not a message
        ],
    )
    def test_garbage_closes_only_that_connection(
        self, serve_forward: Serve, clients: Connect, data: bytes, reason: str
    ) -> None:
        """Garbage closes its connection (counted by reason); a connection opened before it goes on working."""
        served = serve_forward()
        good = clients(served.port)
        bad = clients(served.port)
        bad.send(data)
        assert bad.closed_by_server()
        wait_until(lambda: served.source.stats().get(f"closed_{reason}") == 1, what=f"a close counted as {reason}")
        good.send(["app", 1, R1, {"chunk": "ok"}])
        assert good.read() == {"ack": "ok"}

    @pytest.mark.parametrize("garbage", [b"\xc1", packb("not a message")], ids=["invalid_msgpack", "bad_message"])
    def test_good_messages_before_garbage_are_taken(
        self, serve_forward: Serve, clients: Connect, garbage: bytes
    ) -> None:
        """A good message and garbage in one write: the good one is delivered and acked, then the connection
        closes (a bad message never takes the good ones before it with it)."""
        served = serve_forward()
        c = clients(served.port)
        c.send(packb(["app", 1, R1, {"chunk": "first"}]) + garbage)
        assert c.read() == {"ack": "first"}
        assert c.closed_by_server()
        assert len(served.capture.events) == 1

    def test_oversized_frame(self, serve_forward: Serve, clients: Connect) -> None:
        """A message over max_frame_bytes closes the connection before it is complete (oversized_frame)."""
        served = serve_forward(max_frame_bytes=1024)
        c = clients(served.port)
        big = packb(["app", 1, {"AnonID": "1", "Query": "x" * 5000}, {"chunk": "big"}])
        with contextlib.suppress(OSError):  # the server may close while we still write
            c.send(big)
        assert c.closed_by_server()
        assert served.source.stats()["closed_oversized_frame"] == 1
        assert served.capture.events == []

    def test_past_max_bad_entries_one_dead_letter_gives_the_counts(
        self, serve_forward: Serve, clients: Connect
    ) -> None:
        """A message of many bad entries: max_bad_entries dead letters one by one, then one too_many_bad_entries
        (the rest not read); the good entry before them is delivered and the chunk acked."""
        served = serve_forward(max_bad_entries=3)
        c = clients(served.port)
        c.send(["app", pack_entries([(1, R1)]) + b"\x00" * 1_100_000, {"chunk": "bad"}])
        assert c.read() == {"ack": "bad"}
        assert [e.record for e in served.capture.entries()] == [R1]
        assert served.pipeline.dead_letters.counts == {"bad_entry": 3, "too_many_bad_entries": 1}
        assert served.source.stats()["messages_cut"] == 1
        assert served.source.stats()["messages_parsed_aside"] == 1  # 1.1 MB of entries: off the loop

    def test_a_compressed_message_past_max_decompressed_bytes(self, serve_forward: Serve, clients: Connect) -> None:
        """A gzip message expanding past max_decompressed_bytes closes its connection unacknowledged
        (decompressed_too_large); another connection is served."""
        served = serve_forward(max_decompressed_bytes=1024)
        good = clients(served.port)
        bomb = clients(served.port)
        bomb.send(["app", gzip.compress(b"\x00" * 2048), {"compressed": "gzip", "chunk": "bomb"}])
        assert bomb.closed_by_server()
        assert served.source.stats()["closed_decompressed_too_large"] == 1
        good.send(["app", 1, R1, {"chunk": "ok"}])
        assert good.read() == {"ack": "ok"}
        assert served.pipeline.dead_letters.counts == {}

    def test_partial_frames_past_the_budget_close_the_longest_idle(
        self, serve_forward: Serve, clients: Connect
    ) -> None:
        """Partial frames of all connections share max_partial_frames_bytes: the third one past it closes the
        connection whose partial frame was idle longest (counted); the others stay and complete their frames."""
        served = serve_forward(max_frame_bytes=1024, max_partial_frames_bytes=2048)
        frame = packb(["app", 1, {"AnonID": "1", "Query": "q" * 950}, {"chunk": "late"}])
        parked = []
        for n in (1, 2, 3):
            c = clients(served.port)
            c.send(frame[:900])
            parked.append(c)
            wait_until(partial_bytes(served, 900 * min(n, 2)), what=f"{900 * min(n, 2)} bytes parked")
        assert parked[0].closed_by_server()
        wait_until(lambda: served.source.stats().get("closed_partial_frame_budget") == 1, what="the close counted")
        for c in parked[1:]:
            c.send(frame[900:])
            assert c.read() == {"ack": "late"}
        assert served.source.stats()["partial_frame_bytes"] == 0

    def test_idle_timeout(self, serve_forward: Serve, clients: Connect) -> None:
        """A connection silent for idle_timeout_seconds is closed (idle_timeout)."""
        served = serve_forward(idle_timeout_seconds=0.2)
        c = clients(served.port)
        assert c.closed_by_server()
        assert served.source.stats()["closed_idle_timeout"] == 1

    def test_a_thousand_idle_connections_do_not_stop_service(self, serve_forward: Serve, clients: Connect) -> None:
        """1,000 connections that send nothing stay open, and a well-behaved client is still served."""
        served = serve_forward()
        idle = [socket.create_connection(("127.0.0.1", served.port)) for _ in range(1000)]
        try:
            wait_until(lambda: served.source.stats()["connections_open"] >= 1000, what="1,000 connections open")
            c = clients(served.port)
            c.send(["app", 1, R1, {"chunk": "busy"}])
            assert c.read() == {"ack": "busy"}
        finally:
            for s in idle:
                s.close()

    def test_heartbeat_over_udp(self, serve_forward: Serve) -> None:
        """A UDP datagram 00 to the listen port is answered 00."""
        served = serve_forward()
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as u:
            u.settimeout(5)
            u.sendto(b"\x00", ("127.0.0.1", served.port))
            assert u.recvfrom(16)[0] == b"\x00"
        wait_until(lambda: served.source.stats().get("heartbeats_answered") == 1, what="the heartbeat counted")


class TestHandshake:
    KEY = "s3cret-shared-0123"

    def start(self, serve: Serve, monkeypatch: pytest.MonkeyPatch, **options: Any) -> Served:
        monkeypatch.setenv("FWD_TEST_SHARED_KEY", self.KEY)
        monkeypatch.setenv("FWD_TEST_ALICE_PW", "alice-pw")
        return serve(shared_key_env="FWD_TEST_SHARED_KEY", self_hostname="sidecar-in", **options)

    def handshake(
        self, c: RawClient, key: str, user: str = "", password: str = "", host: str = "client-1"
    ) -> tuple[Any, Helo]:
        helo = parse_helo(c.read())
        c.send(make_ping(host, "salty", helo, key.encode(), user, password.encode()))
        return c.read(), helo

    def test_shared_key_handshake_then_events(
        self, serve_forward: Serve, clients: Connect, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """HELO → PING with the right digest → PONG that proves the server's key; then events are acked."""
        served = self.start(serve_forward, monkeypatch)
        c = clients(served.port)
        pong, helo = self.handshake(c, self.KEY)
        check_pong(pong, hostname="client-1", salt="salty", nonce=helo.nonce, shared_key=self.KEY.encode())
        assert helo.auth == b"" and helo.keepalive is True
        c.send(["app", 1, R1, {"chunk": "after-auth"}])
        assert c.read() == {"ack": "after-auth"}

    def test_wrong_shared_key_gets_a_refusing_pong_and_is_closed(
        self, serve_forward: Serve, clients: Connect, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A PING with another key: PONG [false, "shared_key_mismatch", ...], the connection closed, nothing taken."""
        served = self.start(serve_forward, monkeypatch)
        c = clients(served.port)
        pong, _ = self.handshake(c, "not the key")
        assert pong[:3] == ["PONG", False, "shared_key_mismatch"] and pong[4] == ""
        assert c.closed_by_server()
        stats = served.source.stats()
        assert stats["auth_failed_shared_key_mismatch"] == 1 and stats["closed_auth_failed"] == 1

    def test_events_before_the_handshake_are_refused(
        self, serve_forward: Serve, clients: Connect, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """A client that ignores HELO and sends events is closed (bad_ping); nothing is delivered."""
        served = self.start(serve_forward, monkeypatch)
        c = clients(served.port)
        c.send(["app", 1, R1, {"chunk": "sneaky"}])
        assert c.closed_by_server()
        assert served.capture.events == [] and served.source.stats()["closed_bad_ping"] == 1

    def test_silent_client_times_out(
        self, serve_forward: Serve, clients: Connect, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """No PING within handshake_timeout_seconds: closed (handshake_timeout)."""
        served = self.start(serve_forward, monkeypatch, handshake_timeout_seconds=0.2)
        c = clients(served.port)
        assert c.closed_by_server()
        assert served.source.stats()["closed_handshake_timeout"] == 1

    def test_user_authentication(self, serve_forward: Serve, clients: Connect, monkeypatch: pytest.MonkeyPatch) -> None:
        """With users configured HELO carries an auth salt; the right password passes, a wrong one is refused."""
        served = self.start(
            serve_forward, monkeypatch, users=[{"username": "alice", "password_env": "FWD_TEST_ALICE_PW"}]
        )
        ok = clients(served.port)
        pong, helo = self.handshake(ok, self.KEY, "alice", "alice-pw")
        assert len(helo.auth) == 16 and pong[1] is True
        ok.send(["app", 1, R1, {"chunk": "a"}])
        assert ok.read() == {"ack": "a"}
        bad = clients(served.port)
        pong, _ = self.handshake(bad, self.KEY, "alice", "guess")
        assert pong[1:3] == [False, "username_password_mismatch"]
        assert bad.closed_by_server()

    def test_logs_hold_no_secret_and_no_value(
        self, serve_forward: Serve, clients: Connect, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Refused handshakes, garbage and bad entries log reasons only: no key, password, tag or record value."""
        with structlog.testing.capture_logs() as logs:
            served = self.start(serve_forward, monkeypatch)
            c = clients(served.port)
            self.handshake(c, "wrong-" + self.KEY)
            c.closed_by_server()
            g = clients(served.port)
            g.read()  # HELO
            g.send(packb(["secret-tag", "lottery-value", {"AnonID": "217"}]))
            g.closed_by_server()
            served.source.stop(1.0)
        text = repr(logs)
        for needle in (self.KEY, "secret-tag", "lottery", "217", "alice-pw"):
            assert needle not in text
        assert any(e.get("reason") == "auth_failed" for e in logs)


class TestTls:
    def test_tls_with_handshake(
        self, serve_forward: Serve, clients: Connect, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """Over TLS (certificate from a test CA) the handshake and the acks work; a plaintext client gets nothing."""
        pki = make_pki(tmp_path / "pki")
        monkeypatch.setenv("FWD_TEST_SHARED_KEY", "k-0123456789abcdef")
        served = serve_forward(
            tls_cert_file=str(pki.server.cert),
            tls_key_file=str(pki.server.key),
            shared_key_env="FWD_TEST_SHARED_KEY",
            handshake_timeout_seconds=1,
        )
        ctx = ssl.create_default_context(cafile=str(pki.ca))
        c = clients(served.port, tls=ctx)
        helo = parse_helo(c.read())
        c.send(make_ping("client-1", "s", helo, b"k-0123456789abcdef"))
        assert c.read()[1] is True
        c.send(["app", 1, R1, {"chunk": "tls"}])
        assert c.read() == {"ack": "tls"}
        plain = clients(served.port)
        plain.send(["app", 1, R1, {"chunk": "plain"}])
        assert plain.closed_by_server()
        assert len(served.capture.events) == 1

    def test_mutual_tls(self, serve_forward: Serve, clients: Connect, tmp_path: Path) -> None:
        """With tls_client_ca_file a client with a certificate from that CA is served; one without a certificate,
        or with one from another CA, is not (nothing of it is delivered)."""
        pki = make_pki(tmp_path / "pki")
        served = serve_forward(
            tls_cert_file=str(pki.server.cert), tls_key_file=str(pki.server.key), tls_client_ca_file=str(pki.ca)
        )

        def context(pair: Any) -> ssl.SSLContext:
            ctx = ssl.create_default_context(cafile=str(pki.ca))
            if pair is not None:
                ctx.load_cert_chain(pair.cert, pair.key)
            return ctx

        c = clients(served.port, tls=context(pki.client))
        c.send(["app", 1, R1, {"chunk": "mtls"}])
        assert c.read() == {"ack": "mtls"}
        for pair in (None, pki.stranger):
            with pytest.raises((OSError, EOFError)):  # refused in the handshake, or closed right after it
                other = clients(served.port, tls=context(pair))
                other.send(["app", 1, R2, {"chunk": "no"}])
                other.read()
        assert [e.record for e in served.capture.entries()] == [R1]


class TestBackpressure:
    def test_a_full_outbox_stops_reading_until_it_drains(
        self, serve_forward: Serve, clients: Connect, tmp_path: Path
    ) -> None:
        """While a sink's outbox is full the source does not hand the batch to the chain (no ack); once the outbox
        drains the batch goes through and is acked."""
        served = serve_forward()
        outbox = Outbox(tmp_path / "outbox-state", "bp", max_batches=1)
        outbox.put(b"waiting", 1)

        class OutboxSink(Capture):
            """A sink with an outbox (a network sink's shape): only the outbox's fullness matters here."""

            def __init__(self) -> None:
                super().__init__()
                self.outbox = outbox

        served.pipeline.sinks.append(OutboxSink())
        c = clients(served.port)
        c.send(["app", 1, R1, {"chunk": "bp"}])
        with pytest.raises(TimeoutError):
            c.read(timeout=0.3)
        assert served.capture.events == [] and served.source.stats()["backpressure_waits"] == 1
        sent = threading.Event()
        outbox.start(lambda payload: sent.set())
        assert c.read() == {"ack": "bp"}
        assert sent.is_set()
        served.pipeline.sinks.pop()
        outbox.close()


def test_unknown_peer_errors_are_protocol_errors() -> None:
    """ProtocolError carries a reason slug only."""
    assert str(ProtocolError("bad_tag")) == "bad_tag"
