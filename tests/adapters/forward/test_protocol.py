"""Forward protocol v1 on the wire (adapters/forward/protocol.py): every mode from the specification as
byte literals, each with its readable form beside it, the handshake, the heartbeat, and the framing
(partial frames, oversized frames, garbage) with hypothesis properties."""

from __future__ import annotations

import functools
import gzip
import hashlib
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.forward.protocol import (
    MAX_DECOMPRESSED_BYTES,
    Entry,
    EventTime,
    FrameBudget,
    FrameDecoder,
    Framing,
    Helo,
    ProtocolError,
    ack_of,
    check_ping,
    check_pong,
    gunzip,
    heartbeat_reply,
    make_ack,
    make_helo,
    make_ping,
    make_pong,
    message_chunks,
    pack_entries,
    packb,
    packed_forward,
    parse_helo,
    parse_message,
    parse_ping,
    parse_weight,
    unpackb,
)


def h(text: str) -> bytes:
    """Bytes from hex with spaces (the literals below are written byte by byte)."""
    return bytes.fromhex(text)


R1 = {"AnonID": "217", "Query": "lottery"}
R2 = {"AnonID": "1326", "Query": "westchester.gov"}
# {"AnonID": "217", "Query": "lottery"}
R1_HEX = "82 a6 41 6e 6f 6e 49 44 a3 32 31 37 a5 51 75 65 72 79 a7 6c 6f 74 74 65 72 79"
# {"AnonID": "1326", "Query": "westchester.gov"}
R2_HEX = "82 a6 41 6e 6f 6e 49 44 a4 31 33 32 36 a5 51 75 65 72 79 af 77 65 73 74 63 68 65 73 74 65 72 2e 67 6f 76"
# [1141251120, {"AnonID": "217", "Query": "lottery"}] [1141251180, {"AnonID": "1326", "Query": "westchester.gov"}]
ENTRIES_HEX = f"92 ce 44 06 1c 30 {R1_HEX} 92 ce 44 06 1c 6c {R2_HEX}"  # 73 bytes
CHUNK = "cDhuOWdteFRRVkM4L25oMg=="
# "cDhuOWdteFRRVkM4L25oMg==" (str8 of 24 bytes)
CHUNK_HEX = "b8 63 44 68 75 4f 57 64 74 65 46 52 52 56 6b 4d 34 4c 32 35 6f 4d 67 3d 3d"

# ---- the four modes -------------------------------------------------------------------------------

