"""``querylog bench passthrough``: file replay and gRPC ``Filter`` through the passthrough chain.

The gRPC part runs the sidecar (``querylog serve``) in a subprocess, so client and
server each get a core; the client builds request batches from decoded events,
streams them through ``Filter`` and parses the responses. ``--echo`` also runs a
bare gRPC echo of the same messages (the ceiling) under the same conditions.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import click

from adapters.grpc.codec import EventBatch
from sidecar.api import Event
from sidecar.gctune import tune_gc
from sidecar.tools.bench.common import peak_rss_mib


def _write_log(path: Path, events: int, seed: int) -> None:
    """A synthetic AOL-format log of ``events`` lines (header included)."""
    import random

    rng = random.Random(seed)
    words = [
        "weather",
        "cheap flights",
        "pizza near me",
        "lyrics",
        "ebay",
        "myspace",
        "jobs",
        "recipes",
        "used cars",
        "mortgage rates",
        "nba scores",
        "flu symptoms",
        "hotels",
        "maps",
        "news",
    ]
    with path.open("w", encoding="utf-8") as out:
        out.write("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n")
        for i in range(events):
            user = 1000 + rng.randrange(events // 20 + 1)
            q = f"{rng.choice(words)} {rng.choice(words)}"
            if i % 2:
                click_cols = f"{1 + i % 10}\thttp://www.example{i % 97}.com"
                out.write(f"{user}\t{q}\t2006-03-{1 + i % 28:02d} 12:{i % 60:02d}:00\t{click_cols}\n")
            else:
                out.write(f"{user}\t{q}\t2006-03-{1 + i % 28:02d} 12:{i % 60:02d}:00\t\t\n")


def bench_file_replay(events: int, seed: int, repeat: int) -> dict[str, float]:
    from sidecar.config import load_config
    from sidecar.drive import replay
    from sidecar.logs import configure_logging

    configure_logging("warning", "json")
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "in.tsv"
        _write_log(src, events, seed)
        cfg_path = Path(tmp) / "passthrough.yaml"
        cfg_path.write_text("state_dir: state\nfilters: []\n")
        cfg = load_config(cfg_path)
        best = float("inf")
        for _ in range(repeat):
            t0 = time.perf_counter()
            summary = replay(cfg, str(src), str(Path(tmp) / "out.tsv"))
            best = min(best, time.perf_counter() - t0)
            if (Path(tmp) / "out.tsv").read_bytes() != src.read_bytes():
                raise click.ClickException("passthrough output differs from input")
        return {"events": summary.records_in, "seconds": best, "events_per_s": summary.records_in / best}


# ---- gRPC -----------------------------------------------------------------------------

_ECHO = """
import sys
from concurrent.futures import ThreadPoolExecutor
import grpc
from adapters.grpc.stubs.querylog.v1.querylog_pb2 import EventBatch
def echo(requests, context):
    for batch in requests:
        yield batch
server = grpc.server(ThreadPoolExecutor(4), options=[("grpc.max_receive_message_length", 1 << 26)])
handler = grpc.stream_stream_rpc_method_handler(echo, EventBatch.FromString, EventBatch.SerializeToString)
service = grpc.method_handlers_generic_handler("querylog.v1.QueryLogFilter", {"Filter": handler})
server.add_generic_rpc_handlers((service,))
server.add_insecure_port(sys.argv[1])
server.start()
server.wait_for_termination()
"""


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _peak_rss_of(pid: int) -> float:
    """Peak RSS (VmHWM) of a live process, MiB (0 when unavailable)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return 0.0


