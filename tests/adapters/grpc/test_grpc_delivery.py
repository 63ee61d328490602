"""What a caller can receive: `Filter` with a buffering chain (`server.filter_release`) and `GetProfile` by
pseudonymous id (`server.profile_lookup`)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from helpers.grpc_sidecar import HoldAll, sidecar, write_config

from adapters.grpc.client import channel, get_profile, get_stats
from adapters.grpc.codec import EventBatch
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub

BUFFER = "  - category_buffer: {k: 5, unknown: bucket, avoid_repeat_pairs: 0}\n"


def _batch(prefix: str, n: int) -> EventBatch:
    batch = EventBatch(batch_id=prefix)
    for i in range(n):
        batch.events.add(user=f"{prefix}-user-{i}", query=f"{prefix} query {i}", seq=i + 1)
    return batch


class Stream:
    """A Filter stream whose requests are sent one at a time; ``send`` returns that request's response."""

    def __init__(self, stub: QueryLogFilterStub) -> None:
        self._next: list[EventBatch | None] = []
        self._ready = threading.Condition()
        self.call = stub.Filter(self._requests(), timeout=30)

    def _requests(self) -> Iterator[EventBatch]:
        while True:
            with self._ready:
                self._ready.wait_for(lambda: bool(self._next))
                item = self._next.pop(0)
            if item is None:
                return
            yield item

    def _put(self, item: EventBatch | None) -> None:
        with self._ready:
            self._next.append(item)
            self._ready.notify()

    def send(self, batch: EventBatch) -> EventBatch:
        self._put(batch)
        response: EventBatch = next(self.call)
        return response

    def close(self) -> list[EventBatch]:
        self._put(None)
        return list(self.call)


def _two_streams(config: Path) -> tuple[list[str], list[str], int, int]:
    """Streams A then B (both open) each send 20 events through category_buffer (k=5); returns the queries A's and
    B's responses carried (tails included), events_out and events_held."""
    with sidecar(config) as sc:
        a, b = Stream(QueryLogFilterStub(sc.chan)), Stream(QueryLogFilterStub(sc.chan))
        got_a = [m.query for m in a.send(_batch("alpha", 20)).events]
        got_b = [m.query for m in b.send(_batch("bravo", 20)).events]
        got_b += [m.query for r in b.close() for m in r.events]
        got_a += [m.query for r in a.close() for m in r.events]
        stats = get_stats(sc.chan)
    return got_a, got_b, stats.events_out, stats.events_held