MESSAGE = h(
    "93"  # array of 3: Message mode
    " a2 71 6c"  # "ql"
    " ce 44 06 1c 30"  # 1141251120 (uint32: an integer time)
    f" {R1_HEX}"  # {"AnonID": "217", "Query": "lottery"}
)
MESSAGE_WITH_OPTION = h(
    "94"  # array of 4: Message mode with an option map
    " a2 71 6c"  # "ql"
    " ce 44 06 1c 30"  # 1141251120
    f" {R1_HEX}"  # {"AnonID": "217", "Query": "lottery"}
    f" 82 a4 73 69 7a 65 01 a5 63 68 75 6e 6b {CHUNK_HEX}"  # {"size": 1, "chunk": "cDhu...Mg=="}
)
MESSAGE_EVENT_TIME_FIXEXT8 = h(
    "93 a2 71 6c"  # ["ql",
    " d7 00 44 06 1c 30 00 00 01 f4"  # EventTime(1141251120 s, 500 ns) as fixext8, type 0
    f" {R1_HEX}"  # {"AnonID": "217", "Query": "lottery"}]
)
MESSAGE_EVENT_TIME_EXT8 = h(
    "93 a2 71 6c"  # ["ql",
    " c7 08 00 44 06 1c 30 00 00 01 f4"  # EventTime(1141251120 s, 500 ns) as ext8: length 8, type 0
    f" {R1_HEX}"  # {"AnonID": "217", "Query": "lottery"}]
)
FORWARD = h(
    "93 a2 71 6c"  # ["ql",
    " 92"  # [ two entries:
    f" 92 ce 44 06 1c 30 {R1_HEX}"  # [1141251120, {"AnonID": "217", "Query": "lottery"}],
    f" 92 ce 44 06 1c 6c {R2_HEX}"  # [1141251180, {"AnonID": "1326", "Query": "westchester.gov"}] ],
    " 81 a4 73 69 7a 65 02"  # {"size": 2}]
)
PACKED_FORWARD_BIN = h(
    "93 a2 71 6c"  # ["ql",
    f" c4 49 {ENTRIES_HEX}"  # bin8 of 73 bytes: the two entries above, packed one after the other
    " 81 a4 73 69 7a 65 02"  # {"size": 2}]
)
PACKED_FORWARD_STR = h(
    "93 a2 71 6c"  # ["ql",
    f" d9 49 {ENTRIES_HEX}"  # str8 of 73 bytes (as Fluentd's out_forward sends them): the same entries
    " 81 a4 73 69 7a 65 02"  # {"size": 2}]
)
# gzip (mtime 0) of the 73 entry bytes above: 79 bytes
GZIP_ENTRIES_HEX = (
    "1f 8b 08 00 00 00 00 00 02 03 9b 74 ce 85 4d c6 a0 69 99 63 5e 7e 9e a7 cb 62 23 43 f3 a5 81 a5 a9 45 95"
    " cb 73 f2 4b 4a 80 f4 24 90 7c 0e 4c 7e 89 a1 b1 91 19 44 c1 fa f2 d4 e2 92 e4 0c 20 91 5a a4 97 9e 5f 06"
    " 00 49 71 75 a4 49 00 00 00"
)
COMPRESSED_PACKED_FORWARD = h(
    "93 a2 71 6c"  # ["ql",
    f" c4 4f {GZIP_ENTRIES_HEX}"  # bin8 of 79 bytes: gzip of the packed entries
    " 82 a4 73 69 7a 65 02"  # {"size": 2,
    " aa 63 6f 6d 70 72 65 73 73 65 64 a4 67 7a 69 70"  # "compressed": "gzip"}]
)
TWO_ENTRIES = [Entry("ql", 1141251120, R1), Entry("ql", 1141251180, R2)]


def parse(data: bytes) -> Any:
    (obj,) = FrameDecoder(1 << 20).feed(data)
    return parse_message(obj)


