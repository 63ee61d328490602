"""One crafted message must not take the host down (issue 24, item 7): a gRPC ``Ingest`` or ``Filter`` batch, or a
Vector ``PushEvents`` request, of 4,000,000 empty events (8 MB on the wire, well within the 64 MiB message limit)
is refused with INVALID_ARGUMENT naming the per-message bound (``max_events_per_message``) before any event is
parsed, counted by reason, while a good client sending at the same time is served.

The servers run in this process: a sampler thread reads the process's resident memory while the hostile call is in
flight, and the growth over the figure before it is bounded (loosely: a loaded machine). Measured before the bound
(same machine): gRPC Ingest peaked 2.3 GB over its start, Vector PushEvents 711 MB.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import grpc
import psutil
import pytest
from helpers.grpc_sidecar import sidecar, write_config
from helpers.vector import ROLES_YAML, log_event, request, vector_sidecar

from adapters.grpc.client import get_stats
from adapters.grpc.codec import EventBatch
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import IngestResponse
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub
from sidecar.protowire import scan_field

EVENTS = 4_000_000
HOSTILE = b"\x0a\x00" * EVENTS  # field 1 (events), length 0: an empty event, 2 bytes each
GROWTH_BOUND = 300 * 1024 * 1024
GOOD_WAIT_BOUND = 10.0
SERVICE = "/querylog.v1.QueryLogFilter/"


@contextmanager
def peak_rss() -> Iterator[list[int]]:
    """Samples this process's RSS while the block runs; yields a list that holds [growth of the peak] after it."""
    proc = psutil.Process()
    base = proc.memory_info().rss
    peak = [base]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.002):  # a measurement interval, not a wait for a condition
            peak[0] = max(peak[0], proc.memory_info().rss)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    result: list[int] = []
    try:
        yield result
    finally:
        done.set()
        sampler.join()
        result.append(max(peak[0], proc.memory_info().rss) - base)


def _meanwhile(hostile: Callable[[], object], good: Callable[[], object]) -> tuple[grpc.StatusCode, str, float]:
    """Runs ``hostile`` on a thread and ``good`` again and again (at least once) until it ended: the hostile
    call's status and details, and the longest a good call took."""
    outcome: list[tuple[grpc.StatusCode, str]] = []
    thread = threading.Thread(target=lambda: outcome.append(_outcome(hostile)), daemon=True)
    thread.start()
    longest = 0.0
    while True:
        started = time.monotonic()
        good()
        longest = max(longest, time.monotonic() - started)
        if not thread.is_alive():
            break
    thread.join()
    return (*outcome[0], longest)


def _outcome(call: Callable[[], object]) -> tuple[grpc.StatusCode, str]:
    """The status code and details a call ended with (OK and "" when it succeeded)."""
    try:
        call()
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""  # type: ignore[attr-defined]  # RpcError is also a Call
    return grpc.StatusCode.OK, ""


def _good_batch() -> EventBatch:
    batch = EventBatch()
    batch.events.add(user="1", query="weather", seq=1)
    return batch


@pytest.mark.parametrize("method", ["Ingest", "Filter"])
def test_grpc_batch_of_millions_of_empty_events_is_refused_with_bounded_memory(tmp_path: Path, method: str) -> None:
    """A hostile batch is refused (INVALID_ARGUMENT, the details name max_events_per_message and the bound), counted
    in Stats as ``too_many_events``; memory stays bounded and a good Ingest sent meanwhile is served."""
    config = write_config(tmp_path, "filters: []\nsinks:\n  - file: {path: out.tsv}\n")
    with sidecar(config) as sc:
        stub = QueryLogFilterStub(sc.chan)
        if method == "Ingest":
            ingest = sc.chan.stream_unary(SERVICE + "Ingest", response_deserializer=IngestResponse.FromString)
            hostile: Callable[[], object] = lambda: ingest(iter([HOSTILE]), timeout=300)  # noqa: E731
        else:
            stream = sc.chan.stream_stream(SERVICE + "Filter")
            hostile = lambda: list(stream(iter([HOSTILE]), timeout=300))  # noqa: E731
        with peak_rss() as growth:
            code, details, waited = _meanwhile(hostile, lambda: stub.Ingest(iter([_good_batch()]), timeout=60))
        stats = get_stats(sc.chan, timeout=10)
    print(f"\n{method}: peak RSS growth {growth[0] / 2**20:.0f} MiB, good client waited {waited:.3f} s")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_events_per_message" in details
    assert dict(stats.rpcs_refused) == {"too_many_events": 1}
    assert stats.events_in >= 1  # the good events; nothing of the hostile batch reached the chain
    assert stats.events_in == stats.events_out
    assert growth[0] < GROWTH_BOUND
    assert waited < GOOD_WAIT_BOUND


