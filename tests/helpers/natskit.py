"""What the nats tests share: records, a partitioned publisher, a runtime around a nats source, consumer state.

Records are JSON lines ``{"AnonID", "Query", "seq"}`` with test values found nowhere else; ``seq`` numbers them.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from adapters.nats.config import NatsSinkConfig, NatsSourceConfig
from adapters.nats.partition import partition_key, publish_partitioned
from adapters.nats.sink import NatsSink
from adapters.nats.source import NatsSource
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

PREFIX = "querylog.in"
STREAM = "QUERYLOG"


def record(seq: int, users: int = 50) -> tuple[str, bytes]:
    """Record ``seq``: (its user, its JSON line)."""
    user = f"natsuser{seq % users}"
    line = json.dumps({"AnonID": user, "Query": f"nats kestrel query {seq % 37}", "seq": seq})
    return user, line.encode()


def publish(
    url: str,
    records: Iterable[tuple[str, bytes]],
    partitions: int,
    raw: Iterable[tuple[str, bytes]] = (),
    *,
    stream: str = STREAM,
    prefix: str = PREFIX,
    records_per_message: int = 1,
) -> int:
    """Publish records to their partitions (the stream created first if missing), ``records_per_message`` lines
    of a partition to a message; ``raw``: (subject, data) messages as they are. Waits for every JetStream
    acknowledgement."""
    import nats

    from adapters.nats.jetstream import ensure_stream

    async def run() -> int:
        nc = await nats.connect(url)
        try:
            js = nc.jetstream()
            await ensure_stream(js, stream, [f"{prefix}.*"])
            n = await publish_partitioned(
                nc, records, prefix, partitions, partition_key(), records_per_message=records_per_message
            )
            for subject, data in raw:
                await js.publish(subject, data)
                n += 1
            return n
        finally:
            await nc.close()

    return asyncio.run(run())


def consumer_state(url: str, durable: str) -> dict[str, int]:
    """``num_pending`` (not yet delivered) and ``num_ack_pending`` (delivered, unacknowledged) of a consumer."""
    import nats

    async def run() -> dict[str, int]:
        nc = await nats.connect(url)
        try:
            info = await nc.jetstream().consumer_info(STREAM, durable)
            return {"pending": int(info.num_pending or 0), "ack_pending": int(info.num_ack_pending or 0)}
        finally:
            await nc.close()

    return asyncio.run(run())


def config_file(folder: Path, filters: list[Any] | None = None, sinks: list[Any] | None = None) -> Path:
    """A config of JSON-line records (no source: the tests build the nats source themselves)."""
    folder.mkdir(parents=True, exist_ok=True)
    body = {
        "state_dir": "state",
        "schema": {"format": "jsonl"},
        "filters": filters or [],
        "sinks": sinks or [{"file": {"path": "out.jsonl"}}],
    }
    path = folder / "sidecar.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    return path


def pipeline(folder: Path, **kw: Any) -> Pipeline:
    return Pipeline(load_config(config_file(folder, **kw)), seed=7)


def source(pipe: Pipeline, url: str, **options: Any) -> NatsSource:
    options = {"stream": STREAM, "subject_prefix": PREFIX, "pull_wait_seconds": 0.2, **options}
    config = NatsSourceConfig(servers=(url,), **options)
    return NatsSource(config, pipe.ctx)


def sink(pipe: Pipeline, url: str, **options: Any) -> NatsSink:
    return NatsSink(NatsSinkConfig(servers=(url,), **options), pipe.ctx)


def output(folder: Path) -> list[dict[str, Any]]:
    path = folder / "out.jsonl"
    if not path.exists():
        return []
    whole = path.read_text(encoding="utf-8").split("\n")[:-1]  # a line being written is not one yet
    return [json.loads(line) for line in whole]


def seqs(folder: Path) -> Counter[int]:
    return Counter(int(r["seq"]) for r in output(folder))