class TestModes:
    def test_message_mode(self) -> None:
        """Message: one entry; the integer time stays an integer; no option, no chunk."""
        m = parse(MESSAGE)
        assert (m.mode, m.tag, m.entries, m.chunk, m.size, m.bad) == ("message", "ql", [TWO_ENTRIES[0]], None, None, [])
        assert type(m.entries[0].time) is int

    def test_message_mode_with_option_and_its_ack(self) -> None:
        """Message with {"size": 1, "chunk": ...}: the chunk is answered {"ack": chunk}, byte for byte."""
        m = parse(MESSAGE_WITH_OPTION)
        assert (m.chunk, m.size, len(m.entries)) == (CHUNK, 1, 1)
        # {"ack": "cDhuOWdteFRRVkM4L25oMg=="}
        assert make_ack(m.chunk) == h(f"81 a3 61 63 6b {CHUNK_HEX}")
        assert ack_of(unpackb(make_ack(CHUNK))) == CHUNK

    @pytest.mark.parametrize("data", [MESSAGE_EVENT_TIME_FIXEXT8, MESSAGE_EVENT_TIME_EXT8], ids=["fixext8", "ext8"])
    def test_event_time_in_both_encodings(self, data: bytes) -> None:
        """EventTime (ext type 0) as fixext8 and as ext8: seconds and nanoseconds; packed again as fixext8."""
        m = parse(data)
        t = m.entries[0].time
        assert isinstance(t, EventTime) and (t.seconds, t.nanoseconds) == (1141251120, 500)
        assert packb(t) == h("d7 00 44 06 1c 30 00 00 01 f4")

    def test_forward_mode(self) -> None:
        """Forward: an array of [time, record] entries, with {"size": 2}."""
        m = parse(FORWARD)
        assert (m.mode, m.entries, m.size) == ("forward", TWO_ENTRIES, 2)

    @pytest.mark.parametrize("data", [PACKED_FORWARD_BIN, PACKED_FORWARD_STR], ids=["bin", "str"])
    def test_packed_forward_mode_bin_and_str(self, data: bytes) -> None:
        """PackedForward: the entries as one msgpack stream, in a bin or (Fluentd's out_forward) in a str."""
        m = parse(data)
        assert (m.mode, m.entries, m.size, m.bad) == ("packed_forward", TWO_ENTRIES, 2, [])

    def test_compressed_packed_forward_mode(self) -> None:
        """CompressedPackedForward: the entry stream gzip-compressed, option compressed: gzip."""
        m = parse(COMPRESSED_PACKED_FORWARD)
        assert (m.mode, m.entries, m.size) == ("compressed_packed_forward", TWO_ENTRIES, 2)

    def test_several_gzip_members_are_one_stream(self) -> None:
        """Fluentd appends gzip members to a chunk: every member's entries are read, in order."""
        ent = h(ENTRIES_HEX)
        blob = gzip.compress(ent[:36], mtime=0) + gzip.compress(ent[36:], mtime=0)
        m = parse_message(["ql", blob, {"compressed": "gzip"}])
        assert m.entries == TWO_ENTRIES

    def test_the_sinks_packed_forward_is_what_the_spec_shows(self) -> None:
        """packed_forward() writes the literal above (bin entries, size), and with a chunk and gzip the
        CompressedPackedForward form whose chunk message_chunks() finds again."""
        assert packed_forward("ql", h(ENTRIES_HEX), 2) == PACKED_FORWARD_BIN
        msg = packed_forward("ql", h(ENTRIES_HEX), 2, chunk=CHUNK, compress=True)
        m = parse(msg)
        assert (m.mode, m.entries, m.chunk) == ("compressed_packed_forward", TWO_ENTRIES, CHUNK)
        assert message_chunks(msg + packed_forward("ql", h(ENTRIES_HEX), 2, chunk="x")) == [CHUNK, "x"]

    def test_values_are_kept_as_they_came(self) -> None:
        """str stays str, bin stays bytes, invalid UTF-8 in a str and other ext types pack back byte for byte."""
        record = h(
            "84"  # map of 4
            " a1 73 a2 68 69"  # "s": "hi"
            " a1 62 c4 02 68 69"  # "b": bin "hi"
            " a1 75 a2 ff fe"  # "u": str holding the bytes ff fe (not UTF-8)
            " a1 78 d4 05 07"  # "x": fixext1 type 5, data 07
        )
        data = h("93 a2 71 6c 01") + record  # ["ql", 1, {...}]
        m = parse(data)
        rec = m.entries[0].record
        assert rec["s"] == "hi" and rec["b"] == b"hi" and isinstance(rec["u"], str)
        assert packb(rec) == record


