"""Prometheus metrics for ``querylog serve``: counters from :meth:`Pipeline.stats`, and the endpoint serving them.

Beside the counters: histograms per batch of the seconds by source, filter and sink and of the events by source
(:mod:`sidecar.timings`), each outbox's oldest pending age and ``querylog_build_info``. Labels carry component
names, filter names, counter names and dead-letter reasons only — never a query, a user id or a record value
(those never reach ``stats()`` either). Every series of a scrape is distinct
(Prometheus refuses a scrape that repeats one): sinks carry their index in the config, and a filter whose name
comes again in the chain is labelled ``name#2``, ``name#3``... (the first keeps its name).

The endpoint (:func:`serve_metrics`) answers ``GET /metrics``, the probes ``GET /healthz`` (the process is alive:
200) and ``GET /readyz`` (200, or 503 with a JSON body naming what is not ready: reasons only, no values), and 404
on any other path. It may speak TLS (mutual TLS with a client CA: the ``metrics:`` block of the config,
:class:`~sidecar.api.ServerTls`) and ask for a bearer token (``Authorization: Bearer``, else 401): the TLS
handshake runs on the request's own thread with a deadline, so a peer that never finishes it cannot block the
scrapes of others. The token guards ``/metrics`` only: the probes stay open (a Kubernetes HTTP probe cannot send a
token, and they tell nothing but alive, ready or the names of what is not); TLS covers the whole port.
"""

from __future__ import annotations

import hmac
import importlib.metadata
import json
import platform
import socket
import ssl
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from functools import cache
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

import structlog
from prometheus_client import CollectorRegistry, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

from sidecar.api import Listen
from sidecar.joinmetrics import join_families
from sidecar.liveaudit_metrics import live_audit_families

StatsSource = Callable[[], dict[str, Any]]
ReadySource = Callable[[], list[str]]
WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

log = structlog.get_logger("querylog.metrics")

#: Seconds a scraper may take for its TLS handshake or to send its request.
PEER_TIMEOUT = 10.0


class PipelineCollector(Collector):
    """Reads the pipeline's counters at scrape time."""

    def __init__(self, stats: StatsSource) -> None:
        self.stats = stats

    def collect(self) -> Iterator[Any]:
        s = self.stats()
        for key, help_text in (
            ("events_in", "Events decoded and given to the chain."),
            ("events_out", "Events that left the chain."),
            ("events_dropped", "Events dropped by filters."),
            ("events_dead_lettered", "Records that could not become events."),
        ):
            yield CounterMetricFamily(f"querylog_{key}", help_text, value=max(0, s[key]))
        yield GaugeMetricFamily("querylog_events_held", "Events held by buffering filters.", value=s["events_held"])
        dead = CounterMetricFamily("querylog_dead_letters", "Dead letters by reason.", labels=["reason"])
        for reason, n in sorted(s["dead_letters"].items()):
            dead.add_metric([reason], n)
        yield dead
        refused = CounterMetricFamily(
            "querylog_rpcs_refused", "RPCs refused before reaching the chain, by reason.", labels=["reason"]
        )
        for reason, n in sorted(s.get("rpcs_refused", {}).items()):
            refused.add_metric([reason], n)
        yield refused
        f_in = CounterMetricFamily("querylog_filter_events_in", "Events into a filter.", labels=["filter"])
        f_out = CounterMetricFamily("querylog_filter_events_out", "Events out of a filter.", labels=["filter"])
        f_held = GaugeMetricFamily("querylog_filter_held", "Events held by a filter.", labels=["filter"])
        f_counts = CounterMetricFamily("querylog_filter_count", "A filter's own counters.", labels=["filter", "name"])
        for f, label in zip(s["filters"], filter_labels(f["name"] for f in s["filters"])):
            f_in.add_metric([label], max(0, f["events_in"]))
            f_out.add_metric([label], max(0, f["events_out"]))
            f_held.add_metric([label], f["held"])
            for name, n in sorted(f["counts"].items()):
                f_counts.add_metric([label, str(name)], n)
        yield from (f_in, f_out, f_held, f_counts)
        yield _category_k(s["filters"])
        yield from live_audit_families(s, filter_labels(f["name"] for f in s["filters"]))
        yield _key_info(s["filters"])
        sink_stat = GaugeMetricFamily(
            "querylog_sink_stat",
            "A sink's own counters: an outbox's pending_events/pending_batches/pending_bytes, sent_events, retries...",
            labels=["sink", "index", "name"],
        )
        for i, sink in enumerate(s.get("sinks", ())):
            counts = {"written": sink["written"], **sink["counts"]}  # a sink's own `written` is the same count
            for name, n in sorted(counts.items()):
                sink_stat.add_metric([sink["name"], str(i), name], n)
        yield sink_stat
        yield from _latency(s)
        yield build_info()
        yield _config_reloads(s)
        yield _field_policies(s)
        yield from join_families(s)
        yield GaugeMetricFamily(
            "querylog_uptime_seconds", "Seconds since the pipeline was built.", value=s.get("uptime_seconds", 0.0)
        )


