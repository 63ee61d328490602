"""Authentication everywhere it is offered (issue 24, item 10): the ``vector`` source takes a bearer token as the
gRPC source does; ``serve`` logs each listening port with its authentication; ``check-config --strict`` refuses a
config where some network sources require authentication and others accept anyone."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from helpers.vector import ROLES_YAML, log_event, request, vector_sidecar
from structlog.testing import capture_logs

from adapters.vector.stubs.vector_pb2 import SERVING
from sidecar.cli import main
from sidecar.cli.serve import _shutdown, _start_sources
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

TOKEN = "vector-t0ken-for-tests-91c4"  # a test value, never a real secret
SINKS = "sinks:\n  - file: {path: out.jsonl, format: jsonl}\n"


def _config(tmp_path: Path, sources: str) -> Path:
    path = tmp_path / "sidecar.yaml"
    path.write_text("state_dir: state\n" + ROLES_YAML + "sources:\n" + sources + SINKS, encoding="utf-8")
    return path


def _push(channel: grpc.Channel, payload: bytes, token: str | None) -> grpc.StatusCode:
    metadata = [("authorization", f"Bearer {token}")] if token is not None else None
    try:
        channel.unary_unary("/vector.Vector/PushEvents")(payload, timeout=10, metadata=metadata)
    except grpc.RpcError as exc:
        return exc.code()  # RpcError is also a Call
    return grpc.StatusCode.OK


def test_vector_source_asks_the_bearer_token_on_push_events_not_on_health(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With auth_token_env set, PushEvents without a token or with a wrong one is UNAUTHENTICATED (counted by
    reason, nothing reaches the chain), HealthCheck answers without one, the right token is served; no log line
    carries the token."""
    monkeypatch.setenv("QUERYLOG_TEST_VECTOR_TOKEN", TOKEN)
    config = _config(tmp_path, "  - vector: {auth_token_env: QUERYLOG_TEST_VECTOR_TOKEN}\n")
    payload = request([log_event({"user_id": "1", "message": "weather"})])
    with capture_logs() as logs, vector_sidecar(config) as sc:
        codes = {who: _push(sc.channel, payload, token) for who, token in (("none", None), ("wrong", "nope"))}
        health = sc.health()
        codes["right"] = _push(sc.channel, payload, TOKEN)
        counts = sc.source.server.counts if sc.source.server is not None else {}
        auth = sc.source.authentication()
        events_in = sc.pipeline.stats()["events_in"]
    assert codes == {
        "none": grpc.StatusCode.UNAUTHENTICATED,
        "wrong": grpc.StatusCode.UNAUTHENTICATED,
        "right": grpc.StatusCode.OK,
    }
    assert health.status == SERVING
    assert counts["missing_token"] == 1 and counts["wrong_token"] == 1 and counts["ok"] == 1
    assert events_in == 1
    assert auth == ["token"]
    assert any(e["event"] == "rpc_unauthenticated" for e in logs)
    assert TOKEN not in repr(logs)


def test_serve_logs_each_listening_port_with_its_authentication(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The `listening` event of serve carries `auth`: the grpc source with a token says ["token"], a vector
    source without any says ["none"]."""
    monkeypatch.setenv("QUERYLOG_TEST_TOKEN", TOKEN)
    config = _config(
        tmp_path,
        "  - grpc: {listen: '127.0.0.1:0', auth_token_env: QUERYLOG_TEST_TOKEN}\n  - vector: {listen: '127.0.0.1:0'}\n",
    )
    cfg = load_config(config)
    pipeline = Pipeline(cfg, seed=7)
    with capture_logs() as logs:
        _shutdown(_start_sources(cfg, pipeline, None), pipeline)
    listening = {e["source"]: e["auth"] for e in logs if e["event"] == "listening"}
    assert listening == {"sources[0].grpc": ["token"], "sources[1].vector": ["none"]}


def test_check_config_strict_refuses_a_mix_of_open_and_authenticated_sources(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """check-config --strict exits 2 with one line naming each open source when another source requires
    authentication; without --strict the config is fine; with every source authenticated (grpc, vector and http
    by token, forward by its shared key) --strict passes too."""
    monkeypatch.setenv("QUERYLOG_TEST_TOKEN", TOKEN)
    mixed = _config(
        tmp_path,
        "  - grpc: {auth_token_env: QUERYLOG_TEST_TOKEN}\n  - vector: {}\n  - http: {listen: '127.0.0.1:0'}\n",
    )
    runner = CliRunner()
    strict = runner.invoke(main, ["check-config", "--strict", str(mixed)])
    lax = runner.invoke(main, ["check-config", str(mixed)])
    monkeypatch.setenv("QUERYLOG_TEST_SHARED_KEY", "k" * 32)
    both = _config(
        tmp_path,
        "  - grpc: {auth_token_env: QUERYLOG_TEST_TOKEN}\n  - vector: {auth_token_env: QUERYLOG_TEST_TOKEN}\n"
        "  - http: {listen: '127.0.0.1:0', auth_token_env: QUERYLOG_TEST_TOKEN}\n"
        "  - forward: {listen: '127.0.0.1:0', shared_key_env: QUERYLOG_TEST_SHARED_KEY}\n",
    )
    fine = runner.invoke(main, ["check-config", "--strict", str(both)])
    assert strict.exit_code == 2, strict.output
    lines = [line for line in strict.output.splitlines() if "unauthenticated" in line]
    assert len(lines) == 2
    assert "sources[1].vector" in lines[0] and "sources[2].http" in lines[1]
    assert lax.exit_code == 0, lax.output
    assert fine.exit_code == 0, fine.output
    assert TOKEN not in strict.output + lax.output + fine.output
