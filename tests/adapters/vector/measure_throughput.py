"""Events/s through vector source -> passthrough -> vector sink, three processes (one run; prints, never a test).

Usage: ``python tests/adapters/vector/measure_throughput.py [EVENTS] [BATCH] [CONCURRENCY]``.

A client process sends ``PushEvents`` requests of BATCH typical Vector log events (message, timestamp, host,
source_type, user_id and three more keys; about 220 bytes each) with CONCURRENCY requests in flight to sidecar
A (its own process: vector source, passthrough chain, vector sink with its outbox in SQLite); A delivers to
sidecar B (a third process: vector source, counting sink). Printed: the rate at which A acknowledged (events
durable in its outbox) and the rate at which B had received every event, both from the first request on.
"""

from __future__ import annotations

import multiprocessing as mp
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

ROLES = "schema: {roles: {user: user_id, query: message, time: timestamp, rank: null, url: null}}\n"


def _quiet() -> None:
    import structlog

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(40))


def run_b(folder: str, total: int, addresses: Any, done: Any) -> None:
    """Sidecar B: a vector source and a sink that counts; reports the wall-clock time the last event came."""
    _quiet()
    from helpers.vector import vector_sidecar

    from sidecar.api import Event, Sink, SinkConfig
    from sidecar.gctune import tune_gc

    class Count(Sink[SinkConfig]):
        NAME = "count"

        def __init__(self) -> None:
            super().__init__(SinkConfig(), None)  # type: ignore[arg-type]
            self.n = 0
            self.finished = threading.Event()

        def write(self, events: list[Event]) -> None:
            self.n += len(events)
            if self.n >= total:
                self.finished.set()

    count = Count()
    config = Path(folder) / "b.yaml"
    config.write_text("state_dir: b\n" + ROLES + "sources:\n  - vector: {}\n", encoding="utf-8")
    with vector_sidecar(config, extra_sinks=[count]) as b:
        tune_gc()
        addresses.put(b.address)
        count.finished.wait(600)
        done.put(time.time())


def run_a(folder: str, b_address: str, batch: int, addresses: Any, stop: Any) -> None:
    """Sidecar A: vector source -> no filter -> vector sink to B."""
    _quiet()
    from helpers.vector import vector_sidecar

    from sidecar.gctune import tune_gc

    config = Path(folder) / "a.yaml"
    config.write_text(
        "state_dir: a\n"
        + ROLES
        + f"sources:\n  - vector: {{}}\nsinks:\n  - vector: {{address: '{b_address}', batch_size: {batch}}}\n",
        encoding="utf-8",
    )
    with vector_sidecar(config) as a:
        tune_gc()
        addresses.put(a.address)
        stop.wait(600)


def main(total: int = 200_000, batch: int = 1000, concurrency: int = 2) -> None:
    _quiet()
    from helpers.vector import log_event, request

    requests = [
        request(
            [
                log_event(
                    {
                        "message": f"cheap flights to lisbon {r} {i}",
                        "timestamp": f"2024-05-01T12:00:{i % 60:02d}.123456789Z",
                        "host": "web-1",
                        "source_type": "http_server",
                        "user_id": 100_000 + i,
                        "status": 200,
                        "latency": 0.25,
                        "path": "/search",
                    }
                )
                for i in range(batch)
            ]
        )
        for r in range(total // batch)
    ]
    total = len(requests) * batch
    spawn = mp.get_context("spawn")
    addresses, done, stop = spawn.Queue(), spawn.Queue(), spawn.Event()
    with tempfile.TemporaryDirectory() as folder:
        b = spawn.Process(target=run_b, args=(folder, total, addresses, done))
        b.start()
        b_address = addresses.get(timeout=60)
        a = spawn.Process(target=run_a, args=(folder, b_address, batch, addresses, stop))
        a.start()
        a_address = addresses.get(timeout=60)
        import grpc

        with grpc.insecure_channel(a_address) as channel:
            push = channel.unary_unary("/vector.Vector/PushEvents")
            push(requests[0][:0], timeout=10)  # connected
            started = time.time()
            with ThreadPoolExecutor(concurrency) as pool:
                list(pool.map(lambda data: push(data, timeout=120), requests))
            acked = time.time() - started
        received = done.get(timeout=600) - started
        stop.set()
        a.join(30)
        b.join(30)
    print(
        f"vector source -> passthrough -> vector sink: {total:,} events ({len(requests[0]) // batch} bytes each) in "
        f"requests of {batch}, {concurrency} in flight; A acknowledged {total / acked:,.0f} events/s, "
        f"B received {total / received:,.0f} events/s"
    )


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:4]))