def test_released_events_go_to_the_sinks_never_to_another_stream(tmp_path: Path) -> None:
    """Default `filter_release: sinks`: with category_buffer (k=5) and a file sink, stream B never receives one of
    stream A's queries (nor A one of B's): re-paired events are no caller's own, so every release goes to the sink
    and the responses are empty; what left the chain is in the sink, the rest is held."""
    config = write_config(tmp_path, "filters:\n" + BUFFER + "sinks:\n  - file: {path: out.tsv}\n")
    got_a, got_b, out, held = _two_streams(config)
    assert got_a == [] and got_b == []
    lines = (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert len(lines) == out > 0 and out + held == 40
    assert {line.split("\t")[1].split()[0] for line in lines} == {"alpha", "bravo"}


def test_any_stream_keeps_the_old_behaviour(tmp_path: Path) -> None:
    """`filter_release: any_stream` (single-tenant): released events go to whichever Filter stream asks next, so
    stream B receives some of stream A's queries (what issue 11 found)."""
    config = write_config(tmp_path, "server: {filter_release: any_stream}\nfilters:\n" + BUFFER)
    got_a, got_b, out, held = _two_streams(config)
    assert [q for q in got_b if q.startswith("alpha")], got_b
    assert len(got_a) + len(got_b) == out and out + held == 40


def test_a_stream_gets_its_own_events_that_passed_straight_through(tmp_path: Path) -> None:
    """Under `sinks`, events of the request itself that passed through the chain come back in its response;
    events a buffering filter held from an earlier request and lets out now go to the sink, not to the caller."""

    class HoldFirst(HoldAll):
        """Holds the events of the first batch it sees, passes later ones, releases the held ones with the next."""

        def __init__(self) -> None:
            super().__init__()
            self.seen = 0

        def process(self, batch):  # test double
            self.seen += 1
            if self.seen == 1:
                return super().process(batch)
            out, self.buffer = self.buffer, []
            return out + batch

    config = write_config(tmp_path, "filters: []\nsinks:\n  - file: {path: out.tsv}\n")
    with sidecar(config, extra_filters=(HoldFirst(),)) as sc:
        a, b = Stream(QueryLogFilterStub(sc.chan)), Stream(QueryLogFilterStub(sc.chan))
        first = a.send(_batch("alpha", 3))
        second = b.send(_batch("bravo", 2))
        a.close()
        b.close()
    assert list(first.events) == []
    assert [m.query for m in second.events] == ["bravo query 0", "bravo query 1"]
    lines = (tmp_path / "out.tsv").read_text(encoding="utf-8").splitlines()[1:]
    assert [line.split("\t")[1] for line in lines] == ["alpha query 0", "alpha query 1", "alpha query 2"]


def test_filter_with_a_buffering_chain_and_no_sink_is_refused(tmp_path: Path) -> None:
    """Default `filter_release: sinks` with a buffering chain and no sinks: Filter is FAILED_PRECONDITION with a
    message that says why and what to do; a chain that does not buffer is served as before."""
    with sidecar(write_config(tmp_path, "filters:\n" + BUFFER)) as sc, pytest.raises(grpc.RpcError) as err:
        list(QueryLogFilterStub(sc.chan).Filter(iter([_batch("alpha", 2)]), timeout=10))
    assert err.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert err.value.details() == "buffering chain: released events go to sinks; configure a sink or use Ingest"


# ---- GetProfile -------------------------------------------------------------------------------------------


def _profile_config(tmp_path: Path, filters: str, server: str = "") -> Path:
    """A config whose `reader` fixture token may read profiles (GetProfile answers a configured reader only)."""
    server = ", ".join(filter(None, [server, "profile_reader_token_env: QUERYLOG_TEST_READER"]))
    return write_config(tmp_path, f"server: {{{server}}}\n" + "filters:\n" + filters)


PSEUDONYMIZE = "  - pseudonymize: {key_env: TEST_HMAC_KEY}\n"
PROFILE = "  - profile: {}\n"


@pytest.fixture
def key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_HMAC_KEY", "k" * 32)


def _profiled(config: Path, reader: str) -> tuple[str, dict[str, object]]:
    """Send one event of raw user `raw-user-1` through Filter; GetProfile (as the reader) for the emitted user and
    the raw id."""
    batch = EventBatch()
    batch.events.add(user="raw-user-1", query="weather", seq=1)
    answers: dict[str, object] = {}
    with sidecar(config) as sc, channel(sc.address, token=reader) as rc:
        (resp,) = list(QueryLogFilterStub(sc.chan).Filter(iter([batch]), timeout=10))
        emitted = resp.events[0].user
        for who in (emitted, "raw-user-1"):
            try:
                answers[who] = get_profile(rc, who, timeout=10).total
            except grpc.RpcError as exc:
                answers[who] = (exc.code(), exc.details())
    return emitted, answers


def test_get_profile_serves_pseudonyms_when_pseudonymize_runs_first(tmp_path: Path, key: None, reader: str) -> None:
    """pseudonymize (user) before profile: GetProfile answers for the pseudonym the sidecar emitted; the raw id is
    unknown (NOT_FOUND), because profiles are keyed by pseudonym."""
    emitted, answers = _profiled(_profile_config(tmp_path, PSEUDONYMIZE + PROFILE), reader)
    assert emitted != "raw-user-1"
    assert answers[emitted] == 1
    assert answers["raw-user-1"] == (grpc.StatusCode.NOT_FOUND, "unknown user")


@pytest.mark.parametrize(
    "filters", [PROFILE, PROFILE + PSEUDONYMIZE, "  - pseudonymize: {key_env: TEST_HMAC_KEY, role: url}\n" + PROFILE]
)
def test_get_profile_keyed_by_raw_ids_is_refused(tmp_path: Path, key: None, filters: str, reader: str) -> None:
    """Default `profile_lookup: pseudonym`: a profile with no pseudonymize of the user role before it (none, one
    after it, one of another role) is FAILED_PRECONDITION with a message saying why, for any id asked."""
    _, answers = _profiled(_profile_config(tmp_path, filters), reader)
    for answer in answers.values():
        assert isinstance(answer, tuple) and answer[0] == grpc.StatusCode.FAILED_PRECONDITION
        assert "raw user ids" in answer[1] and "profile_lookup: raw" in answer[1]


def test_get_profile_raw_lookup_when_configured(tmp_path: Path, reader: str) -> None:
    """`profile_lookup: raw`: a profile filter without pseudonymize serves the raw user id."""
    _, answers = _profiled(_profile_config(tmp_path, PROFILE, "profile_lookup: raw"), reader)
    assert answers["raw-user-1"] == 1
