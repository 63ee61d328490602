"""What the network benchmarks (``bench forward``, ``bench vector``, ``bench http``) share.

Each of them runs three processes, as a deployment would: the sidecar (``querylog serve`` with a
generated config, so it has the GIL to itself), a minimal downstream that acknowledges what the
sidecar's sink sends (``forward``: ``{"ack": chunk}`` replies; ``vector``: empty ``PushEvents``
replies; ``http`` writes to a file, no downstream process), and the client in the bench process,
which sends pre-built batches and waits for the sidecar's acknowledgements. Printed per run:

* **client-acknowledged** events/s: events sent / time from the first send to the last acknowledgement
  (an acknowledgement is given once the events are durable in the sink's outbox or delivered);
* **downstream-received** events/s: events the downstream received / time from the first send to the
  moment it had the last of them;
* the batch size, and the peak RSS of the sidecar, the client and the downstream.

Records are AOL query-log records (``AnonID``, ``Query``, ``QueryTime``, ``ItemRank``, ``ClickURL``; the
schema's default roles) from the synthetic generator, cycled to ``--events``. ``--chain default`` runs
the filters of the shipped ``config/default.yaml`` (hipaa_scrub, drop, pseudonymize with a throw-away
key, truncate_url, classify); ``passthrough`` runs none.
"""

from __future__ import annotations

import io
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import click
import yaml

QUERYLOG = str(Path(sys.executable).with_name("querylog"))
#: The pseudonymize key of ``--chain default`` (a bench key, not a secret; an operator's own key is kept).
BENCH_HMAC_KEY = "bench-key-not-secret-0123456789abcdef"
CHAINS = ("passthrough", "default")
#: How long the bench waits for the sidecar to start, for acknowledgements and for the downstream.
START_TIMEOUT = 120.0
IO_TIMEOUT = 120.0


# ---- records --------------------------------------------------------------------------------------


