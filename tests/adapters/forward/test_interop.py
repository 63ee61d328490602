"""Interop with forward implementations nobody here wrote.

* npm ``@fluent-org/logger``: its ``FluentClient`` (all four modes, acks, shared key, TLS) drives our source,
  and our sink delivers into its ``FluentServer`` (handshake, acks). Installed by the ``fluent_node`` fixture
  into tests/.npm-cache; skipped only where node/npm are absent.
* PyPI ``fluent-logger``: its ``FluentSender`` and ``asyncsender.FluentSender`` (Message mode, no acks, no
  handshake, no TLS: the package has none of them) drive our source.
"""

from __future__ import annotations

import base64
import json
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fluent import asyncsender, sender
from helpers.certs import make_pki
from helpers.forward import NODE_SCRIPTS, Served, node_env, write_sidecar_config
from helpers.waiting import wait_until

from adapters.forward.codec import ForwardCodec
from adapters.forward.protocol import Entry, EventTime
from adapters.forward.sink import ForwardSink
from adapters.forward.source import ForwardSource
from sidecar.api import RecordBatch
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

Serve = Callable[..., Served]
R1 = {"AnonID": "217", "Query": "lottery", "QueryTime": "2006-03-01 07:17:12", "ItemRank": 1, "ClickURL": ""}
R2 = {"AnonID": "1326", "Query": "westchester.gov", "raw": b"\x00\xffbin", "n": [1, 2.5, None, True]}
NODE_EVENTS = [
    ["search", {"int": 1141251120}, R1],
    ["search", {"eventTime": [1141251180, 123456789]}, {**R2, "raw": {"$bin": base64.b64encode(R2["raw"]).decode()}}],
    ["click", {"int": 1141251190}, {"AnonID": "9", "Query": ""}],
]
EXPECTED = [
    Entry("app.search", 1141251120, R1),
    Entry("app.search", EventTime(1141251180, 123456789), R2),
    Entry("app.click", 1141251190, {"AnonID": "9", "Query": ""}),
]


def run_client(folder: Path, tmp_path: Path, spec: dict[str, Any], timeout: float = 60) -> dict[str, Any]:
    path = tmp_path / f"client-{time.monotonic_ns()}.json"
    path.write_text(json.dumps({"tagPrefix": "app", "events": NODE_EVENTS, **spec}), encoding="utf-8")
    proc = subprocess.run(
        ["node", str(NODE_SCRIPTS / "client.js"), str(path)],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=node_env(folder),
        check=False,
    )
    lines = proc.stdout.strip().splitlines()
    result: dict[str, Any] = json.loads(lines[-1]) if lines else {"emitted": 0, "no_output": True}
    result["returncode"] = proc.returncode
    return result


def sorted_entries(entries: list[Entry]) -> list[Entry]:
    return sorted(entries, key=lambda e: (e.tag, float(e.time)))


# ---- @fluent-org/logger FluentClient -> our source --------------------------------------------------------


@pytest.mark.parametrize("ack", [False, True], ids=["plain", "ack"])
@pytest.mark.parametrize("mode", ["Message", "Forward", "PackedForward", "CompressedPackedForward"])
def test_fluent_client_modes(
    fluent_node: Path, serve_forward: Serve, tmp_path: Path, mode: str, ack: bool
) -> None:  # fmt: skip
    """Every event mode of FluentClient, with and without acks: the entries reach the sinks with their tags,
    times (whole seconds as integers, EventTime with its nanoseconds) and records (bin values as bytes)."""
    served = serve_forward()
    result = run_client(fluent_node, tmp_path, {"port": served.port, "mode": mode, "ack": ack})
    assert result["returncode"] == 0, result
    wait_until(lambda: len(served.capture.events) == 3, what="3 events delivered")
    assert sorted_entries(served.capture.entries()) == sorted_entries(EXPECTED)
    stats = served.source.stats()
    want_mode = {"Message": "message", "Forward": "forward"}.get(mode, "packed_forward")
    if mode == "CompressedPackedForward":
        want_mode = "compressed_packed_forward"
    assert stats[f"messages_{want_mode}"] >= 1
    assert (stats.get("acks", 0) >= 1) == ack