def _config_reloads(s: dict[str, Any]) -> CounterMetricFamily:
    """``querylog_config_reloads_total{result}``: reloads (SIGHUP) that swapped the chain, and those refused."""
    reloads = CounterMetricFamily(
        "querylog_config_reloads", "Config reloads by result (success, failure).", labels=["result"]
    )
    counts = s.get("config_reloads", {})
    for result in ("success", "failure"):
        reloads.add_metric([result], counts.get(result, 0))
    return reloads


def _field_policies(s: dict[str, Any]) -> CounterMetricFamily:
    """``querylog_field_policy_total{field, outcome}``: what the field policies did (schema.fields; names only)."""
    family = CounterMetricFamily(
        "querylog_field_policy",
        "Fields the field policies changed, removed or refused, by field name and outcome (schema.fields).",
        labels=["field", "outcome"],
    )
    for name, outcomes in sorted(s.get("fields", {}).items()):
        for outcome, n in sorted(outcomes.items()):
            family.add_metric([name, outcome], n)
    return family


def _category_k(filters: list[dict[str, Any]]) -> GaugeMetricFamily:
    """``category_buffer``'s current k per category (taxonomy labels of the config, never a record value); with
    several such filters in the chain, the largest k of each category."""
    ks: dict[str, int] = {}
    for f in filters:
        if f["name"] == "category_buffer":
            for category, k in f.get("k_per_category", {}).items():
                ks[str(category)] = max(k, ks.get(str(category), k))
    gauge = GaugeMetricFamily(
        "querylog_category_buffer_k",
        "category_buffer's current k per category (bounded by max_k).",
        labels=["category"],
    )
    for category, k in sorted(ks.items()):
        gauge.add_metric([category], k)
    return gauge


def _key_info(filters: list[dict[str, Any]]) -> GaugeMetricFamily:
    """``querylog_pseudonymize_key_info{filter, key_id, rotate, period}`` 1 per filter that reports a ``key_id``
    (``pseudonymize``): the id of the key in use, never the key; ``period`` is that of its last event ("" before
    one)."""
    gauge = GaugeMetricFamily(
        "querylog_pseudonymize_key_info",
        "The id of the key pseudonymize uses (never the key), its rotation and the period of its last event.",
        labels=["filter", "key_id", "rotate", "period"],
    )
    for f, label in zip(filters, filter_labels(f["name"] for f in filters)):
        if f.get("key_id") is not None:
            gauge.add_metric([label, str(f["key_id"]), str(f.get("rotate", "none")), str(f.get("period") or "")], 1)
    return gauge


def filter_labels(names: Iterable[str]) -> list[str]:
    """The ``filter`` label of each filter of the chain: its name, then ``name#2``... when the name comes again."""
    seen: dict[str, int] = {}
    out = []
    for name in names:
        seen[name] = seen.get(name, 0) + 1
        out.append(name if seen[name] == 1 else f"{name}#{seen[name]}")
    return out


def _histogram(family: HistogramMetricFamily, labels: list[str], snapshot: dict[str, Any]) -> None:
    """Add a :meth:`sidecar.timings.Histogram.snapshot` to ``family`` under ``labels``."""
    buckets = [("+Inf" if bound == float("inf") else str(float(bound)), n) for bound, n in snapshot["buckets"]]
    family.add_metric(labels, buckets, snapshot["sum"])