def aol_records(events: int, seed: int) -> list[dict[str, str]]:
    """``events`` AOL records (str values, "" for an absent rank or URL) from the synthetic generator, cycled."""
    from sidecar.tools.generate.synthetic import generate_log

    users = max(20, min(4000, events // 25 + 1))  # about 26 lines a user; at most ~100,000 distinct lines
    buf = io.StringIO()
    generate_log(users, seed, buf, plant_identifiers=False)
    lines = buf.getvalue().splitlines()
    keys = lines[0].split("\t")
    distinct = [dict(zip(keys, line.split("\t"))) for line in lines[1:] if line]
    return [distinct[i % len(distinct)] for i in range(events)]


def chain_filters(chain: str) -> list[Any]:
    """The ``filters:`` of a chain: none (passthrough), or those of the shipped config/default.yaml."""
    if chain == "passthrough":
        return []
    text = resources.files("querylog_config").joinpath("default.yaml").read_text(encoding="utf-8")
    filters: list[Any] = yaml.safe_load(text).get("filters") or []
    if any("classify" in f for f in filters if isinstance(f, dict)):  # build a missing KB here, not in the sidecar
        from knowledge import default_kb_path, kb_status
        from knowledge.build import build

        if kb_status(default_kb_path())[0] is None:
            click.echo("building the knowledge base of classify first (about half a minute)", err=True)
            build(default_kb_path())
    return filters


# ---- the sidecar ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peak_rss_of(pid: int) -> float:
    """Peak RSS (VmHWM) of a live process, MiB (0 when unavailable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def wait_port(port: int, proc: subprocess.Popen[bytes], timeout: float = START_TIMEOUT) -> None:
    """Until 127.0.0.1:``port`` accepts a connection; ClickException when the process ended or time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise click.ClickException(f"the sidecar exited with {proc.returncode} before listening")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise click.ClickException(f"the sidecar did not listen on port {port} within {timeout:.0f} s")


@dataclass
class Sidecar:
    proc: subprocess.Popen[bytes]
    port: int
    folder: Path

    def peak_rss(self) -> float:
        return peak_rss_of(self.proc.pid)


@contextmanager
def sidecar(folder: Path, chain: str, source: dict[str, Any], sinks: list[dict[str, Any]]) -> Iterator[Sidecar]:
    """``querylog serve`` with ``source`` (its ``listen`` set to a free port), the chain and ``sinks``; stopped with
    SIGTERM (then killed) on exit. Its stderr goes to ``folder/sidecar.err`` (quoted when it fails to start)."""
    port = free_port()
    name, options = next(iter(source.items()))
    config = {
        "state_dir": str(folder / "state"),
        "dead_letter_file": None,
        "logging": {"level": "warning", "format": "json"},
        "sources": [{name: {**options, "listen": f"127.0.0.1:{port}"}}],
        "filters": chain_filters(chain),
        "sinks": sinks,
    }
    path = folder / "sidecar.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    env = dict(os.environ)
    env.setdefault("QUERYLOG_HMAC_KEY", BENCH_HMAC_KEY)
    with (folder / "sidecar.err").open("wb") as err:
        proc = subprocess.Popen([QUERYLOG, "serve", "-c", str(path)], env=env, stdout=subprocess.DEVNULL, stderr=err)
    try:
        try:
            wait_port(port, proc)
        except click.ClickException as exc:
            tail = (folder / "sidecar.err").read_text(encoding="utf-8", errors="replace")[-1500:]
            raise click.ClickException(f"{exc.message}\n{tail}") from None
        yield Sidecar(proc, port, folder)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# ---- the downstream ---------------------------------------------------------------------------------


@dataclass
class Received:
    """What the downstream had: events, wall-clock times of the first and the last, its peak RSS (MiB)."""

    events: int
    first: float
    last: float
    peak_rss: float


class Downstream:
    """A downstream in a process of its own: ``target(port_queue, counts, stop)`` serves on a free port, puts the
    port into the queue and adds what it receives to ``counts`` (:class:`Counts`) until ``stop`` is set."""

    def __init__(self, target: Callable[..., None]) -> None:
        ctx = multiprocessing.get_context("spawn")
        ports: Any = ctx.Queue()
        self.counts = Counts(
            ctx.Value("q", 0, lock=False), ctx.Value("d", 0.0, lock=False), ctx.Value("d", 0.0, lock=False)
        )
        self._stop: Any = ctx.Event()
        self.process = ctx.Process(target=target, args=(ports, self.counts, self._stop), daemon=True)
        self.process.start()
        try:
            self.port: int = ports.get(timeout=START_TIMEOUT)
        except Exception:
            self.close()
            raise click.ClickException("the downstream did not start") from None

    def wait(self, expected: int, quiet: float = 3.0, timeout: float = IO_TIMEOUT) -> Received:
        """Once it has ``expected`` events, or got none for ``quiet`` seconds (a chain dropped some), or after
        ``timeout`` seconds: what it has."""
        deadline = time.monotonic() + timeout
        seen, since = -1, time.monotonic()
        while time.monotonic() < deadline:
            n = self.counts.events.value
            if n >= expected:
                break
            if n != seen:
                seen, since = n, time.monotonic()
            elif time.monotonic() - since >= quiet:
                break
            time.sleep(0.01)
        c = self.counts
        return Received(c.events.value, c.first.value, c.last.value, peak_rss_of(self.process.pid or 0))

    def close(self) -> None:
        self._stop.set()
        self.process.join(10)
        if self.process.is_alive():
            self.process.kill()
            self.process.join()


@dataclass
class Counts:
    """Shared with the parent (``multiprocessing`` values): events received, wall-clock times of the first and of
    the last."""

    events: Any
    first: Any
    last: Any


class _Tally:
    """The downstream's side of :class:`Counts` (its threads add under one lock)."""

    def __init__(self, counts: Counts) -> None:
        self.counts = counts
        self.lock = threading.Lock()

    def add(self, n: int) -> None:
        c = self.counts
        with self.lock:
            now = time.time()
            if not c.events.value:
                c.first.value = now
            c.last.value = now
            c.events.value += n


def forward_downstream(ports: Any, counts: Counts, stop: Any) -> None:
    """A forward server that counts entries (by each message's ``size`` option) and acks every ``chunk``."""
    from adapters.forward.protocol import FrameDecoder, make_ack, parse_message

    counter = _Tally(counts)
    listener = socket.create_server(("127.0.0.1", 0), backlog=64)

    def connection(conn: socket.socket) -> None:
        decoder = FrameDecoder(64 * 1024 * 1024)
        with conn:
            while True:
                data = conn.recv(1 << 20)
                if not data:
                    return
                acks = []
                n = 0
                for obj in decoder.feed(data):
                    option = obj[-1] if type(obj) is list and len(obj) == 3 and type(obj[-1]) is dict else {}
                    size = option.get("size")
                    n += size if type(size) is int else len(parse_message(obj).entries)
                    chunk = option.get("chunk")
                    if type(chunk) is str:
                        acks.append(make_ack(chunk))
                counter.add(n)
                if acks:
                    conn.sendall(b"".join(acks))

    def accept() -> None:
        while True:
            conn, _ = listener.accept()
            threading.Thread(target=connection, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    ports.put(listener.getsockname()[1])
    stop.wait()


def vector_downstream(ports: Any, counts: Counts, stop: Any) -> None:
    """A ``vector.Vector`` server that counts the events of every ``PushEvents`` and answers at once."""
    from concurrent.futures import ThreadPoolExecutor

    import grpc

    from adapters.vector.codec import split_request

    counter = _Tally(counts)

    def push(request: bytes, context: grpc.ServicerContext) -> bytes:
        counter.add(len(split_request(request)))
        return b""

    def health(request: bytes, context: grpc.ServicerContext) -> bytes:
        return b""  # HealthCheckResponse{status: SERVING} (0, the default)

    server = grpc.server(ThreadPoolExecutor(4), options=[("grpc.max_receive_message_length", 1 << 26)])
    handlers: dict[str, grpc.RpcMethodHandler[Any, Any]] = {
        "PushEvents": grpc.unary_unary_rpc_method_handler(push),
        "HealthCheck": grpc.unary_unary_rpc_method_handler(health),
    }
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler("vector.Vector", handlers),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    ports.put(port)
    stop.wait()
    server.stop(1)


# ---- running and printing -------------------------------------------------------------------------


@dataclass
class Run:
    """One measured run."""

    sent: int
    acked: int
    seconds_acked: float
    received: int
    seconds_received: float
    batch: int
    sidecar_rss: float
    client_rss: float
    downstream_rss: float
    note: str = ""


def downstream_run(
    total: int,
    acked: int,
    elapsed: float,
    received: Received,
    t0: float,
    batch: int,
    sidecar_rss: float,
    errors: Iterable[str],
) -> Run:
    """A run whose events a :class:`Downstream` counted; the client's RSS is this process's peak, now."""
    from sidecar.tools.bench.common import peak_rss_mib

    seen = sorted(set(errors))
    return Run(
        sent=total,
        acked=acked,
        seconds_acked=elapsed,
        received=received.events,
        seconds_received=max(0.0, received.last - t0),
        batch=batch,
        sidecar_rss=sidecar_rss,
        client_rss=peak_rss_mib(),
        downstream_rss=received.peak_rss,
        note=f"client errors: {', '.join(seen)}" if seen else "",
    )


def temp_folder() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="querylog-bench-")


def print_run(title: str, run: Run) -> None:
    click.echo(f"{title}: {run.sent:,} events in batches of {run.batch:,}")
    rate = run.acked / run.seconds_acked if run.seconds_acked > 0 else 0.0
    click.echo(f"  client-acknowledged : {run.acked:>9,} events in {run.seconds_acked:6.2f} s = {rate:>9,.0f} events/s")
    rate = run.received / run.seconds_received if run.seconds_received > 0 else 0.0
    notes = [run.note] if run.note else []
    if run.received < run.acked:
        notes.append(f"{run.acked - run.received:,} fewer than acknowledged: dropped by the chain's rules, or lost")
    click.echo(
        f"  downstream-received : {run.received:>9,} events in {run.seconds_received:6.2f} s = {rate:>9,.0f} events/s"
        + (f" ({'; '.join(notes)})" if notes else "")
    )
    click.echo(
        f"  peak RSS: sidecar {run.sidecar_rss:.1f} MiB, client {run.client_rss:.1f} MiB"
        + (f", downstream {run.downstream_rss:.1f} MiB" if run.downstream_rss else "")
    )
