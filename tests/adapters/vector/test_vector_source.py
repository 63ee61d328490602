"""The ``vector`` source, driven by a real gRPC client: acknowledgements only for durable events, error statuses
Vector retries, dead letters by reason, the byte fixtures, TLS, health, the flush timer."""

from __future__ import annotations

import errno
import json
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import pytest
from helpers import wait_until
from helpers.certs import make_pki
from helpers.grpc_sidecar import HoldAll
from helpers.vector import ROLES_YAML, log_event, request, vector_sidecar

from adapters.vector.codec import split_request
from adapters.vector.stubs.event_pb2 import EventWrapper
from adapters.vector.stubs.vector_pb2 import NOT_SERVING, SERVING, HealthCheckRequest, HealthCheckResponse
from adapters.vector.stubs.vector_pb2_grpc import VectorStub
from sidecar.api import Event, Filter, FilterConfig, Sink, SinkConfig
from sidecar.outbox import Outbox, OutboxFull

FIXTURES = Path(__file__).resolve().parent / "testdata" / "fixtures"


def config(tmp_path: Path, extra: str = "", source: str = "{}") -> Path:
    """A sidecar with the vector source, the test roles and a JSON lines file sink (out.jsonl)."""
    path = tmp_path / "sidecar.yaml"
    path.write_text(
        "state_dir: state\n"
        + ROLES_YAML
        + f"sources:\n  - vector: {source}\n"
        + "sinks:\n  - file: {path: out.jsonl, format: jsonl}\n"
        + extra,
        encoding="utf-8",
    )
    return path


def lines(tmp_path: Path) -> list[dict[str, Any]]:
    out = tmp_path / "out.jsonl"
    return [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()] if out.exists() else []


class _Fake(Sink[SinkConfig]):
    NAME = "fake"

    def __init__(self) -> None:
        super().__init__(SinkConfig(), None)  # a fake: no BuildContext


class Raising(_Fake):
    """A sink whose write raises ``exc``."""

    def __init__(self, exc: BaseException) -> None:
        super().__init__()
        self.exc = exc

    def write(self, events: list[Event]) -> None:
        raise self.exc


class Gate(_Fake):
    """A sink whose flush waits until the test opens the gate; ``durable`` lists what a flush delivered."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.open = threading.Event()
        self.batch: list[Event] = []
        self.durable: list[Event] = []

    def write(self, events: list[Event]) -> None:
        self.batch.extend(events)

    def flush(self) -> None:
        if self.batch:
            self.entered.set()
            assert self.open.wait(10)
            self.durable.extend(self.batch)
            self.batch = []


class Counting(Filter[FilterConfig]):
    """Passes events on, counting them."""

    NAME = "counting"

    def __init__(self) -> None:
        super().__init__(FilterConfig(), None)  # a fake: no BuildContext
        self.seen = 0

    def process(self, batch: list[Event]) -> list[Event]:
        self.seen += len(batch)
        return batch


def events(n: int, start: int = 0) -> bytes:
    return request([log_event({"user_id": f"u{i}", "message": f"query {i}"}) for i in range(start, start + n)])


def test_push_events_is_delivered_and_health_is_serving(tmp_path: Path) -> None:
    """Through the generated VectorStub (the client Vector's sink is): PushEvents returns an empty
    PushEventsResponse once the events are in the sink's file; HealthCheck answers SERVING."""
    with vector_sidecar(config(tmp_path)) as sc:
        stub = VectorStub(sc.channel)
        assert stub.HealthCheck(HealthCheckRequest(), timeout=5).status == SERVING
        from adapters.vector.stubs.vector_pb2 import PushEventsRequest

        req = PushEventsRequest.FromString(events(3))
        assert stub.PushEvents(req, timeout=10).ByteSize() == 0
        assert [line["message"] for line in lines(tmp_path)] == ["query 0", "query 1", "query 2"]
        assert sc.source.server is not None and sc.source.server.counts["ok"] == 1


def test_health_says_not_serving_while_stopping(tmp_path: Path) -> None:
    with vector_sidecar(config(tmp_path)) as sc:
        server = sc.source.server
        assert server is not None
        server.serving = False  # what stop() sets first
        assert sc.health().status == NOT_SERVING


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (RuntimeError("a sink broke"), grpc.StatusCode.UNAVAILABLE),
        (OutboxFull("downstream", "max_batches"), grpc.StatusCode.RESOURCE_EXHAUSTED),
        (OSError(errno.ENOSPC, "No space left on device"), grpc.StatusCode.RESOURCE_EXHAUSTED),
    ],
    ids=["sink_error", "outbox_full", "disk_full"],
)
def test_failed_receive_answers_an_error_status_never_ok(
    tmp_path: Path, exc: BaseException, code: grpc.StatusCode
) -> None:
    """When receive raises (a sink that cannot write, a full outbox, a full disk), the reply is an error status
    Vector retries; its detail names no value; the next request after the fault is acknowledged again."""
    sink = Raising(exc)
    with vector_sidecar(config(tmp_path), extra_sinks=[sink]) as sc:
        with pytest.raises(grpc.RpcError) as err:
            sc.push(events(2))
        assert err.value.code() == code
        assert "query" not in (err.value.details() or "") and "u0" not in (err.value.details() or "")
        sc.pipeline.sinks.remove(sink)
        assert sc.push(events(1, start=5)) == b""
        assert [line["message"] for line in lines(tmp_path)][-1] == "query 5"