class TestBadMessages:
    @pytest.mark.parametrize(
        ("obj", "reason"),
        [
            (1, "bad_message"),  # 01: not an array
            (["ql"], "bad_message"),  # ["ql"]
            ([1, 2, {}], "bad_tag"),  # [1, 2, {}]: the tag is not a string
            (["ql", 1, {}, {}, {}], "bad_message"),  # five elements
            (["ql", [], "x"], "bad_option"),  # option not a map
            (["ql", [], {"chunk": 5}], "bad_chunk"),  # chunk not a string
            (["ql", b"", {"compressed": "zstd"}], "unsupported_compression"),
            (["ql", b"not gzip", {"compressed": "gzip"}], "bad_gzip"),
            (["ql", 1], "bad_message"),  # Message mode without a record
        ],
    )
    def test_message_level_errors(self, obj: Any, reason: str) -> None:
        """A message of no known mode is a ProtocolError with a reason slug (the connection is closed)."""
        with pytest.raises(ProtocolError) as err:
            parse_message(obj)
        assert err.value.reason == reason

    def test_bad_entries_do_not_take_good_ones_with_them(self) -> None:
        """In one message: a wrong-shaped entry, a bad time, a record that is no map are listed by reason,
        the good entries are kept; a damaged packed stream keeps the entries before the damage."""
        m = parse_message(["ql", [[1, R1], [1], ["t", R1], [-1, R1], [2, "x"], [3, R2]]])
        assert m.entries == [Entry("ql", 1, R1), Entry("ql", 3, R2)]
        assert m.bad == ["bad_entry", "bad_time", "bad_time", "record_not_map"]
        cut = h(ENTRIES_HEX)[:-5]
        m = parse_message(["ql", cut])
        assert m.entries == [TWO_ENTRIES[0]] and m.bad == ["truncated_packed_entries"]

    def test_decompression_is_bounded(self) -> None:
        """A gzip bomb stops at the limit: decompressed_too_large."""
        with pytest.raises(ProtocolError, match="decompressed_too_large"):
            gunzip(gzip.compress(b"\x00" * 100_000), 10_000)

    def test_decompression_stops_at_the_limit_by_default(self) -> None:
        """A compressed message expands to MAX_DECOMPRESSED_BYTES (16 MiB) at most unless told otherwise."""
        bomb = ["ql", gzip.compress(b"\x00" * (MAX_DECOMPRESSED_BYTES + 1)), {"compressed": "gzip"}]
        with pytest.raises(ProtocolError, match="decompressed_too_large"):
            parse_message(bomb)

    @pytest.mark.parametrize("packed", [True, False], ids=["packed_forward", "forward"])
    def test_past_max_bad_entries_the_rest_is_not_read(self, packed: bool) -> None:
        """Past max_bad_entries bad entries the message is cut: the bad ones up to the bound listed by reason, the
        good ones before kept, and one line of counts (no value) for the rest."""
        second: Any = b"\x00" * 1000 if packed else [0] * 1000
        before: Any = pack_entries([(1, R1)]) if packed else [[1, R1]]
        m = parse_message(["ql", before + second], max_bad_entries=3)
        assert m.entries == [Entry("ql", 1, R1)]
        assert m.bad == ["bad_entry"] * 3
        unit = "bytes" if packed else "entries"
        total = len(before) + 1000
        assert m.cut == f"4 bad entries, then 996 of the message's {total} {unit} not read"
        assert parse_message(["ql", before + second[:3]], max_bad_entries=3).cut is None

    def test_parse_weight(self) -> None:
        """What a parse may cost: bytes of packed entries, 16 per Forward entry, the bound for compressed ones."""
        assert parse_weight(["ql", b"\x00" * 100]) == 100
        assert parse_weight(["ql", [[1, R1]] * 10]) == 160
        assert parse_weight(["ql", b"x", {"compressed": "gzip"}]) == MAX_DECOMPRESSED_BYTES
        assert parse_weight(["ql", 1, R1]) == 0
        assert parse_weight("garbage") == 0