def test_grpc_batch_at_the_bound_goes_through(tmp_path: Path) -> None:
    """A batch of exactly max_events_per_message events is taken; one more is refused."""
    config = write_config(
        tmp_path, "server: {max_events_per_message: 3}\nfilters: []\nsinks:\n  - file: {path: out.tsv}\n"
    )
    with sidecar(config) as sc:
        stub = QueryLogFilterStub(sc.chan)
        batch = EventBatch()
        for i in range(3):
            batch.events.add(user="1", query="weather", seq=i)
        assert stub.Ingest(iter([batch]), timeout=10).accepted == 3
        batch.events.add(user="1", query="weather", seq=4)
        with pytest.raises(grpc.RpcError) as err:
            stub.Ingest(iter([batch]), timeout=10)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT  # type: ignore[attr-defined]


def test_vector_request_of_millions_of_empty_events_is_refused_with_bounded_memory(tmp_path: Path) -> None:
    """The same for Vector's PushEvents: INVALID_ARGUMENT (Vector does not retry it) naming the bound, counted as
    ``requests_too_many_events``; memory bounded, a good request sent meanwhile is served."""
    path = tmp_path / "sidecar.yaml"
    path.write_text(
        "state_dir: state\n"
        + ROLES_YAML
        + "sources:\n  - vector: {}\nsinks:\n  - file: {path: out.jsonl, format: jsonl}\n",
        encoding="utf-8",
    )
    good = request([log_event({"user_id": "1", "message": "weather"})])
    with vector_sidecar(path) as sc:
        with peak_rss() as growth:
            code, details, waited = _meanwhile(lambda: sc.push(HOSTILE, timeout=300), lambda: sc.push(good, timeout=60))
        counts = sc.source.server.counts if sc.source.server is not None else {}
    print(f"\nPushEvents: peak RSS growth {growth[0] / 2**20:.0f} MiB, good client waited {waited:.3f} s")
    assert code == grpc.StatusCode.INVALID_ARGUMENT
    assert "max_events_per_message" in details
    assert counts.get("too_many_events") == 1
    assert growth[0] < GROWTH_BOUND
    assert waited < GOOD_WAIT_BOUND


def test_the_wire_count_sees_past_groups_and_floods_of_other_fields() -> None:
    """scan_field counts the events of a message without parsing it: events after an unknown group are counted,
    fields inside a group are not; a flood of fields of another number is refused like too many events; an
    event over the size bound is reported."""
    group = b"\x4b" + b"\x0a\x00" * 5 + b"\x4c"  # field 9 as a group (start 0x4b, end 0x4c) holding 5 "events"
    assert scan_field(group + b"\x0a\x00" * 3, 1, 3, 100) == (3, False)
    assert scan_field(group + b"\x0a\x00" * 4, 1, 3, 100) == (4, False)
    assert scan_field(b"\x10\x01" * 100, 1, 3, 100)[0] == 4  # 100 varint fields of number 2, no event
    assert scan_field(b"\x0a\x02ab\x0a\x00", 1, 3, 1) == (2, True)
