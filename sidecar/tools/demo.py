"""``querylog demo``: the main job end to end on a fresh machine.

Generates a synthetic AOL-format log, starts ``querylog serve`` with
the shipped default config (``config/default.yaml``) on a free local port, streams the log through ``Filter``
over gRPC, writes the protected output and prints a summary, then stops the
server with SIGTERM.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

import click

from sidecar.commandkit import load

DEFAULT_CONFIG = Path(str(resources.files("querylog_config").joinpath("default.yaml")))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _say(text: str) -> None:
    click.echo(f"demo: {text}")


def _planted_left(protected: Path, values: list[str]) -> int:
    """Planted identifiers still present in the protected output's query column.

    Only queries are searched: decimal pseudonyms in the user column can contain
    any digit string (a ZIP code, say) by chance.
    """
    with protected.open(encoding="utf-8") as f:
        header = f.readline().rstrip("\n").split("\t")
        qi = header.index("Query") if "Query" in header else 1
        queries = "\n".join(line.split("\t")[qi] for line in f if line.count("\t") >= qi)
    return sum(1 for value in values if value in queries)


@click.command("demo")
@click.option("--users", default=2000, show_default=True, type=click.IntRange(1, 1_000_000), help="Synthetic users.")
@click.option("--seed", default=1, show_default=True, help="Seed of the synthetic log.")
@click.option(
    "--config",
    "-c",
    "config_file",
    default=str(DEFAULT_CONFIG),
    show_default="the shipped default config",
    type=click.Path(dir_okay=False, exists=True),
    help="Sidecar config.",
)
@click.option(
    "--out-dir",
    default="demo-out",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Where the input, the protected output and the server log go.",
)
@click.option(
    "--batch-size", default=1000, show_default=True, type=click.IntRange(1, 100_000), help="Events per Filter request."
)
def demo_cmd(users: int, seed: int, config_file: str, out_dir: str, batch_size: int) -> None:
    """Generate a log, run it through the sidecar over gRPC, write the protected output, print a summary."""
    from adapters.grpc.client import channel, get_stats, wait_serving
    from sidecar.tools.generate.synthetic import generate_log
    from sidecar.tools.send import send_file

    cfg = load(config_file)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    src, dst, server_log = out / "input.tsv", out / "protected.tsv", out / "server.log"

    t0 = time.perf_counter()
    with src.open("w", encoding="utf-8") as f:
        gen = generate_log(users, seed, f)
    records = sum(1 for _ in src.open("rb")) - 1
    _say(
        f"generated {users:,} users, {records:,} events ({len(gen.planted)} planted identifiers) "
        f"-> {src} in {time.perf_counter() - t0:.1f} s"
    )

    env = dict(os.environ)
    if not env.get("QUERYLOG_HMAC_KEY"):
        env["QUERYLOG_HMAC_KEY"] = secrets.token_hex(32)  # fresh key for this run only
    address = f"127.0.0.1:{_free_port()}"
    names = " -> ".join(spec.name for spec in cfg.filters) or "passthrough"
    with server_log.open("w", encoding="utf-8") as log_file:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                "from sidecar.cli import main; main()",
                "serve",
                "--config",
                config_file,
                "--listen",
                address,
            ],
            stdout=subprocess.DEVNULL,
            stderr=log_file,
            env=env,
        )
    code = 1
    try:
        chan = channel(address)
        if not wait_serving(chan, 60):
            _say(f"the sidecar did not start; see {server_log}")
            raise SystemExit(1)
        _say(f"sidecar on {address}: {config_file} ({names})")
        limit = cfg.sidecar.limits.max_record_bytes
        summary = send_file(chan, str(src), str(dst), cfg.sidecar.schema, batch_size, limit)
        stats = get_stats(chan)
        chan.close()
        proc.send_signal(signal.SIGTERM)
        grpc = cfg.source("grpc")
        grace = grpc.config.shutdown_grace_seconds if grpc is not None else 10.0
        code = proc.wait(timeout=grace + 30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    left = _planted_left(dst, [p.value for p in gen.planted])
    _say(
        f"events in={stats.events_in:,} out={stats.events_out:,} held={stats.events_held:,} "
        f"dropped={stats.events_dropped:,} dead_letter={stats.events_dead_lettered + summary.dead_lettered:,} "
        f"seconds={summary.seconds:.2f} events/s={summary.events_per_second:,.0f}"
    )
    _say(f"planted identifiers still in the output: {left} of {len(gen.planted)}")
    _say(f"protected output: {dst} (input: {src}, server log: {server_log})")
    if code != 0:
        _say(f"the sidecar exited with code {code}; see {server_log}")
        raise SystemExit(1)