def _latency(s: dict[str, Any]) -> Iterator[Any]:
    """Per batch: seconds by source kind (``receive``/``transform``), by filter (``process``) and by sink (``write``
    and ``flush``), events by source kind; each outbox's oldest pending age. Labels: component names only."""
    latency = s.get("latency", {})
    by_source = HistogramMetricFamily(
        "querylog_source_batch_duration_seconds",
        "Seconds a batch spends in receive/transform (its turn, decode, chain, sinks, commit), by source.",
        labels=["source"],
    )
    events = HistogramMetricFamily("querylog_source_batch_events", "Events per batch, by source.", labels=["source"])
    for kind, snapshot in latency.get("sources", {}).items():
        _histogram(by_source, [kind], snapshot)
        _histogram(events, [kind], latency["events"][kind])
    by_filter = HistogramMetricFamily(
        "querylog_filter_batch_duration_seconds", "Seconds of a filter's process() per batch.", labels=["filter"]
    )
    labels = filter_labels(f["name"] for f in s["filters"])
    for label, snapshot in zip(labels, latency.get("filters", ())):
        _histogram(by_filter, [label], snapshot)
    by_sink = HistogramMetricFamily(
        "querylog_sink_batch_duration_seconds",
        "Seconds of a sink's write and flush per batch.",
        labels=["sink", "index"],
    )
    age = GaugeMetricFamily(
        "querylog_outbox_oldest_pending_age_seconds",
        "Seconds since the oldest batch a sink's outbox has not delivered was put (0: nothing pending).",
        labels=["sink", "index"],
    )
    sinks = s.get("sinks", ())
    for i, (sink, snapshot) in enumerate(zip(sinks, latency.get("sinks", ()))):
        _histogram(by_sink, [sink["name"], str(i)], snapshot)
    for i, sink in enumerate(sinks):
        if "outbox_oldest_age_seconds" in sink:
            age.add_metric([sink["name"], str(i)], sink["outbox_oldest_age_seconds"])
    yield from (by_source, events, by_filter, by_sink, age)


@cache
def _versions() -> list[str]:
    try:
        version = importlib.metadata.version("querylog-sidecar")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree that was never installed
        version = "unknown"
    return [version, platform.python_version()]


def build_info() -> GaugeMetricFamily:
    """``querylog_build_info{version, python}`` 1."""
    info = GaugeMetricFamily(
        "querylog_build_info", "The sidecar's version and Python's (always 1).", labels=["version", "python"]
    )
    info.add_metric(_versions(), 1)
    return info


class _Handler(WSGIRequestHandler):
    """No access log on stderr (the sidecar's own logs are structured); a deadline on a slow request."""

    timeout = PEER_TIMEOUT

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingMixIn, WSGIServer):
    """One thread per scrape; with ``tls``, the handshake runs on that thread (never on the accepting one)."""

    daemon_threads = True
    tls: ssl.SSLContext | None = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is None:
            super().finish_request(request, client_address)
            return
        request.settimeout(PEER_TIMEOUT)
        try:
            tls_socket = self.tls.wrap_socket(request, server_side=True)
        except (OSError, ssl.SSLError) as exc:  # no certificate, a plaintext request, a peer that went away
            log.debug("metrics_tls_refused", error=type(exc).__name__)
            return  # the socket is closed by the caller (shutdown_request)
        try:
            super().finish_request(tls_socket, client_address)
        finally:
            tls_socket.close()


def token_required(app: WsgiApp, token: bytes) -> WsgiApp:
    """``app`` behind a bearer token: 401 (``WWW-Authenticate: Bearer``) unless ``Authorization: Bearer <token>``
    (compared in constant time; never logged)."""
    expected = b"Bearer " + token
    refused: Counter[str] = Counter()

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        given = environ.get("HTTP_AUTHORIZATION", "").encode("latin-1", "replace").strip()
        if hmac.compare_digest(given, expected):
            return app(environ, start_response)
        reason = "missing_token" if not given else "wrong_token"
        refused[reason] += 1
        if str(refused[reason]).strip("0") == "1":  # the 1st, 10th, 100th...: a misconfigured scraper is no flood
            log.warning("metrics_scrape_refused", reason=reason, count=refused[reason])
        start_response("401 Unauthorized", [("WWW-Authenticate", "Bearer"), ("Content-Type", "text/plain")])
        return [b"a bearer token is required\n"]

    return guarded


