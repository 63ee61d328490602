"""``querylog bench default``: a whole chain end to end over gRPC, on every core.

Starts ``--replicas`` sidecars (``querylog serve``, one process each, default:
one per core) with the chosen config, each with its own state folder — the
scaling model of the design: one sidecar per shard, events routed by a hash of
the user id, so per-user state stays on one replica and each replica's category
buffers are k-anonymous on their own. The bench process then streams a
generated log through ``Filter`` on one stream per replica, and reports:

* events/s over the whole run (sent / wall time until every response is in),
  every replica fed as fast as it answers (its batch round trips, queueing
  included, are printed too);
* added latency: then one batch at a time per replica (the next sent when the
  previous is answered), from sending a batch to receiving its response,
  p50/p99. Events a buffering filter holds are not in that response, so the
  time they wait in a buffer is excluded by construction; an event's added
  latency is the latency of its batch.

The client runs on the same two cores as the sidecars: figures are lower bounds.
"""

from __future__ import annotations

import os
import queue
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import click
import yaml

REPO = Path(__file__).resolve().parents[3]
QUERYLOG = str(Path(sys.executable).with_name("querylog"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _replica_config(src: Path, dst: Path, state: Path) -> None:
    """The config with its own state folder, quiet logs, relative paths made absolute."""
    data = yaml.safe_load(src.read_text(encoding="utf-8"))
    data["state_dir"] = str(state)
    data["dead_letter_file"] = None
    data["logging"] = {"level": "warning", "format": "json"}
    data["sinks"] = []
    dst.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _percentile(values: list[float], p: float) -> float:
    if not values:
        return 0.0
    s = sorted(values)
    return s[min(len(s) - 1, round(p / 100 * (len(s) - 1)))]


def _shards(log_path: Path, users: int, seed: int, replicas: int, order: str) -> list[list[Any]]:
    """A generated log's events, one list per replica (routed by a hash of the user id), in time order or as
    generated."""
    from sidecar.codecs import SchemaConfig, TsvCodec
    from sidecar.tools.generate.synthetic import generate_log

    with log_path.open("w", encoding="utf-8") as fh:
        generate_log(users, seed, fh)
    lines = log_path.read_text(encoding="utf-8").splitlines()
    codec = TsvCodec(SchemaConfig())
    codec.accept_header(lines[0])
    shards: list[list[Any]] = [[] for _ in range(replicas)]
    body = lines[1:]
    if order == "time":  # live traffic arrives in time order, users interleaved
        time_col = codec.idx[2]
        assert time_col is not None, "the default schema has a time column"
        body.sort(key=lambda line: line.split("\t")[time_col])
    for line in body:
        ev = codec.decode(line, "\n")
        shards[zlib.crc32(str(ev.user).encode()) % replicas].append(ev)
    return shards


def _start_replicas(
    config: Path, replicas: int, work: Path, env: dict[str, str], procs: list[Any], logs: list[Any]
) -> list[str]:
    """Start the sidecar processes (appended to ``procs``, their stderr files to ``logs``); their addresses."""
    addresses = []
    for i in range(replicas):
        cfg = work / f"replica{i}.yaml"
        _replica_config(config, cfg, work / f"state{i}")
        port = _free_port()
        addresses.append(f"127.0.0.1:{port}")
        err = (work / f"replica{i}.err").open("wb")
        logs.append(err)
        procs.append(
            subprocess.Popen(
                [QUERYLOG, "serve", "-c", str(cfg), "--listen", addresses[-1]],
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
        )
    return addresses


def _stream(chan: Any, events: list[Any], batch: int, closed: bool, lat: list[float], errors: queue.Queue[Any]) -> None:
    """One Filter stream of ``events`` in batches; ``closed``: send a batch only after the previous answer (service
    time). Round trips go to ``lat``, an RPC error to ``errors``."""
    import grpc

    from adapters.grpc.client import to_batch
    from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub

    sent_at: dict[str, float] = {}
    answered = threading.Semaphore(1)

    def requests() -> Iterator[Any]:
        seq = 1
        for n, start in enumerate(range(0, len(events), batch)):
            chunk = events[start : start + batch]
            msg = to_batch(chunk, seq, str(n))
            seq += len(chunk)
            if closed:
                answered.acquire()
            sent_at[str(n)] = time.perf_counter()
            yield msg

    try:
        for resp in QueryLogFilterStub(chan).Filter(requests()):
            t = sent_at.pop(resp.batch_id, None)
            if t is not None:
                lat.append(time.perf_counter() - t)
            if closed:
                answered.release()
    except grpc.RpcError as exc:
        errors.put(exc)


def _streams(
    chans: list[Any], parts: list[list[Any]], batch: int, closed: bool, lat: list[float], errors: queue.Queue[Any]
) -> float:
    """One stream per replica at once (``parts[i]`` to ``chans[i]``); the seconds until every one has ended."""
    threads = [
        threading.Thread(target=_stream, args=(chan, part, batch, closed, lat, errors))
        for chan, part in zip(chans, parts)
    ]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def _stop(procs: list[Any], logs: list[Any]) -> None:
    for p in procs:
        p.terminate()
    for p in procs:
        try:
            p.wait(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
    for err_fh in logs:
        err_fh.close()


def run(
    config: Path, users: int, replicas: int, batch: int, seed: int, order: str = "time", latency_batches: int = 20
) -> dict[str, Any]:
    import grpc

    from adapters.grpc.client import channel, wait_serving

    env = dict(os.environ)
    env.setdefault("QUERYLOG_HMAC_KEY", "bench-key-not-secret-0123456789abcdef")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        shards = _shards(work / "log.tsv", users, seed, replicas, order)
        procs: list[Any] = []
        logs: list[Any] = []
        try:
            chans = [channel(a) for a in _start_replicas(config, replicas, work, env, procs, logs)]
            for i, chan in enumerate(chans):
                if not wait_serving(chan, 300):
                    tail = (work / f"replica{i}.err").read_text(errors="replace")[-1500:]
                    raise click.ClickException(f"a sidecar replica did not start: {tail}")
            latencies: list[float] = []
            errors: queue.Queue[grpc.RpcError] = queue.Queue()
            # 1. throughput: every replica fed as fast as it takes batches (open loop)
            cut = [max(0, len(sh) - batch * latency_batches) for sh in shards]
            seconds = _streams(chans, [sh[:c] for sh, c in zip(shards, cut)], batch, False, latencies, errors)
            # 2. added latency: one batch at a time per replica (closed loop), on the rest of the log
            service: list[float] = []
            _streams(chans, [sh[c:] for sh, c in zip(shards, cut)], batch, True, service, errors)
            if not errors.empty():
                exc = errors.get()
                raise click.ClickException(f"stream failed: {exc.code().name}")
            for chan in chans:
                chan.close()
        finally:
            _stop(procs, logs)
        sent = sum(cut)
        return {
            "events": sent,
            "seconds": seconds,
            "events_per_s": sent / seconds,
            "batches": len(latencies),
            "p50_ms": 1000 * _percentile(latencies, 50),
            "p99_ms": 1000 * _percentile(latencies, 99),
            "service_batches": len(service),
            "service_p50_ms": 1000 * _percentile(service, 50),
            "service_p99_ms": 1000 * _percentile(service, 99),
        }


@click.command("default")
@click.option(
    "--config",
    "-c",
    "config_file",
    default=str(resources.files("querylog_config").joinpath("default.yaml")),
    show_default="the shipped default config",
    type=click.Path(exists=True, dir_okay=False),
    help="The chain to measure.",
)
@click.option("--users", default=4000, show_default=True, help="Users in the generated log.")
@click.option(
    "--replicas",
    default=os.cpu_count() or 1,
    show_default="the number of cores",
    type=click.IntRange(1, 64),
    help="Sidecar processes (events routed by user id hash).",
)
@click.option("--batch", default=1000, show_default=True, help="Events per Filter request.")
@click.option("--seed", default=1, show_default=True, help="Seed of the generated log.")
@click.option(
    "--order",
    type=click.Choice(["time", "file"]),
    default="time",
    show_default=True,
    help="Send the log in time order (live traffic) or as generated (user after user).",
)
def COMMAND(config_file: str, users: int, replicas: int, batch: int, seed: int, order: str) -> None:
    """Events/s and p50/p99 added latency of a chain over gRPC (default: config/default.yaml), all cores."""
    from sidecar.config import load_config

    chain = [s.name for s in load_config(config_file).filters]
    if "classify" in chain:  # build the knowledge base once here, not in every replica at the same time
        from knowledge.classifier import Classifier

        Classifier.load()
    r = run(Path(config_file), users, replicas, batch, seed, order)
    click.echo(f"chain: {' -> '.join(chain) or 'none'}; {replicas} replica(s), batches of {batch}, {order} order")
    click.echo(
        f"throughput: {r['events']:,} events ({users:,} users) in {r['seconds']:.2f} s "
        f"= {r['events_per_s']:,.0f} events/s"
    )
    click.echo(
        f"  batch round trip at full load (queueing included): p50 {r['p50_ms']:.1f} ms, "
        f"p99 {r['p99_ms']:.1f} ms over {r['batches']:,} batches"
    )
    click.echo(
        f"added latency, one batch of {batch} in flight per replica (excludes buffer wait): "
        f"p50 {r['service_p50_ms']:.1f} ms, p99 {r['service_p99_ms']:.1f} ms over {r['service_batches']:,} "
        f"batches"
    )
    click.echo(
        "paper 001 requirement: 40,000 events/s (average world-wide query rate); figures are noisy on a "
        "shared 2-core machine"
    )
