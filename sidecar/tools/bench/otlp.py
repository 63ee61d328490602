"""``querylog bench otlp``: events/s from the OpenTelemetry SDK's OTLP log exporter through the otlp source ->
chain -> file sink (OTLP/JSON lines).

The sidecar (``querylog serve``, its own process) has an ``otlp`` source (gRPC, and HTTP on a second port) and a
``file`` sink; the file is the downstream (the lines are in it before each export is answered, so they are
counted once every export returned). Records are AOL records as log-record attributes (``AnonID``, ``Query``...:
the schema's default roles, bare names being attribute keys), with a resource and scope as the SDK writes them.

``--client sdk``: ``--concurrency`` threads, each with its own ``OTLPLogExporter`` (gRPC or HTTP), call
``export(batch)`` with batches of ``--batch`` SDK log records, the SDK encoding each batch as it sends it; an export
that returns SUCCESS is the sidecar's acknowledgement. ``--client encoded``: a light client, the same requests
encoded once ahead by the SDK's own encoder and sent as bytes (gRPC ``Export`` with ``--inflight`` requests in
flight per thread, or HTTP POSTs one after another), so the client's encoding does not compete with the sidecar
for the cores and the sidecar's own capacity shows. ``--client both`` (the default) runs the two, one after the
other. Besides what :mod:`sidecar.tools.bench.network` prints, each run prints the CPU time the sidecar process
and the client process spent while it ran, per event (``/proc/<pid>/stat``; the client's includes the SDK's
encoding and gRPC), and the load average.
"""

from __future__ import annotations

import http.client
import os
import time
from collections import deque
from pathlib import Path
from typing import Any

import click

from sidecar.tools.bench.common import run_clients
from sidecar.tools.bench.network import (
    CHAINS,
    IO_TIMEOUT,
    Run,
    aol_records,
    free_port,
    print_run,
    sidecar,
    temp_folder,
)

METHOD = "/opentelemetry.proto.collector.logs.v1.LogsService/Export"


def sdk_batches(records: list[dict[str, str]], batch: int) -> list[list[Any]]:
    """The records as the SDK's readable log records, in batches of ``batch``."""
    from opentelemetry._logs import LogRecord, SeverityNumber
    from opentelemetry.sdk._logs import ReadableLogRecord
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    resource = Resource.create({"service.name": "search-frontend", "host.name": "web-1"})
    scope = InstrumentationScope("search.querylog", "1.0")
    now = time.time_ns()
    made = [
        ReadableLogRecord(
            LogRecord(
                timestamp=now + i,
                observed_timestamp=now + i,
                severity_number=SeverityNumber.INFO,
                severity_text="INFO",
                attributes=r,
            ),
            resource,
            scope,
        )
        for i, r in enumerate(records)
    ]
    return [made[i : i + batch] for i in range(0, len(made), batch)]