def _json(start_response: Callable[..., Any], status: str, body: dict[str, Any]) -> Iterable[bytes]:
    data = json.dumps(body).encode() + b"\n"
    start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(data)))])
    return [data]


def reload_route(reload: Callable[[], bool], token: bytes) -> WsgiApp:
    """``POST /-/reload``: 401 (``WWW-Authenticate: Bearer``) unless ``Authorization: Bearer <token>`` (constant
    time; never logged); then ``reload()``, as SIGHUP does: 200 ``{"reloaded": true}``, or 422 when the config was
    refused (the reason is in the sidecar's log, ``config_reload_refused``: file, line, key)."""
    expected = b"Bearer " + token

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") != "POST":
            return _json(start_response, "405 Method Not Allowed", {"error": "method not allowed"})
        given = environ.get("HTTP_AUTHORIZATION", "").encode("latin-1", "replace").strip()
        if not hmac.compare_digest(given, expected):
            start_response("401 Unauthorized", [("WWW-Authenticate", "Bearer"), ("Content-Type", "text/plain")])
            return [b"a bearer token is required\n"]
        if reload():
            return _json(start_response, "200 OK", {"reloaded": True})
        return _json(start_response, "422 Unprocessable Entity", {"reloaded": False, "see": "config_reload_refused"})

    return app


def with_probes(metrics: WsgiApp, ready: ReadySource | None, reload: WsgiApp | None = None) -> WsgiApp:
    """``/metrics`` to ``metrics``; ``/healthz`` 200; ``/readyz`` 200 when ``ready()`` names nothing, else 503 with
    ``{"ready": false, "not_ready": [reasons]}`` (without ``ready``: no /readyz); any other path 404."""

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == "/metrics":
            return metrics(environ, start_response)
        if path == "/-/reload" and reload is not None:
            return reload(environ, start_response)
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return _json(start_response, "405 Method Not Allowed", {"error": "method not allowed"})
        if path == "/healthz":
            return _json(start_response, "200 OK", {"alive": True})
        if path == "/readyz" and ready is not None:
            reasons = ready()
            status = "503 Service Unavailable" if reasons else "200 OK"
            return _json(start_response, status, {"ready": not reasons, "not_ready": reasons})
        return _json(start_response, "404 Not Found", {"error": "not found"})

    return app


def serve_metrics(
    listen: str,
    stats: StatsSource,
    *,
    ssl_context: ssl.SSLContext | None = None,
    token: bytes | None = None,
    ready: ReadySource | None = None,
    reload: Callable[[], bool] | None = None,
    reload_token: bytes | None = None,
) -> tuple[Any, threading.Thread, int]:
    """Start the /metrics HTTP endpoint on ``host:port`` (port 0: any free port), with /healthz and (given
    ``ready``) /readyz beside it; with ``ssl_context`` it speaks TLS, with ``token`` /metrics asks for it as a
    bearer token; with ``reload`` and ``reload_token``, ``POST /-/reload`` (:func:`reload_route`). Returns (server,
    thread, bound port); ``server.shutdown()`` stops it."""
    address = Listen.parse(listen, "metrics_listen")
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(stats))
    metrics: WsgiApp = make_wsgi_app(registry)
    if token is not None:
        metrics = token_required(metrics, token)
    app = with_probes(metrics, ready, reload_route(reload, reload_token) if reload and reload_token else None)
    family = socket.getaddrinfo(address.host, address.port, type=socket.SOCK_STREAM)[0][0]
    server_class = type("MetricsServer", (_Server,), {"address_family": family, "tls": ssl_context})
    server: WSGIServer = make_server(address.host, address.port, app, server_class, handler_class=_Handler)
    thread = threading.Thread(target=server.serve_forever, name="querylog-metrics", daemon=True)
    thread.start()
    return server, thread, server.server_port