class TestFraming:
    def test_a_frame_split_across_reads(self) -> None:
        """Bytes of one frame fed in pieces give the frame once it is complete, and never earlier."""
        d = FrameDecoder(1024)
        assert d.feed(FORWARD[:10]) == []
        assert d.feed(FORWARD[10:50]) == []
        (obj,) = d.feed(FORWARD[50:] + MESSAGE[:3])
        assert parse_message(obj).entries == TWO_ENTRIES
        assert d.buffered == 3
        assert parse_message(d.feed(MESSAGE[3:])[0]).entries == [TWO_ENTRIES[0]]

    def test_an_oversized_frame_complete_in_one_read(self) -> None:
        """A frame over the limit is refused even when it arrives whole."""
        with pytest.raises(ProtocolError, match="oversized_frame"):
            FrameDecoder(64).feed(packb(["ql", 1, {"q": "x" * 100}]))

    def test_an_oversized_frame_still_arriving(self) -> None:
        """A frame in progress that passes the limit is refused before it completes (the bytes are not kept)."""
        d = FrameDecoder(64)
        frame = packb(["ql", [[1, {"q": "x"}]] * 50])  # many small pieces: each one completes, the frame does not
        with pytest.raises(ProtocolError, match="oversized_frame"):
            d.feed(frame[:100])

    def test_the_budget_closes_the_longest_idle_partial_frame(self) -> None:
        """Partial frames of all connections count against one budget; past it the one idle longest is closed
        (the one that just read only when it is the last), complete frames cost nothing."""
        closed: list[str] = []
        budget = FrameBudget(100)
        conns = {name: Framing(FrameDecoder(1024), functools.partial(closed.append, name)) for name in "abc"}
        frame = packb(["ql", b"x" * 200])
        budget.feed(conns["a"], frame[:60], now=1.0)
        budget.feed(conns["b"], frame[:30], now=2.0)
        assert (budget.total, closed) == (90, [])
        budget.feed(conns["c"], frame[:20], now=3.0)  # 110: a, idle since 1.0, goes
        assert (budget.total, closed, conns["a"].evicted) == (50, ["a"], True)
        assert budget.feed(conns["b"], frame[30:], now=4.0) == [unpackb(frame)]  # complete: b holds nothing
        assert budget.total == 20
        budget.feed(conns["c"], frame[20:150], now=5.0)  # c alone is over: it goes itself
        assert (budget.total, closed, budget.evictions) == (0, ["a", "c"], 2)

    def test_many_small_frames_in_one_large_read(self) -> None:
        """A read larger than the limit is fine when every frame in it is within the limit."""
        d = FrameDecoder(64)
        assert len(d.feed(MESSAGE * 20)) == 20


# ---- hypothesis ---------------------------------------------------------------------------------

STREAM = MESSAGE + FORWARD + PACKED_FORWARD_BIN + PACKED_FORWARD_STR + COMPRESSED_PACKED_FORWARD + MESSAGE_WITH_OPTION
KNOWN_REASONS = {
    "oversized_frame",
    "invalid_msgpack",
    "bad_message",
    "bad_tag",
    "bad_option",
    "bad_chunk",
    "unsupported_compression",
    "bad_gzip",
    "decompressed_too_large",
}


def parse_all(chunks: list[bytes], max_frame: int = 4096) -> list[Any]:
    d = FrameDecoder(max_frame)
    out = []
    for c in chunks:
        for obj in d.feed(c):
            m = parse_message(obj)
            out.append((m.mode, m.tag, m.entries, m.chunk, m.bad))
    return out


WHOLE = parse_all([STREAM])


@given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=30))
def test_any_split_of_a_valid_stream_parses_the_same(cuts: list[int]) -> None:
    """However the stream is cut into reads, the same messages come out, in the same order."""
    points = sorted(set(cuts))
    chunks = [STREAM[a:b] for a, b in zip([0, *points], [*points, len(STREAM)])]
    assert parse_all(chunks) == WHOLE


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.binary(max_size=300), max_size=8), st.integers(min_value=16, max_value=512))
def test_garbage_raises_only_counted_protocol_errors(chunks: list[bytes], max_frame: int) -> None:
    """Random bytes either parse (as msgpack that happens to be valid) or raise a ProtocolError with a known reason."""
    try:
        parse_all(chunks, max_frame)
    except ProtocolError as exc:
        assert exc.reason in KNOWN_REASONS


msgpack_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=4), inner, max_size=4),
    max_leaves=12,
)


@given(st.lists(msgpack_values, max_size=5))
def test_any_msgpack_object_is_a_message_or_a_counted_error(obj: list[Any]) -> None:
    """Whatever well-formed msgpack a peer sends, parse_message gives a Message or a ProtocolError (nothing else)."""
    data = msgpack.packb(obj, use_bin_type=True)
    try:
        parse(data)
    except ProtocolError as exc:
        assert exc.reason in KNOWN_REASONS


# ---- handshake and heartbeat ----------------------------------------------------------------------

NONCE = bytes(range(16))
SALT = bytes(range(16, 32))
KEY = b"shared-secret"


def sha512_hex(*parts: bytes) -> str:
    return hashlib.sha512(b"".join(parts)).hexdigest()


