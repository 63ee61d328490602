"""kill -9 of `querylog serve` under the OpenTelemetry SDK's OTLP/gRPC exporter loses no acknowledged record
(issue 27, Numbers).

The real client: ``LoggerProvider`` + ``BatchLogRecordProcessor`` + ``OTLPLogExporter`` (gRPC; it retries UNAVAILABLE
with its own backoff) sends N uniquely numbered log records to `querylog serve` (otlp source -> passthrough -> file
sink). The exporter is wrapped only to record which batches it saw acknowledged (``SUCCESS``). The sidecar is
SIGKILLed once KILL_AT records were acknowledged and restarted on the same state folder and port (the one it bound
at the first start, read from its ``listening`` log event); the exporter's retries finish the stream. Every record
the exporter saw acknowledged must be in the output file; duplicates (a batch retried after its reply was lost in
the kill) are counted and printed.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import QUERYLOG
from helpers.serving import listening_ports
from helpers.waiting import exited, wait_until

RECORDS = 20_000
KILL_AT = 6_000


class Recording:
    """A log record exporter that delegates to ``inner`` and records the ``seq`` of every record it saw
    acknowledged."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.acked: list[int] = []
        self.failed = 0
        self.lock = threading.Lock()

    def export(self, batch: Sequence[Any]) -> Any:
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        result = self.inner.export(batch)
        with self.lock:
            if result == LogRecordExportResult.SUCCESS:
                self.acked.extend(int(r.log_record.attributes["seq"]) for r in batch)
            else:
                self.failed += len(batch)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))


def _ports(log: Path) -> list[int]:
    return listening_ports(log.read_text(encoding="utf-8", errors="replace").splitlines(), "otlp")


def _serve(config: Path, log: Path) -> tuple[subprocess.Popen[bytes], int]:
    started = len(_ports(log)) if log.exists() else 0
    with log.open("ab") as err:
        proc = subprocess.Popen([QUERYLOG, "serve", "--config", str(config)], stderr=err)
    ports = wait_until(lambda: (p := _ports(log))[started:] and p, what="serve's listening event", abort=exited(proc))
    return proc, ports[started]


def _write(config: Path, port: int) -> None:
    body = {
        "state_dir": "state",
        "logging": {"level": "info", "format": "json"},
        "schema": {"roles": {"user": "attributes.user_id", "query": "body", "time": None, "rank": None, "url": None}},
        "sources": [{"otlp": {"listen": f"127.0.0.1:{port}"}}],
        "sinks": [{"file": {"path": "out.jsonl"}}],
    }
    config.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")


@pytest.mark.slow
def test_every_acknowledged_record_survives_a_kill9_of_serve(tmp_path: Path) -> None:
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

    from sidecar.registry import plugins

    if "otlp" not in plugins("querylog.sources"):
        pytest.skip("the otlp source is not registered (entry points)")
    config, log = tmp_path / "sidecar.yaml", tmp_path / "serve.log"
    _write(config, 0)
    proc, port = _serve(config, log)
    _write(config, port)  # the restart keeps the address the exporter sends to
    exporter = Recording(OTLPLogExporter(endpoint=f"127.0.0.1:{port}", insecure=True, timeout=60))
    provider = LoggerProvider()
    provider.add_log_record_processor(
        BatchLogRecordProcessor(exporter, max_queue_size=RECORDS, max_export_batch_size=500, schedule_delay_millis=50)
    )
    logger = provider.get_logger("kill9")
    killed = threading.Event()
    restarted: list[subprocess.Popen[bytes]] = []

    def killer() -> None:
        wait_until(lambda: len(exporter.acked) >= KILL_AT, what="acknowledgements before the kill", timeout=120)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        killed.set()
        restarted.append(_serve(config, log)[0])

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    try:
        from opentelemetry._logs import LogRecord

        for seq in range(RECORDS):
            logger.emit(LogRecord(body=f"query {seq}", attributes={"user_id": f"u{seq % 97}", "seq": seq}))
        thread.join(180)
        assert killed.is_set() and restarted, "the sidecar was not killed and restarted"
        assert provider.force_flush(120_000)
        provider.shutdown()
    finally:
        for p in (proc, *restarted):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
                p.wait(60)
    seen: Counter[int] = Counter()
    for line in (tmp_path / "out.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)["resourceLogs"][0]["scopeLogs"][0]["logRecords"][0]
        seq = next(a["value"]["intValue"] for a in record["attributes"] if a["key"] == "seq")
        seen[int(seq)] += 1
    acked = set(exporter.acked)
    lost = acked - set(seen)
    duplicates = sum(n - 1 for n in seen.values() if n > 1)
    print(
        f"otlp kill -9: acknowledged {len(acked)} of {RECORDS}, lost {len(lost)}, duplicates {duplicates}, "
        f"not acknowledged by the exporter {exporter.failed}"
    )
    assert lost == set()
    assert len(acked) > KILL_AT  # records were acknowledged after the restart too
