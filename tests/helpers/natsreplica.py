"""A sidecar replica with a nats source, as its own process (the tests kill it with -9): the config's chain and
sinks, the source's options as JSON. Until SIGTERM; then it stops the source, releases (final), closes, and
writes the source's counts to ``counts.json`` beside the config.

    python -m helpers.natsreplica CONFIG '{"servers": ["nats://..."], "partitions": [0, 1], ...}'
"""

from __future__ import annotations

import json
import signal
import sys
from pathlib import Path


def main(config: str, options: str) -> None:
    from adapters.nats.config import NatsSourceConfig
    from adapters.nats.source import NatsSource
    from sidecar.config import load_config
    from sidecar.pipeline import Pipeline

    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    opts = json.loads(options)
    for key in ("servers", "partitions"):
        if opts.get(key) is not None:
            opts[key] = tuple(opts[key])
    pipe = Pipeline(load_config(Path(config)))
    source = NatsSource(NatsSourceConfig(**opts), pipe.ctx)
    pipe.start_release_timer()
    source.start(pipe)
    print("replica_started", flush=True)
    signal.sigwait({signal.SIGTERM})
    source.stop(grace=10)
    pipe.release(final=True)
    pipe.close()
    Path(config).with_name("counts.json").write_text(json.dumps(dict(source.counts)), encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
