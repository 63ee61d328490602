"""``querylog send``: stream a log file through a running sidecar's ``Filter`` RPC, or into its sinks (``Ingest``).

Each record is sent as a QueryEvent with its roles and a ``seq``; the client keeps
the decoded record until its event comes back, writes the returned role values
into it and encodes it in the input's schema, so a passthrough sidecar gives a
byte-identical file. Events the sidecar drops or holds do not come back.

``--ingest`` streams the records into the sidecar's configured sinks instead (a buffering chain's way in: its
released events go to the sinks, never back to a caller); the sidecar answers with counts once all is durable.
"""

from __future__ import annotations

import os
import queue
import re
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import click
import grpc

from adapters.file.reader import LineBatch, LogInput, open_log
from adapters.file.sink import FileSink, FileSinkConfig
from adapters.grpc.client import Reassembler, to_batch
from adapters.grpc.codec import EventBatch
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import IngestResponse
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub
from sidecar.api import BuildContext, Event
from sidecar.codecs import SchemaConfig
from sidecar.commandkit import EXIT_USAGE, check_address, fail_config, load, setup_logs
from sidecar.config import ConfigError
from sidecar.deadletter import DeadLetters


@dataclass
class SendSummary:
    records_in: int = 0
    sent: int = 0
    received: int = 0
    dead_lettered: int = 0
    seconds: float = 0.0
    #: ``--ingest``: the sidecar's answer (accepted, delivered, held, dropped, dead_lettered), else None
    ingested: IngestResponse | None = None

    @property
    def events_per_second(self) -> float:
        return self.sent / self.seconds if self.seconds > 0 else 0.0

    def line(self) -> str:
        if self.ingested is not None:
            r = self.ingested
            return (
                f"records in={self.records_in} sent={self.sent} accepted={r.accepted} delivered={r.delivered} "
                f"held={r.held} dropped={r.dropped} dead_letter={self.dead_lettered + r.dead_lettered} "
                f"seconds={self.seconds:.3f} events/s={self.events_per_second:,.0f}"
            )
        return (
            f"records in={self.records_in} sent={self.sent} received={self.received} "
            f"not_returned={self.sent - self.received} dead_letter={self.dead_lettered} "
            f"seconds={self.seconds:.3f} events/s={self.events_per_second:,.0f}"
        )


def _open_files(
    input_path: str, output_path: str, schema: SchemaConfig, dead: DeadLetters, max_record_bytes: int, batch_size: int
) -> tuple[LogInput, FileSink]:
    """The input log, opened for reading in batches, and the output file's sink, started in the input's format."""
    log_in = open_log(input_path, schema, dead, max_record_bytes, batch_size)
    sink = FileSink(
        FileSinkConfig(path=output_path, mode="truncate"),
        BuildContext(config_dir=Path.cwd(), dead_letters=dead),
        schema,
    )
    sink.start(log_in.header, log_in.codec)
    return log_in, sink


def _decode(log_in: LogInput, batch: LineBatch, dead: DeadLetters, input_path: str) -> tuple[list[Event], list[int]]:
    """A batch's events, the lines that do not decode dead-lettered (their indexes returned)."""
    bad: list[tuple[int, str]] = []
    events = log_in.codec.decode_many(batch.lines, "\n", bad)
    for idx, reason in bad:
        dead.add(reason, input_path, batch.line_number(idx), batch.lines[idx])
    return events, [idx for idx, _ in bad]


def _finish(summary: SendSummary, log_in: LogInput, dead: DeadLetters, started: float) -> SendSummary:
    """``summary`` with the records read, the dead letters and the time taken."""
    summary.records_in = log_in.reader.lines_seen - (1 if log_in.header is not None else 0)
    summary.dead_lettered = dead.total
    summary.seconds = time.perf_counter() - started
    return summary


def send_file(
    chan: grpc.Channel,
    input_path: str,
    output_path: str,
    schema: SchemaConfig | None = None,
    batch_size: int = 1000,
    max_record_bytes: int = 65536,
    dead: DeadLetters | None = None,
    timeout: float | None = None,
) -> SendSummary:
    """Stream ``input_path`` through ``Filter`` and write what comes back to ``output_path``.

    ``timeout`` bounds the whole RPC (a deadline: DEADLINE_EXCEEDED when the stream has not ended by then)."""
    started = time.perf_counter()
    schema = schema or SchemaConfig()
    dead = dead or DeadLetters(None)
    summary = SendSummary()
    log_in, sink = _open_files(input_path, output_path, schema, dead, max_record_bytes, batch_size)
    reassembler = Reassembler()
    lock = threading.Lock()

    def requests() -> Iterator[EventBatch]:
        seq = 1
        for number, batch in enumerate(log_in.batches):
            events, bad = _decode(log_in, batch, dead, input_path)
            if batch.last_eol == "" and events and (not bad or bad[-1] != len(batch.lines) - 1):
                events[-1].eol = ""
            if not events:
                continue
            with lock:
                reassembler.add(events, seq)
                summary.sent += len(events)
            yield to_batch(events, seq, str(number))
            seq += len(events)

    stub = QueryLogFilterStub(chan)
    try:
        for response in stub.Filter(requests(), timeout=timeout):
            with lock:
                out = reassembler.take(response)
            summary.received += len(out)
            sink.write(out)
    finally:
        sink.close()
    return _finish(summary, log_in, dead, started)


