"""Prometheus /metrics endpoint of `querylog serve`: counts and reasons, never values."""

from __future__ import annotations

import http.client
import json
import signal
import ssl
import subprocess
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import structlog
from helpers import QUERYLOG
from helpers.certs import make_pki
from helpers.grpc_sidecar import sidecar, write_config
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from adapters.grpc.stubs.querylog.v1.querylog_pb2 import EventBatch, QueryEvent
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub
from sidecar.metrics import PipelineCollector, serve_metrics
from sidecar.timings import Histogram, Timings


def test_metrics_endpoint_counts_without_values(tmp_path: Path) -> None:
    """After one batch with a bad event (an oversized one) and an empty query (a valid event), /metrics shows
    the counts and the reason, and no query or user id."""
    cfg = write_config(
        tmp_path,
        "limits: {max_record_bytes: 1024}\n"
        "server:\n  metrics_listen: 127.0.0.1:0\nfilters:\n  - drop:\n      rules: [{role: query, equals: ['-']}]\n",
    )
    with sidecar(cfg) as run:
        batch = EventBatch(
            events=[
                QueryEvent(user="u-secret-1", query="secret query one", time="t"),
                QueryEvent(user="u-secret-2", query="-", time="t"),
                QueryEvent(user="u-secret-3", query="", time="t"),
                QueryEvent(user="u-secret-4", query="secret query " + "x" * 2000, time="t"),
            ]
        )
        list(QueryLogFilterStub(run.chan).Filter(iter([batch])))
        port = run.server.metrics_port
        assert port
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    assert "querylog_events_in_total 3.0" in body
    assert "querylog_events_out_total 2.0" in body
    assert 'querylog_filter_count_total{filter="drop",name="dropped_rule_0"} 1.0' in body
    assert 'querylog_dead_letters_total{reason="oversized_record"} 1.0' in body
    assert "empty_query" not in body  # an empty query is no dead letter
    for secret in ("u-secret", "secret query"):
        assert secret not in body


# ---- the endpoint secured: TLS, mutual TLS, a bearer token (issue 24 item 12) ------------------------------------