class _Client:
    """Sends its share of the batches one after another; counts the records of acknowledged exports."""

    def __init__(
        self, mode: str, protocol: str, grpc_port: int, http_port: int, share: list[list[Any]], inflight: int = 1
    ) -> None:
        self.mode, self.protocol, self.inflight = mode, protocol, inflight
        self.grpc_port, self.http_port = grpc_port, http_port
        self.share = share
        self.acked = 0
        self.errors: set[str] = set()
        if mode == "encoded":
            from opentelemetry.exporter.otlp.proto.common._log_encoder import encode_logs

            self.payloads = [encode_logs(b).SerializeToString() for b in share]

    def run(self) -> None:
        try:
            if self.mode == "sdk":
                self._run_sdk()
            elif self.protocol == "grpc":
                self._run_grpc()
            else:
                self._run_http()
        except Exception as exc:  # reported with the figures
            self.errors.add(type(exc).__name__)

    def _run_sdk(self) -> None:
        from opentelemetry.sdk._logs.export import LogRecordExportResult

        if self.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcExporter

            exporter: Any = GrpcExporter(endpoint=f"127.0.0.1:{self.grpc_port}", insecure=True, timeout=IO_TIMEOUT)
        else:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpExporter

            exporter = HttpExporter(endpoint=f"http://127.0.0.1:{self.http_port}/v1/logs", timeout=IO_TIMEOUT)
        try:
            for batch in self.share:
                if exporter.export(batch) == LogRecordExportResult.SUCCESS:
                    self.acked += len(batch)
                else:
                    self.errors.add("export failed")
        finally:
            exporter.shutdown()

    def _run_grpc(self) -> None:
        import grpc

        with grpc.insecure_channel(f"127.0.0.1:{self.grpc_port}") as chan:
            export: Any = chan.unary_unary(METHOD)
            waiting: deque[tuple[Any, int]] = deque()  # (the call's future, its records), oldest first
            for payload, batch in zip(self.payloads, self.share, strict=True):
                if len(waiting) >= self.inflight:
                    self._answered(*waiting.popleft())
                waiting.append((export.future(payload, timeout=IO_TIMEOUT), len(batch)))
            while waiting:
                self._answered(*waiting.popleft())

    def _answered(self, call: Any, records: int) -> None:
        call.result()  # raises the call's error
        self.acked += records

    def _run_http(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.http_port, timeout=IO_TIMEOUT)
        headers = {"Content-Type": "application/x-protobuf"}
        try:
            for payload, batch in zip(self.payloads, self.share, strict=True):
                conn.request("POST", "/v1/logs", body=payload, headers=headers)
                response = conn.getresponse()
                response.read()
                if response.status == 200:
                    self.acked += len(batch)
                else:
                    self.errors.add(f"HTTP {response.status}")
        finally:
            conn.close()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (``/proc/<pid>/stat``), seconds."""
    with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
        fields = fh.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_once(
    events: int, batch: int, chain: str, seed: int, concurrency: int, protocol: str, mode: str, inflight: int
) -> tuple[Run, float, float]:
    """One run: the figures, and the CPU seconds the sidecar and this process (the clients) spent in it."""
    batches = sdk_batches(aol_records(events, seed), batch)
    total = sum(len(b) for b in batches)
    with temp_folder() as tmp:
        out = Path(tmp) / "out.jsonl"
        http_port = free_port()
        source = {"otlp": {"http_listen": f"127.0.0.1:{http_port}"}}
        with sidecar(Path(tmp), chain, source, [{"file": {"path": str(out)}}]) as sc:
            clients = [
                _Client(mode, protocol, sc.port, http_port, batches[i::concurrency], inflight)
                for i in range(concurrency)
            ]
            sidecar_cpu, client_cpu = cpu_seconds(sc.proc.pid), time.process_time()
            run = run_clients(clients, out, sc, total, batch, "in the file before each export's answer")
            return run, cpu_seconds(sc.proc.pid) - sidecar_cpu, time.process_time() - client_cpu


def print_cpu(run: Run, sidecar_cpu: float, client_cpu: float) -> None:
    """The CPU the sidecar and the client spent per event, and the load average (a shared machine is noisy)."""
    n = max(run.acked, 1)
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    click.echo(
        f"  CPU: sidecar {sidecar_cpu:.2f} s = {sidecar_cpu / n * 1e6:.1f} us/event "
        f"(one core's worth: {n / sidecar_cpu if sidecar_cpu else 0:,.0f} events/s), "
        f"client {client_cpu:.2f} s = {client_cpu / n * 1e6:.1f} us/event; load average {load}"
    )


@click.command("otlp")
@click.option("--events", default=200_000, show_default=True, help="Log records to send.")
@click.option("--batch", default=1000, show_default=True, help="Log records per export request.")
@click.option("--chain", type=click.Choice(CHAINS), default="passthrough", show_default=True, help="Filters to run.")
@click.option("--seed", default=1, show_default=True, help="Seed of the generated records.")
@click.option("--concurrency", default=2, show_default=True, type=click.IntRange(1, 64), help="Client threads.")
@click.option(
    "--protocol", type=click.Choice(["grpc", "http"]), default="grpc", show_default=True, help="OTLP over gRPC or HTTP."
)
@click.option(
    "--client",
    "mode",
    type=click.Choice(["both", "sdk", "encoded"]),
    default="both",
    show_default=True,
    help="sdk: the SDK's OTLPLogExporter encodes and sends; encoded: the SDK's encoder runs ahead, bytes are "
    "sent; both: one run of each.",
)
@click.option(
    "--inflight",
    default=4,
    show_default=True,
    type=click.IntRange(1, 64),
    help="encoded gRPC client: requests in flight per thread.",
)
def COMMAND(
    events: int, batch: int, chain: str, seed: int, concurrency: int, protocol: str, mode: str, inflight: int
) -> None:
    """Events/s from the OpenTelemetry SDK's OTLP log exporter and a light client through the otlp source.

    The light client sends the SDK's encoded requests; the chain's output goes to a file sink (OTLP/JSON); the
    sidecar runs in its own process."""
    from adapters.otlp import scan

    fast = "compiled" if scan.COMPILED else "not compiled (README, Compiled modules: how it is built)"
    click.echo(f"otlp fast path (adapters/otlp/scan.py): {fast}")
    for each in ("sdk", "encoded") if mode == "both" else (mode,):
        run, sidecar_cpu, client_cpu = run_once(events, batch, chain, seed, concurrency, protocol, each, inflight)
        flight = f", {inflight} in flight each" if each == "encoded" and protocol == "grpc" else ""
        print_run(f"otlp {protocol} ({each} client) -> {chain} -> file ({concurrency} clients{flight})", run)
        print_cpu(run, sidecar_cpu, client_cpu)