def test_reply_waits_until_the_events_are_durable(tmp_path: Path) -> None:
    """While a sink's flush (the delivery point) has not returned, the PushEvents call has no reply; it gets
    one only after the events were flushed."""
    gate = Gate()
    with vector_sidecar(config(tmp_path), extra_sinks=[gate]) as sc:
        future = sc.push_future(events(4))
        assert gate.entered.wait(10), "the events never reached the sink"
        with pytest.raises(grpc.FutureTimeoutError):
            future.result(timeout=0.5)
        assert not gate.durable
        gate.open.set()
        assert future.result(timeout=10) == b""
        assert [e.query for e in gate.durable] == [f"query {i}" for i in range(4)]


def test_full_outbox_refuses_before_the_chain_runs(tmp_path: Path) -> None:
    """A sink whose outbox is full (sidecar.outboxes.backpressure) makes the source answer RESOURCE_EXHAUSTED
    without running the chain, so nothing is released into a sink that would refuse it."""

    class WithOutbox(_Fake):
        def __init__(self) -> None:
            super().__init__()
            self.outbox = Outbox(tmp_path / "outbox-state", "full_one", max_batches=1)
            self.outbox.put(b"batch", 1)  # no sender: it stays

        def write(self, events: list[Event]) -> None:
            raise AssertionError("the chain ran")

    sink = WithOutbox()
    counting = Counting()
    try:
        with vector_sidecar(config(tmp_path), extra_sinks=[sink], extra_filters=[counting]) as sc:
            with pytest.raises(grpc.RpcError) as err:
                sc.push(events(2))
            assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert counting.seen == 0
    finally:
        sink.outbox.close()


def test_bad_request_is_invalid_argument_and_dead_lettered(tmp_path: Path) -> None:
    """A request whose own framing is broken is dead-lettered (invalid_request) and refused with
    INVALID_ARGUMENT, which Vector does not retry; the service goes on."""
    with vector_sidecar(config(tmp_path)) as sc:
        with pytest.raises(grpc.RpcError) as err:
            sc.push(b"\x0a\x7fonly a few bytes")
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert sc.pipeline.dead.counts == {"invalid_request": 1}
        assert sc.push(events(1)) == b""
    letters = (tmp_path / "state" / "dead-letter.jsonl").read_text().splitlines()
    assert json.loads(letters[0])["reason"] == "invalid_request"


def test_oversized_event_is_dead_lettered_without_its_bytes(tmp_path: Path) -> None:
    """An event over limits.max_record_bytes is dead-lettered (record_too_large, its bytes not kept); the other
    events of its request are delivered and the request is acknowledged."""
    big = log_event({"user_id": "u", "message": "x" * 500})
    with vector_sidecar(config(tmp_path, "limits: {max_record_bytes: 200}\n")) as sc:
        assert sc.push(request([log_event({"user_id": "a", "message": "small"}), big])) == b""
        assert sc.pipeline.dead.counts == {"record_too_large": 1}
    assert [line["message"] for line in lines(tmp_path)] == ["small"]
    (letter,) = (tmp_path / "state" / "dead-letter.jsonl").read_text().splitlines()
    assert json.loads(letter) == {"reason": "record_too_large", "source": "vector:PushEvents", "line": 2}


def test_request_over_max_message_bytes_is_refused(tmp_path: Path) -> None:
    with vector_sidecar(config(tmp_path, source="{max_message_bytes: 1024}")) as sc:
        with pytest.raises(grpc.RpcError) as err:
            sc.push(request([log_event({"user_id": "u", "message": "y" * 2000})]))
        assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert sc.push(events(1)) == b""


def test_buffering_filter_releases_on_the_timer(tmp_path: Path) -> None:
    """Events held by a buffering filter reach the sinks when the runtime's release timer asks it to release."""
    hold = HoldAll()
    with vector_sidecar(config(tmp_path, "flush_interval_seconds: 0.05\n"), extra_filters=[hold]) as sc:
        assert sc.push(events(2)) == b""
        wait_until(lambda: len(lines(tmp_path)) >= 2, what="the timer's release to reach the sink")
    assert [line["message"] for line in lines(tmp_path)] == ["query 0", "query 1"]