def _scrape(url: str, context: ssl.SSLContext | None = None, token: str | None = None) -> tuple[int, str]:
    """(status, body) of one GET; an HTTP error status is returned, not raised."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, ""


def _stats() -> dict[str, Any]:
    return {
        "events_in": 3,
        "events_out": 2,
        "events_dropped": 1,
        "events_dead_lettered": 0,
        "events_held": 0,
        "dead_letters": {},
        "filters": [],
        "sinks": [],
    }


def _serve_once(tmp_path: Path, body: str) -> tuple[subprocess.Popen[str], dict[str, Any]]:
    """`querylog serve` with ``body`` as its config; returns the process and its `serving` log event."""
    config = tmp_path / "serve.yaml"
    config.write_text("state_dir: state\nlogging: {format: json}\n" + body, encoding="utf-8")
    proc = subprocess.Popen([QUERYLOG, "serve", "-c", str(config)], stderr=subprocess.PIPE, text=True)
    assert proc.stderr is not None
    events: list[dict[str, Any]] = []
    for line in proc.stderr:  # ends when serve exits (then the assertion below names what it said)
        if line.startswith("{"):
            events.append(json.loads(line))
            if events[-1].get("event") == "serving":
                return proc, {"serving": events[-1], "before": events[:-1]}
    proc.wait(timeout=30)
    raise AssertionError(f"serve exited before serving: {events}")


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=60)
    assert proc.returncode == 0


def test_metrics_over_tls_with_a_bearer_token(tmp_path: Path) -> None:
    """`metrics: {tls_cert_file, tls_key_file, auth_token_file}` beside `metrics_listen`: the scrape speaks TLS
    (a plaintext request gets no metrics), and answers 401 without the token or with another one, 200 with it.
    The `serving` log line gives the bound port (metrics_listen: 127.0.0.1:0)."""
    pki = make_pki(tmp_path / "pki")
    (tmp_path / "token").write_text("metrics-token-0123456789\n", encoding="utf-8")
    proc, logged = _serve_once(
        tmp_path,
        "metrics_listen: 127.0.0.1:0\n"
        f"metrics: {{tls_cert_file: {pki.server.cert}, tls_key_file: {pki.server.key}, auth_token_file: token}}\n"
        "sources:\n  - grpc: {listen: 127.0.0.1:0}\n",
    )
    try:
        port = logged["serving"]["metrics_port"]
        assert isinstance(port, int) and port > 0
        url = f"https://localhost:{port}/metrics"
        trusted = ssl.create_default_context(cafile=str(pki.ca))
        with pytest.raises((urllib.error.URLError, ConnectionError, http.client.HTTPException)):
            urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
        assert _scrape(url, trusted)[0] == 401
        assert _scrape(url, trusted, "another-token")[0] == 401
        status, body = _scrape(url, trusted, "metrics-token-0123456789")
    finally:
        _stop(proc)
    assert status == 200
    assert "querylog_events_in_total 0.0" in body


def test_metrics_mutual_tls_refuses_a_client_without_a_certificate(tmp_path: Path) -> None:
    """With `metrics.tls_client_ca_file`, a scraper without a client certificate of that CA gets no metrics."""
    pki = make_pki(tmp_path / "pki")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(pki.server.cert, pki.server.key)
    context.load_verify_locations(cafile=pki.ca)
    context.verify_mode = ssl.CERT_REQUIRED
    server, _, port = serve_metrics("127.0.0.1:0", _stats, ssl_context=context)
    try:
        url = f"https://localhost:{port}/metrics"
        anonymous = ssl.create_default_context(cafile=str(pki.ca))
        with pytest.raises((urllib.error.URLError, ConnectionError, ssl.SSLError)):
            _scrape(url, anonymous)
        client = ssl.create_default_context(cafile=str(pki.ca))
        client.load_cert_chain(pki.client.cert, pki.client.key)
        status, body = _scrape(url, client)
    finally:
        server.shutdown()
    assert status == 200 and "querylog_events_in_total 3.0" in body


def test_metrics_token_is_checked_in_constant_form_and_never_logged(tmp_path: Path) -> None:
    """Plain HTTP with a token: 401 (with `WWW-Authenticate: Bearer`) without it, for a prefix of it, or for it
    with another scheme; 200 with it; the refusals are logged by reason, never with the token."""
    server, _, port = serve_metrics("127.0.0.1:0", _stats, token=b"s3cret-metrics-token")
    url = f"http://127.0.0.1:{port}/metrics"
    try:
        with structlog.testing.capture_logs() as logs:
            assert _scrape(url)[0] == 401
            assert _scrape(url, token="s3cret")[0] == 401
            request = urllib.request.Request(url, headers={"Authorization": "Basic s3cret-metrics-token"})
            with pytest.raises(urllib.error.HTTPError) as refused:
                urllib.request.urlopen(request, timeout=10)
            assert refused.value.code == 401 and refused.value.headers["WWW-Authenticate"] == "Bearer"
            assert _scrape(url, token="s3cret-metrics-token")[0] == 200
    finally:
        server.shutdown()
    assert "s3cret" not in repr(logs)


def test_serving_line_names_the_metrics_port_that_serves(tmp_path: Path) -> None:
    """The grpc source's own `server.metrics_listen`: the `serving` line gives that port (not null beside a
    `server_started` that gives it), and it answers."""
    proc, logged = _serve_once(tmp_path, "server: {listen: 127.0.0.1:0, metrics_listen: 127.0.0.1:0}\n")
    try:
        started = [e for e in logged["before"] if e.get("event") == "server_started"]
        port = logged["serving"]["metrics_port"]
        assert started and port == started[0]["metrics_port"] and port
        assert _scrape(f"http://127.0.0.1:{port}/metrics")[0] == 200
    finally:
        _stop(proc)


# ---- one scrape, no repeated series (issue 24 item 20) -----------------------------------------------------------


def _two_of_a_kind() -> dict[str, Any]:
    """Stats of a chain with two `drop` filters and two `forward` sinks (whose own counters carry `written`)."""
    stats = _stats()
    drop = {"name": "drop", "events_in": 3, "events_out": 2, "held": 0, "counts": {"dropped_rule_0": 1}}
    stats["filters"] = [drop, {**drop, "counts": {"dropped_rule_0": 0}}]
    sink = {"name": "forward", "written": 2, "counts": {"written": 2, "pending_batches": 0, "sent_events": 2}}
    stats["sinks"] = [sink, {**sink, "written": 0, "counts": {"written": 0, "pending_batches": 1}}]
    stats["sinks"][0]["outbox_oldest_age_seconds"] = 0.0
    stats["sinks"][1]["outbox_oldest_age_seconds"] = 12.5
    timings = Timings()
    timings.source("grpc:Filter", 0.002, 3)
    timings.source("grpc:Ingest", 0.004, 1)
    timings.source("/var/log/queries.tsv", 0.5, 1000)
    per_filter = [Histogram(), Histogram()]
    per_filter[1].observe(0.001)
    stats["latency"] = timings.snapshot(per_filter, len(stats["sinks"]))
    return stats


def _exposition(stats: dict[str, Any]) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(lambda: stats))
    return generate_latest(registry).decode()


def test_a_scrape_never_repeats_a_series() -> None:
    """Two sinks and two filters of one kind: every series of the scrape is distinct (Prometheus refuses a scrape
    with a repeated one), and the sinks' counters keep their index."""
    text = _exposition(_two_of_a_kind())
    seen: list[tuple[str, tuple[tuple[str, str], ...]]] = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            seen.append((sample.name, tuple(sorted(sample.labels.items()))))
    repeated = sorted({s for s in seen if seen.count(s) > 1})
    assert not repeated, repeated
    assert 'querylog_sink_stat{index="1",name="pending_batches",sink="forward"} 1.0' in text


def test_latency_histograms_keep_every_series_distinct() -> None:
    """The latency histograms of two filters and two sinks of one kind, sources by component (two gRPC methods are
    one `grpc`; a file path is `file`), each outbox's oldest age: every series once, no path in a label."""
    text = _exposition(_two_of_a_kind())
    samples = [
        (sample.name, tuple(sorted(sample.labels.items())))
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]
    assert len(samples) == len(set(samples))
    assert "queries.tsv" not in text
    assert 'querylog_source_batch_duration_seconds_count{source="grpc"} 2.0' in text
    assert 'querylog_source_batch_events_sum{source="file"} 1000.0' in text
    assert 'querylog_filter_batch_duration_seconds_count{filter="drop#2"} 1.0' in text
    assert 'querylog_filter_batch_duration_seconds_count{filter="drop"} 0.0' in text
    assert 'querylog_sink_batch_duration_seconds_count{index="1",sink="forward"} 0.0' in text
    assert 'querylog_outbox_oldest_pending_age_seconds{index="1",sink="forward"} 12.5' in text
    assert text.count("querylog_build_info{") == 1


def test_metrics_access_options_need_metrics_listen(tmp_path: Path) -> None:
    """TLS or a token under `metrics:` without `metrics_listen` is a located config error, not a silent no-op."""
    from sidecar.config import ConfigError, load_config

    config = write_config(tmp_path, "metrics: {auth_token_env: METRICS_TOKEN}\n")
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert "metrics" in str(err.value) and "metrics_listen" in str(err.value)