class TestHandshake:
    def test_helo_bytes(self) -> None:
        """HELO: ["HELO", {"nonce": bin16, "auth": "", "keepalive": true}] — and with user auth a bin16 salt."""
        assert make_helo(NONCE, None, True) == h(
            "92 a4 48 45 4c 4f"  # ["HELO",
            " 83 a5 6e 6f 6e 63 65 c4 10 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f"  # {"nonce": bin 00..0f,
            " a4 61 75 74 68 a0"  # "auth": "",
            " a9 6b 65 65 70 61 6c 69 76 65 c3"  # "keepalive": true}]
        )
        assert parse_helo(unpackb(make_helo(NONCE, SALT, False))) == Helo(NONCE, SALT, False)

    def test_ping_pong_with_shared_key_and_user(self) -> None:
        """PING digests are sha512_hex(salt + hostname + nonce + key) and sha512_hex(auth + user + password);
        the server checks them and answers PONG with sha512_hex(salt + server_hostname + nonce + key)."""
        ping_bytes = make_ping("client-a", "c-salt", Helo(NONCE, SALT, True), KEY, "alice", b"pw")
        ping = parse_ping(unpackb(ping_bytes))
        assert unpackb(ping_bytes) == [
            "PING",
            "client-a",
            "c-salt",
            sha512_hex(b"c-salt", b"client-a", NONCE, KEY),
            "alice",
            sha512_hex(SALT, b"alice", b"pw"),
        ]
        ok = check_ping(ping, nonce=NONCE, shared_key=KEY, self_hostname="srv", auth_salt=SALT, users={"alice": b"pw"})
        assert ok is None
        pong = make_pong(True, "", "srv", ping.salt, NONCE, KEY)
        assert unpackb(pong) == ["PONG", True, "", "srv", sha512_hex(b"c-salt", b"srv", NONCE, KEY)]
        check_pong(unpackb(pong), hostname="client-a", salt="c-salt", nonce=NONCE, shared_key=KEY)

    @pytest.mark.parametrize(
        ("ping_args", "users", "reason"),
        [
            (("client-a", b"wrong-key", "", b""), {}, "shared_key_mismatch"),
            (("srv", KEY, "", b""), {}, "same_hostname_as_server"),
            (("client-a", KEY, "alice", b"nope"), {"alice": b"pw"}, "username_password_mismatch"),
            (("client-a", KEY, "mallory", b"pw"), {"alice": b"pw"}, "username_password_mismatch"),
        ],
    )
    def test_failed_pings(self, ping_args: tuple[str, bytes, str, bytes], users: dict[str, bytes], reason: str) -> None:
        """A wrong key, a loop (same host name) or a wrong user/password is refused with its reason."""
        host, key, user, pw = ping_args
        auth = SALT if users else None
        ping = parse_ping(unpackb(make_ping(host, "s", Helo(NONCE, auth or b"", True), key, user, pw)))
        got = check_ping(ping, nonce=NONCE, shared_key=KEY, self_hostname="srv", auth_salt=auth, users=users)
        assert got == reason

    def test_client_checks_the_pong(self) -> None:
        """A refusing PONG, or one whose digest proves no knowledge of the key, fails the client's check."""
        with pytest.raises(ProtocolError, match="authentication_refused"):
            check_pong(["PONG", False, "shared_key_mismatch", "srv", ""], hostname="c", salt="s", nonce=NONCE,
                       shared_key=KEY)  # fmt: skip
        forged = unpackb(make_pong(True, "", "srv", b"s", NONCE, b"other key"))
        with pytest.raises(ProtocolError, match="server_shared_key_mismatch"):
            check_pong(forged, hostname="c", salt="s", nonce=NONCE, shared_key=KEY)
        with pytest.raises(ProtocolError, match="bad_ping"):
            parse_ping(["PING", "c"])

    def test_heartbeat(self) -> None:
        """UDP heartbeat: 00 (or msgpack nil c0) is answered 00; anything else is not answered."""
        assert heartbeat_reply(h("00")) == h("00")
        assert heartbeat_reply(h("c0")) == h("00")
        assert heartbeat_reply(b"hello") is None