def send_ingest(
    chan: grpc.Channel,
    input_path: str,
    schema: SchemaConfig | None = None,
    batch_size: int = 1000,
    max_record_bytes: int = 65536,
    dead: DeadLetters | None = None,
    timeout: float | None = None,
) -> SendSummary:
    """Stream ``input_path`` through ``Ingest`` into the sidecar's configured sinks; the summary carries its answer
    (given once every batch of the stream is durable: delivered, or held by a filter)."""
    started = time.perf_counter()
    schema = schema or SchemaConfig()
    dead = dead or DeadLetters(None)
    summary = SendSummary()
    log_in = open_log(input_path, schema, dead, max_record_bytes, batch_size)

    def requests() -> Iterator[EventBatch]:
        seq = 1
        for number, batch in enumerate(log_in.batches):
            events = _decode(log_in, batch, dead, input_path)[0]
            if events:
                summary.sent += len(events)
                yield to_batch(events, seq, str(number))
                seq += len(events)

    summary.ingested = QueryLogFilterStub(chan).Ingest(requests(), timeout=timeout)
    return _finish(summary, log_in, dead, started)


def send_routed(
    chans: list[grpc.Channel],
    input_path: str,
    output_path: str,
    schema: SchemaConfig | None = None,
    batch_size: int = 1000,
    max_record_bytes: int = 65536,
    dead: DeadLetters | None = None,
    timeout: float | None = None,
) -> SendSummary:
    """Stream ``input_path`` to several sidecar replicas, each event to the replica that owns its user.

    Replica ``i`` of ``n`` (``chans[i]``) owns the users whose keyed hash falls in its range
    (:func:`adapters.file.scale.partition.owner`, key from ``QUERYLOG_PARTITION_KEY`` or the documented
    default): all of a user's events reach one replica, so per-user state (profiles, budgets) is whole there.
    One ``Filter`` stream per replica; what comes back is written as it arrives (each replica's events in
    their order, replicas interleaved)."""
    from adapters.file.scale.partition import owner, partition_key

    started = time.perf_counter()
    schema = schema or SchemaConfig()
    dead = dead or DeadLetters(None)
    summary = SendSummary()
    key, n = partition_key(), len(chans)
    log_in, sink = _open_files(input_path, output_path, schema, dead, max_record_bytes, batch_size)
    lock = threading.Lock()
    reassemblers = [Reassembler() for _ in chans]
    queues: list[queue.Queue[EventBatch | None]] = [queue.Queue(maxsize=16) for _ in chans]
    errors: list[BaseException] = []

    def requests(i: int) -> Iterator[EventBatch]:
        while (item := queues[i].get()) is not None:
            yield item

    def stream(i: int) -> None:
        try:
            for response in QueryLogFilterStub(chans[i]).Filter(requests(i), timeout=timeout):
                with lock:
                    out = reassemblers[i].take(response)
                    summary.received += len(out)
                    sink.write(out)
        except BaseException as exc:  # handed to the reading thread, which raises it
            errors.append(exc)
            while queues[i].get() is not None:  # drain, so the reader never blocks on a dead stream
                pass

    threads = [threading.Thread(target=stream, args=(i,), daemon=True) for i in range(n)]
    for t in threads:
        t.start()
    seq = 1
    try:
        for number, batch in enumerate(log_in.batches):
            groups: list[list[Event]] = [[] for _ in chans]
            for ev in _decode(log_in, batch, dead, input_path)[0]:
                groups[owner(ev.user, n, key)].append(ev)
            for i, group in enumerate(groups):
                if not group:
                    continue
                with lock:
                    reassemblers[i].add(group, seq)
                    summary.sent += len(group)
                queues[i].put(to_batch(group, seq, f"{number}.{i}"))
                seq += len(group)
            if errors:
                break
    finally:
        for q in queues:
            q.put(None)
        for t in threads:
            t.join()
        sink.close()
    if errors:
        raise errors[0]
    return _finish(summary, log_in, dead, started)


def _token(token_file: str | None, token_env: str | None) -> str | None:
    """The bearer token from --token-file or --token-env (never echoed); None when neither is given."""
    if token_file and token_env:
        click.echo("send: give --token-file or --token-env, not both", err=True)
        sys.exit(EXIT_USAGE)
    if token_env:
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", token_env):  # perhaps the token itself: never echo it
            click.echo("send: --token-env must name an environment variable (the value is not shown)", err=True)
            sys.exit(EXIT_USAGE)
        value = os.environ.get(token_env, "").strip()
        if not value:
            click.echo(f"send: environment variable {token_env} is not set or empty", err=True)
            sys.exit(EXIT_USAGE)
        return value
    if token_file:
        value = Path(token_file).read_text(encoding="ascii", errors="replace").strip()
        if not value:
            click.echo(f"send: token file {token_file} is empty", err=True)
            sys.exit(EXIT_USAGE)
        return value
    return None


