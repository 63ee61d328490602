"""A sidecar replica with a ``nats`` source in a process of its own (``bench nats`` runs one per replica; the
nats tests kill one with -9): the config's chain and sinks, the source's options (and a ``nats`` sink's,
optional) as JSON. It prints ``replica_started`` once the source runs (with ``NATSREPLICA_GO_FILE`` set:
``replica_ready`` once built, and the source starts when that file exists); on SIGTERM it stops the source, releases
(final), closes (the sinks drain their outboxes) and writes the source's and the sink's counts (its outbox's
``sent_events``: records JetStream acknowledged) to ``COUNTS``.

    python -m sidecar.tools.bench.natsreplica CONFIG COUNTS SOURCE_JSON [SINK_JSON]
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any


def _options(text: str) -> dict[str, Any]:
    opts: dict[str, Any] = json.loads(text)
    for key in ("servers", "partitions"):
        if opts.get(key) is not None:
            opts[key] = tuple(opts[key])
    return opts


def main(config: str, counts: str, source_json: str, sink_json: str | None = None) -> None:
    from adapters.nats.config import NatsSinkConfig, NatsSourceConfig
    from adapters.nats.sink import NatsSink
    from adapters.nats.source import NatsSource
    from sidecar.config import load_config
    from sidecar.pipeline import Pipeline

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    pipe = Pipeline(load_config(Path(config)))
    sink = NatsSink(NatsSinkConfig(**_options(sink_json)), pipe.ctx) if sink_json else None
    if sink is not None:  # built here: the sink may not be registered (entry points) where this runs
        pipe.sinks.append(sink)
    source = NatsSource(NatsSourceConfig(**_options(source_json)), pipe.ctx)
    go = os.environ.get("NATSREPLICA_GO_FILE")
    if go:  # the bench starts every replica's source at once, once all are built (models loaded)
        print("replica_ready", flush=True)
        while not Path(go).exists():
            time.sleep(0.01)
    pipe.start_release_timer()
    source.start(pipe)
    print("replica_started", flush=True)
    signal.sigwait({signal.SIGTERM})
    source.stop(grace=30)
    pipe.release(final=True)
    box = sink.outbox if sink is not None else None
    chain = {k: v for k, v in pipe.stats().items() if k.startswith("events_")}
    pipe.close()
    closed = time.time()  # the outboxes drained (or given up after close_drain_seconds)
    out = {
        "source": dict(source.counts),
        "sink_written": sink.written if sink is not None else 0,
        "chain": chain,
        "closed_at": closed,
    }
    if box is not None:
        out["sink"] = box.stats()  # sent_events: records JetStream acknowledged
    Path(counts).write_text(json.dumps(out), encoding="utf-8")


if __name__ == "__main__":
    main(*sys.argv[1:])
