"""Shared helpers of the OTLP tests: an in-process sidecar with an ``otlp`` source on free ports, log records made
with the OpenTelemetry SDK's exporters, and raw export requests."""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord, ResourceLogs

from adapters.otlp.config import OtlpSourceConfig
from adapters.otlp.source import OtlpSource
from adapters.otlp.values import set_value
from sidecar.api import RecordBatch
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

#: The roles of the OTLP tests' records: the user in attribute ``user_id``, the query in the body.
ROLES_YAML = "schema: {roles: {user: attributes.user_id, query: body, time: null, rank: null, url: null}}\n"


def write_config(tmp_path: Path, sinks: str = "  - file: {path: out.jsonl}\n", filters: str = "") -> Path:
    """A sidecar config with the test roles, ``filters`` (a YAML list body, or none) and ``sinks``."""
    path = tmp_path / "sidecar.yaml"
    text = "state_dir: state\n" + ROLES_YAML
    if filters:
        text += "filters:\n" + filters
    path.write_text(text + "sinks:\n" + sinks, encoding="utf-8")
    return path


def out_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


@dataclass
class Running:
    pipeline: Pipeline
    source: OtlpSource

    @property
    def grpc_endpoint(self) -> str:
        return f"127.0.0.1:{self.source.port}"

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.source.http_port}/v1/logs"


@contextmanager
def otlp_sidecar(config: Path, *, grpc_port: int = 0, http_port: int = 0, **options: Any) -> Iterator[Running]:
    """A Pipeline for ``config`` (no sources of its own) with an ``otlp`` source of ``options`` on 127.0.0.1 (port
    0: a free one), gRPC and HTTP, and the runtime's release timer, as ``serve`` runs them."""
    cfg = load_config(config)
    pipeline = Pipeline(cfg, seed=7)
    source = OtlpSource(
        OtlpSourceConfig(**options),
        pipeline.ctx,
        listen=f"127.0.0.1:{grpc_port}",
        http_listen=f"127.0.0.1:{http_port}",
    )
    try:
        source.start(pipeline)
        pipeline.start_release_timer()
        try:
            yield Running(pipeline, source)
        finally:
            source.stop(grace=1.0)
            if any(f.BUFFERING for f in pipeline.filters):
                pipeline.release(final=True)
    finally:
        pipeline.close()


def kv(key: str, value: Any) -> KeyValue:
    out = KeyValue(key=key)
    set_value(out.value, value)
    return out


def log_record(body: Any, attributes: Mapping[str, Any] = (), **fields: Any) -> LogRecord:  # type: ignore[assignment]
    rec = LogRecord(**fields)
    if body is not None:
        set_value(rec.body, body)
    rec.attributes.extend(kv(k, v) for k, v in dict(attributes).items())
    return rec


def export_request(
    groups: Sequence[tuple[Mapping[str, Any], str, Sequence[LogRecord]]],
) -> ExportLogsServiceRequest:
    """A request of ``(resource attributes, scope name, records)`` groups, one ResourceLogs each."""
    request = ExportLogsServiceRequest()
    for resource, scope, records in groups:
        rl = ResourceLogs()
        rl.resource.attributes.extend(kv(k, v) for k, v in resource.items())
        sl = rl.scope_logs.add()
        sl.scope.name = scope
        sl.log_records.extend(records)
        request.resource_logs.append(rl)
    return request


def sdk_logger(exporter: Any, name: str = "shop.search") -> tuple[logging.Logger, Any]:
    """A Python logger whose records go through the SDK's LoggerProvider + BatchLogRecordProcessor to
    ``exporter``; returns the logger and the provider (``force_flush``/``shutdown``)."""
    from opentelemetry.sdk._logs import LoggerProvider, LoggingHandler
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
    from opentelemetry.sdk.resources import Resource

    provider = LoggerProvider(resource=Resource.create({"service.name": "search-frontend", "host.name": "web-1"}))
    provider.add_log_record_processor(BatchLogRecordProcessor(exporter, max_export_batch_size=256))
    logger = logging.getLogger(f"otlp-test-{id(provider)}")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    with warnings.catch_warnings():  # the SDK's own handler is deprecated for the instrumentation package's
        warnings.simplefilter("ignore", DeprecationWarning)
        logger.addHandler(LoggingHandler(level=logging.INFO, logger_provider=provider))
    return logger, provider


#: sink options of the tests: a long backoff (a retry after a throttling answer must not be the backoff's)
QUICK = "close_drain_seconds: 5, retry_initial_seconds: 30, retry_max_seconds: 30, timeout_seconds: 5"


def request_bytes(n: int = 5) -> bytes:
    """An export request of ``n`` records of one resource and scope and one record of another."""
    groups = [
        (
            {"service.name": "a"},
            "s1",
            [log_record(f"q{i}", {"user_id": f"u{i}", "n": i}, time_unix_nano=i + 1) for i in range(n)],
        ),
        ({"service.name": "b"}, "s2", [log_record("other", {"user_id": "v", "z": 1.5}, trace_id=b"\x01" * 16)]),
    ]
    return export_request(groups).SerializeToString()


@contextmanager
def sending_sidecar(tmp_path: Path, sink: str) -> Iterator[Pipeline]:
    """A pipeline (no filters) in ``tmp_path/a`` whose only sink is ``sink`` (a YAML flow mapping of otlp options)."""
    (tmp_path / "a").mkdir()
    config = write_config(tmp_path / "a", sinks=f"  - otlp: {sink}\n")
    pipeline = Pipeline(load_config(config), seed=7)
    try:
        yield pipeline
    finally:
        pipeline.close()


def send(pipeline: Pipeline, data: bytes) -> None:
    """An export request's records into the pipeline, as the otlp source hands them."""
    from adapters.otlp.codec import OtlpCodec
    from adapters.otlp.wire import split_request

    pipeline.receive(RecordBatch(split_request(data, 1000), OtlpCodec(pipeline.ctx.schema), "test"))