@click.command("send")
@click.option(
    "--address",
    "-a",
    "addresses",
    required=True,
    multiple=True,
    metavar="HOST:PORT",
    help="Sidecar address. Repeated: replicas, the i-th owning the users whose keyed hash is in the i-th of N "
    "equal ranges; each event goes to its user's replica (docs/SCALE.md).",
)
@click.option(
    "--batch-size", default=1000, show_default=True, type=click.IntRange(1, 100_000), help="Events per batch."
)
@click.option(
    "--tls-ca", default=None, type=click.Path(dir_okay=False, exists=True), help="CA certificate (PEM): use TLS."
)
@click.option(
    "--tls-cert",
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help="Client certificate (PEM) for mutual TLS; with --tls-key.",
)
@click.option("--tls-key", default=None, type=click.Path(dir_okay=False, exists=True), help="Client private key (PEM).")
@click.option(
    "--token-file",
    default=None,
    type=click.Path(dir_okay=False, exists=True),
    help="File holding the bearer token the sidecar asks for (server.auth_token_*).",
)
@click.option("--token-env", default=None, metavar="VAR", help="Environment variable holding the bearer token.")
@click.option(
    "--config",
    "-c",
    "config_file",
    default=None,
    type=click.Path(dir_okay=False),
    help="Take the record schema and limits from this config (default: AOL TSV).",
)
@click.option(
    "--output", "-o", default=None, help="Where the returned events go (input's schema; .gz compresses); not --ingest."
)
@click.option(
    "--ingest",
    is_flag=True,
    help="Into the sidecar's configured sinks (the Ingest RPC: a buffering chain's way in) instead of back to -o; "
    "prints what the sidecar accepted, delivered, held, dropped and dead-lettered. One --address.",
)
@click.option(
    "--timeout",
    default=None,
    type=click.FloatRange(min=0, min_open=True),
    help="Give up after this many seconds: a deadline for connecting and the whole stream together.",
)
@click.argument("input_path", metavar="INPUT")
def send_cmd(
    addresses: tuple[str, ...],
    batch_size: int,
    tls_ca: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    token_file: str | None,
    token_env: str | None,
    config_file: str | None,
    output: str | None,
    ingest: bool,
    timeout: float | None,
    input_path: str,
) -> None:
    """Stream a log file (TSV/JSONL, .gz; `-` = stdin) through the sidecar's Filter and write what comes back, or
    with --ingest into the sidecar's sinks."""
    from adapters.grpc.client import channel
    from sidecar.gctune import tune_gc

    for address in addresses:
        check_address(address, "--address")
    if ingest and (output is not None or len(addresses) > 1):
        raise click.UsageError("--ingest delivers into the sidecar's sinks: no --output, and one --address")
    if not ingest and output is None:
        raise click.UsageError("Missing option '--output' / '-o' (or --ingest).")
    schema, limit = SchemaConfig(), 65536
    if config_file:
        cfg = load(config_file)
        schema, limit = cfg.sidecar.schema, cfg.sidecar.limits.max_record_bytes
    setup_logs()
    if input_path != "-" and not Path(input_path).is_file():
        click.echo(f"{input_path}: no such file", err=True)
        sys.exit(EXIT_USAGE)
    if (tls_cert is None) != (tls_key is None):
        click.echo("send: --tls-cert and --tls-key go together", err=True)
        sys.exit(EXIT_USAGE)
    token = _token(token_file, token_env)
    tune_gc()
    chans = [channel(a, tls_ca, tls_cert=tls_cert, tls_key=tls_key, token=token) for a in addresses]
    deadline = None if timeout is None else time.monotonic() + timeout
    waiting = [addresses[0]]  # the address being connected to (named when it times out)
    try:
        if deadline is not None:
            for i, chan in enumerate(chans):
                waiting[0] = addresses[i]
                grpc.channel_ready_future(chan).result(timeout=max(0.001, deadline - time.monotonic()))
        left = None if deadline is None else max(0.001, deadline - time.monotonic())
        if ingest:
            summary = send_ingest(chans[0], input_path, schema, batch_size, limit, timeout=left)
        elif len(chans) == 1:
            summary = send_file(chans[0], input_path, str(output), schema, batch_size, limit, timeout=left)
        else:
            summary = send_routed(chans, input_path, str(output), schema, batch_size, limit, timeout=left)
    except grpc.FutureTimeoutError:
        click.echo(f"send: no connection to {waiting[0]} within {timeout} s", err=True)
        sys.exit(1)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
            click.echo(f"send: the stream did not finish within --timeout {timeout} s", err=True)
        else:
            click.echo(f"send: {exc.code().name}: {exc.details()}", err=True)
        sys.exit(1)
    except ConfigError as exc:
        fail_config(exc)
    finally:
        for chan in chans:
            chan.close()
    click.echo(summary.line(), err=True)