def test_tls(tmp_path: Path) -> None:
    """With tls_cert_file and tls_key_file the service answers over TLS (the client trusts the CA) and a
    plaintext client gets no answer."""
    pki = make_pki(tmp_path / "pki")
    source = f"{{tls_cert_file: {pki.server.cert}, tls_key_file: {pki.server.key}}}"
    with vector_sidecar(config(tmp_path, source=source)) as sc:
        with pytest.raises(grpc.RpcError):
            sc.push(events(1), timeout=2)
        creds = grpc.ssl_channel_credentials(root_certificates=pki.ca.read_bytes())
        with grpc.secure_channel(sc.address, creds) as secure:
            assert secure.unary_unary("/vector.Vector/PushEvents")(events(1), timeout=10) == b""
            health = secure.unary_unary(
                "/vector.Vector/HealthCheck",
                request_serializer=HealthCheckRequest.SerializeToString,
                response_deserializer=HealthCheckResponse.FromString,
            )(HealthCheckRequest(), timeout=5)
            assert health.status == SERVING
    assert len(lines(tmp_path)) == 1


def test_mutual_tls(tmp_path: Path) -> None:
    """With tls_client_ca_file (the shared server TLS options), a client presenting a certificate of that CA is
    served (as Vector's sink with tls.crt_file/key_file); one without a certificate or with another CA's is not."""
    pki = make_pki(tmp_path / "pki")
    source = f"{{tls_cert_file: {pki.server.cert}, tls_key_file: {pki.server.key}, tls_client_ca_file: {pki.ca}}}"
    ca = pki.ca.read_bytes()

    def creds(pair: Any) -> grpc.ChannelCredentials:
        if pair is None:
            return grpc.ssl_channel_credentials(root_certificates=ca)
        return grpc.ssl_channel_credentials(ca, pair.key.read_bytes(), pair.cert.read_bytes())

    with vector_sidecar(config(tmp_path, source=source)) as sc:
        for refused in (None, pki.stranger):
            with grpc.secure_channel(sc.address, creds(refused)) as chan, pytest.raises(grpc.RpcError):
                chan.unary_unary("/vector.Vector/PushEvents")(events(1), timeout=5)
        with grpc.secure_channel(sc.address, creds(pki.client)) as chan:
            assert chan.unary_unary("/vector.Vector/PushEvents")(events(1), timeout=10) == b""
    assert len(lines(tmp_path)) == 1


# ---- the byte fixtures ----------------------------------------------------------------------------------------


def fixture_names() -> list[str]:
    return sorted(p.stem for p in FIXTURES.glob("*.json"))


def _load_builder() -> Callable[[Path], bytes]:
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES.parent / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    build: Callable[[Path], bytes] = module.build
    return build


@pytest.mark.parametrize("name", fixture_names())
def test_fixture_is_fresh(name: str) -> None:
    """Each committed .bin is what make_fixtures.py builds from the JSON description beside it."""
    build = _load_builder()
    assert (FIXTURES / f"{name}.bin").read_bytes() == build(FIXTURES / f"{name}.json"), (
        "stale: run python tests/adapters/vector/testdata/make_fixtures.py"
    )


@pytest.mark.parametrize("name", fixture_names())
def test_fixture_through_the_source(tmp_path: Path, name: str) -> None:
    """A fixture request, sent by a real gRPC client, is acknowledged; the JSON lines sink gets the expected
    records (typed values as text where JSON has no type for them, keys in order) and the dead letters
    count by reason what is not a query event."""
    data = (FIXTURES / f"{name}.bin").read_bytes()
    expect = json.loads((FIXTURES / f"{name}.json").read_text(encoding="utf-8"))["expect"]
    seen: list[Event] = []

    class Keep(_Fake):
        def write(self, events: list[Event]) -> None:
            seen.extend(events)

    with vector_sidecar(config(tmp_path), extra_sinks=[Keep()]) as sc:
        assert sc.push(data) == b""
        assert dict(sc.pipeline.dead.counts) == expect["dead_letters"]
    got = lines(tmp_path)
    assert got == expect["jsonl"]
    assert [list(line) for line in got] == [list(line) for line in expect["jsonl"]]  # key order too
    assert [{"user": e.user, "query": e.query, "time": e.time} for e in seen] == expect["roles"]
    logs = [w for w in split_request(data) if _is_good_log(w)]
    assert [e.record.wire for e in seen] == logs  # each event carries its bytes as they came


def _is_good_log(data: bytes) -> bool:
    try:
        w = EventWrapper.FromString(data)
    except Exception:
        return False
    fields = w.log.value.map.fields if w.log.HasField("value") else w.log.fields
    return w.WhichOneof("event") == "log" and "message" in fields