def test_fluent_client_shared_key_user_and_tls(
    fluent_node: Path, serve_forward: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FluentClient over TLS, with the shared-key handshake and user authentication, and acks."""
    pki = make_pki(tmp_path / "pki")
    monkeypatch.setenv("FWD_KEY", "node-shared-0123456789")
    monkeypatch.setenv("FWD_PW", "node-pw")
    served = serve_forward(
        shared_key_env="FWD_KEY",
        users=[{"username": "nodeuser", "password_env": "FWD_PW"}],
        self_hostname="sidecar-in",
        tls_cert_file=str(pki.server.cert),
        tls_key_file=str(pki.server.key),
    )
    security = {"clientHostname": "node-client", "sharedKey": "node-shared-0123456789", "username": "nodeuser",
                "password": "node-pw"}  # fmt: skip
    spec = {"port": served.port, "mode": "PackedForward", "ack": True, "security": security, "tlsCa": str(pki.ca)}
    result = run_client(fluent_node, tmp_path, spec)
    assert result["returncode"] == 0, result
    assert sorted_entries(served.capture.entries()) == sorted_entries(EXPECTED)
    assert served.source.stats()["handshakes"] >= 1


def test_fluent_client_shared_key_plain(
    fluent_node: Path, serve_forward: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FluentClient with the shared-key handshake without TLS, Forward mode with acks."""
    monkeypatch.setenv("FWD_KEY", "node-shared-0123456789")
    served = serve_forward(shared_key_env="FWD_KEY", self_hostname="sidecar-in")
    security = {"clientHostname": "node-client", "sharedKey": "node-shared-0123456789"}
    result = run_client(fluent_node, tmp_path, {"port": served.port, "mode": "Forward", "ack": True,
                                                 "security": security})  # fmt: skip
    assert result["returncode"] == 0, result
    assert len(served.capture.events) == 3


def test_fluent_client_with_a_wrong_key_is_refused(
    fluent_node: Path, serve_forward: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A FluentClient with another shared key gets a refusing PONG: nothing is delivered, the failure is counted."""
    monkeypatch.setenv("FWD_KEY", "right-0123456789abcdef")
    served = serve_forward(shared_key_env="FWD_KEY", self_hostname="sidecar-in")
    security = {"clientHostname": "node-client", "sharedKey": "wrong-0123456789abcdef"}
    spec = {"port": served.port, "mode": "Message", "ack": True, "ackTimeout": 1000, "security": security}
    result = run_client(fluent_node, tmp_path, spec)
    assert result["returncode"] != 0 or result["emitted"] == 0, result  # its emits never resolve: node gives up
    assert served.capture.events == []
    assert served.source.stats()["auth_failed_shared_key_mismatch"] >= 1


# ---- our sink -> @fluent-org/logger FluentServer ---------------------------------------------------------


class NodeServer:
    """``node server.js``: a FluentServer printing every entry it receives."""

    def __init__(self, folder: Path, tmp_path: Path, spec: dict[str, Any]) -> None:
        path = tmp_path / f"server-{time.monotonic_ns()}.json"
        path.write_text(json.dumps(spec), encoding="utf-8")
        self.proc = subprocess.Popen(
            ["node", str(NODE_SCRIPTS / "server.js"), str(path)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=node_env(folder),
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        assert first, self.proc.stderr.read() if self.proc.stderr else ""
        self.port = int(json.loads(first)["port"])
        self.entries: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.entries.append(json.loads(line))

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def node_server(fluent_node: Path, tmp_path: Path) -> Iterator[Callable[..., NodeServer]]:
    made: list[NodeServer] = []

    def start(**spec: Any) -> NodeServer:
        s = NodeServer(fluent_node, tmp_path, spec)
        made.append(s)
        return s

    yield start
    for s in made:
        s.close()


@pytest.fixture
def sink_pipeline(tmp_path: Path) -> Iterator[Callable[..., Pipeline]]:
    made: list[Pipeline] = []

    def build(**options: Any) -> Pipeline:
        options.setdefault("retry_initial_seconds", 0.05)
        options.setdefault("retry_max_seconds", 0.2)
        options.setdefault("close_drain_seconds", 0)
        folder = tmp_path / f"out{len(made)}"
        folder.mkdir()
        p = Pipeline(load_config(write_sidecar_config(folder, {"sinks": [{"forward": options}]})))
        made.append(p)
        return p

    yield build
    for p in made:
        p.close()


def as_node_json(entry: Entry) -> dict[str, Any]:
    """An entry as server.js prints it."""
    t = entry.time
    time_json = {"eventTime": [t.seconds, t.nanoseconds]} if isinstance(t, EventTime) else {"int": t}

    def value(v: Any) -> Any:
        if isinstance(v, bytes):
            return {"$bin": base64.b64encode(v).decode()}
        if isinstance(v, dict):
            return {k: value(x) for k, x in v.items()}
        if isinstance(v, list):
            return [value(x) for x in v]
        return v

    return {"tag": entry.tag, "time": time_json, "record": value(entry.record)}


@pytest.mark.parametrize(
    "options",
    [{"require_ack": False}, {"require_ack": True}, {"require_ack": True, "compress": "gzip"}],
    ids=["plain", "ack", "gzip_ack"],
)
def test_sink_into_fluent_server(
    node_server: Callable[..., NodeServer], sink_pipeline: Callable[..., Pipeline], options: dict[str, Any]
) -> None:
    """Our sink's PackedForward (and CompressedPackedForward) batches are read by FluentServer entry by entry, with
    tags, times and records as they came in; with require_ack its acks empty our outbox."""
    server = node_server()
    out = sink_pipeline(address=f"127.0.0.1:{server.port}", **options)
    out.receive(RecordBatch(EXPECTED, ForwardCodec(), "test"))
    wait_until(lambda: len(server.entries) == 3, what="3 entries at the server")
    key = lambda e: (e["tag"], json.dumps(e["time"]))  # noqa: E731
    assert sorted(server.entries, key=key) == sorted(map(as_node_json, EXPECTED), key=key)
    sink = out.sinks[0]
    assert isinstance(sink, ForwardSink) and sink.outbox is not None and sink.outbox.drain(5)


def test_sink_handshake_and_tls_into_fluent_server(
    node_server: Callable[..., NodeServer],
    sink_pipeline: Callable[..., Pipeline],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """FluentServer with TLS, a shared key and user authorization: our sink answers HELO with PING, checks the PONG,
    and its acked batches arrive."""
    pki = make_pki(tmp_path / "pki")
    monkeypatch.setenv("FWD_KEY", "k-node-0123456789abcdef")
    monkeypatch.setenv("FWD_PW", "pw-node")
    security = {"serverHostname": "node-server", "sharedKey": "k-node-0123456789abcdef", "authorize": True,
                "userDict": {"sidecar": "pw-node"}}  # fmt: skip
    server = node_server(security=security, tlsCert=str(pki.server.cert), tlsKey=str(pki.server.key))
    out = sink_pipeline(
        address=f"localhost:{server.port}",
        shared_key_env="FWD_KEY",
        username="sidecar",
        password_env="FWD_PW",
        tls=True,
        tls_ca_file=str(pki.ca),
    )
    out.receive(RecordBatch(EXPECTED, ForwardCodec(), "test"))
    wait_until(lambda: len(server.entries) == 3, what="3 entries at the server")
    sink = out.sinks[0]
    assert isinstance(sink, ForwardSink) and sink.outbox is not None and sink.outbox.drain(5)
    assert sink.client.handshake_failures == 0


def test_sink_with_a_wrong_key_keeps_its_batch(
    node_server: Callable[..., NodeServer], sink_pipeline: Callable[..., Pipeline], monkeypatch: pytest.MonkeyPatch
) -> None:
    """FluentServer refuses our PING (another key): the handshake failure is counted and nothing is lost."""
    monkeypatch.setenv("FWD_KEY", "not-the-key-0123456789")
    security = {
        "serverHostname": "node-server",
        "sharedKey": "k-node-0123456789abcdef",
        "authorize": False,
        "userDict": {},
    }
    server = node_server(security=security)
    out = sink_pipeline(address=f"127.0.0.1:{server.port}", shared_key_env="FWD_KEY")
    out.receive(RecordBatch(EXPECTED, ForwardCodec(), "test"))
    sink = out.sinks[0]
    assert isinstance(sink, ForwardSink)
    wait_until(lambda: sink.client.handshake_failures >= 1, what="a failed handshake")
    assert sink.outbox is not None and sink.outbox.pending().events == 3 and server.entries == []


def test_client_to_source_to_sink_to_server(
    fluent_node: Path, node_server: Callable[..., NodeServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """FluentClient → our source → passthrough chain → our sink → FluentServer, acks and shared keys on both hops:
    every event arrives with its tag, time and record."""
    monkeypatch.setenv("FWD_IN", "in-key-0123456789abcdef")
    monkeypatch.setenv("FWD_OUT", "out-key-0123456789abcdef")
    security = {
        "serverHostname": "node-server",
        "sharedKey": "out-key-0123456789abcdef",
        "authorize": False,
        "userDict": {},
    }
    server = node_server(security=security)
    body = {
        "sources": [{"forward": {"listen": "127.0.0.1:0", "shared_key_env": "FWD_IN", "self_hostname": "sc-in"}}],
        "sinks": [{"forward": {"address": f"127.0.0.1:{server.port}", "shared_key_env": "FWD_OUT"}}],
    }
    cfg = load_config(write_sidecar_config(tmp_path, body))
    pipeline = Pipeline(cfg)
    spec = cfg.source("forward")
    assert spec is not None
    source = ForwardSource(spec.config, pipeline.ctx)
    source.start(pipeline)
    try:
        client_security = {"clientHostname": "node-client", "sharedKey": "in-key-0123456789abcdef"}
        client_spec = {"port": source.port, "mode": "PackedForward", "ack": True, "security": client_security,
                       "repeat": 50}  # fmt: skip
        result = run_client(fluent_node, tmp_path, client_spec)
        assert result["returncode"] == 0 and result["emitted"] == 150, result
        wait_until(lambda: len(server.entries) == 150, what="150 entries at the server")
        assert {e["tag"] for e in server.entries} == {"app.search", "app.click"}
    finally:
        source.stop(1.0)
        pipeline.close()


# ---- PyPI fluent-logger -> our source ----------------------------------------------------------------------


def test_fluent_logger_sender(serve_forward: Serve) -> None:
    """fluent-logger's FluentSender (Message mode): integer times and, with nanosecond_precision, EventTime."""
    served = serve_forward()
    s = sender.FluentSender("py", host="127.0.0.1", port=served.port)
    assert s.emit_with_time("search", 1141251120, R1)
    ns = sender.FluentSender("py", host="127.0.0.1", port=served.port, nanosecond_precision=True)
    assert ns.emit("search", {"AnonID": "5", "Query": "fluent"})
    s.close()
    ns.close()
    wait_until(lambda: len(served.capture.events) == 2, what="2 events delivered")
    first, second = sorted(served.capture.entries(), key=lambda e: e.record["AnonID"])
    assert first == Entry("py.search", 1141251120, R1)
    assert second.tag == "py.search" and isinstance(second.time, EventTime)
    assert served.source.stats()["messages_message"] == 2


def test_fluent_logger_async_sender(serve_forward: Serve) -> None:
    """fluent-logger's asyncsender (a queue and a thread, Message mode): every event arrives."""
    served = serve_forward()
    s = asyncsender.FluentSender("py", host="127.0.0.1", port=served.port)
    for i in range(100):
        s.emit_with_time("bulk", 1141251120 + i, {"AnonID": str(i), "Query": f"q{i}"})
    s.close()
    wait_until(lambda: len(served.capture.events) == 100, what="100 events delivered")
    assert sorted(int(e.record["AnonID"]) for e in served.capture.entries()) == list(range(100))