def _wait_port(address: str) -> bool:
    import socket

    host, _, port = address.rpartition(":")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            socket.create_connection((host, int(port)), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False


def _start_server(tmp: Path, echo: bool, live_audit: bool = False) -> tuple[subprocess.Popen[bytes], str]:
    """The sidecar (passthrough chain; ``live_audit``: with its live audit on) or the bare echo, in a subprocess on a
    free port."""
    from adapters.grpc.client import channel, wait_serving

    address = f"127.0.0.1:{_free_port()}"
    if echo:
        cmd = [sys.executable, "-c", _ECHO, address]
    else:
        cfg = tmp / "grpc-passthrough.yaml"
        audit = "live_audit: {enabled: 'on'}\n" if live_audit else ""
        cfg.write_text("state_dir: grpc-state\nlogging: {level: warning}\nfilters: []\n" + audit)
        cmd = [
            sys.executable,
            "-c",
            "from sidecar.cli import main; main()",
            "serve",
            "--config",
            str(cfg),
            "--listen",
            address,
        ]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if echo:
        ok = _wait_port(address)
    else:
        chan = channel(address)
        ok = wait_serving(chan, 60)
        chan.close()
    if not ok:
        proc.kill()
        proc.wait()
        raise click.ClickException("the gRPC server did not start")
    return proc, address


def _decoded_events(events: int, seed: int, tmp: Path) -> list[Event]:
    from sidecar.codecs import SchemaConfig, TsvCodec

    src = tmp / "grpc-in.tsv"
    _write_log(src, events, seed)
    lines = src.read_text(encoding="utf-8").split("\n")
    codec = TsvCodec(SchemaConfig())
    codec.accept_header(lines[0])
    return codec.decode_many([ln for ln in lines[1:] if ln], "\n", [])


def bench_grpc_filter(address: str, events: list[Event], batch_size: int, rounds: int) -> dict[str, float]:
    """Stream ``events`` ``rounds`` times through Filter in batches; events/s of the whole round trip."""
    from adapters.grpc.client import channel, to_batch
    from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub

    chan = channel(address)
    stub = QueryLogFilterStub(chan)
    total = len(events) * rounds

    def requests() -> Iterator[EventBatch]:
        seq = 1
        for _ in range(rounds):
            for i in range(0, len(events), batch_size):
                chunk = events[i : i + batch_size]
                yield to_batch(chunk, seq)
                seq += len(chunk)

    received = 0
    t0 = time.perf_counter()
    for resp in stub.Filter(requests()):
        received += len(resp.events)
    seconds = time.perf_counter() - t0
    chan.close()
    if received != total:
        raise click.ClickException(f"gRPC passthrough returned {received} of {total} events")
    return {"events": total, "seconds": seconds, "events_per_s": total / seconds}


def bench_grpc(events: int, seed: int, repeat: int, echo: bool, live_audit: bool = False) -> list[str]:
    """Lines of figures: Filter with batches of 100 and 1000 (and the echo ceiling), server peak RSS."""
    out = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        decoded = _decoded_events(min(events, 100_000), seed, tmp)
        tune_gc()  # as `serve` and `send` do; the decoded events live through the run
        rounds = max(1, events // len(decoded))
        for label, is_echo in [("sidecar", False)] + ([("echo", True)] if echo else []):
            proc, address = _start_server(tmp, is_echo, live_audit)
            try:
                for batch_size in (100, 1000):
                    runs = [bench_grpc_filter(address, decoded, batch_size, rounds) for _ in range(repeat)]
                    best = min(runs, key=lambda r: r["seconds"])
                    out.append(
                        f"{f'gRPC {label} b={batch_size}':<22}: {best['events']:>9,} events  "
                        f"{best['seconds']:.3f} s  {best['events_per_s']:>11,.0f} events/s"
                    )
                out.append(f"{'server peak RSS':<22}: {_peak_rss_of(proc.pid):.1f} MiB ({label})")
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    return out


@click.command("passthrough")
@click.option("--events", default=1_000_000, show_default=True, help="Events in the synthetic log.")
@click.option("--seed", default=1, show_default=True, help="Seed of the synthetic log.")
@click.option("--repeat", default=3, show_default=True, help="Runs; the best is reported.")
@click.option("--file/--no-file", "do_file", default=True, show_default=True, help="File replay part.")
@click.option("--grpc/--no-grpc", "do_grpc", default=True, show_default=True, help="gRPC Filter part.")
@click.option("--echo/--no-echo", default=False, show_default=True, help="Also a bare gRPC echo (the ceiling).")
@click.option(
    "--live-audit/--no-live-audit",
    default=False,
    show_default=True,
    help="The gRPC sidecar runs its live audit (live_audit.enabled: on, its defaults): its cost.",
)
def COMMAND(events: int, seed: int, repeat: int, do_file: bool, do_grpc: bool, echo: bool, live_audit: bool) -> None:
    """Events/s of the passthrough chain: file replay (output checked byte-identical) and gRPC Filter."""
    if do_grpc:
        for line in bench_grpc(events, seed, repeat, echo, live_audit):
            click.echo(line)
        click.echo(f"{'client peak RSS':<22}: {peak_rss_mib():.1f} MiB")
    if do_file:
        r = bench_file_replay(events, seed, repeat)
        click.echo(
            f"file replay   : {r['events']:>9,} events  {r['seconds']:.3f} s  {r['events_per_s']:>11,.0f} events/s"
        )
        click.echo(f"peak RSS      : {peak_rss_mib():.1f} MiB")
