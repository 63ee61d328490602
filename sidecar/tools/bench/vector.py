"""``querylog bench vector``: events/s through vector source -> chain -> vector sink (Vector's native protocol).

The sidecar (``querylog serve``, its own process) has a ``vector`` source and a ``vector`` sink (requests of
``--batch`` events through its durable outbox) into a minimal ``vector.Vector`` server in another process
that counts events and answers every ``PushEvents`` at once. The client sends ``PushEvents`` requests of
``--batch`` log events with ``--concurrency`` requests in flight; a reply is the sidecar's acknowledgement.
See :mod:`sidecar.tools.bench.network` for what is printed.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

from sidecar.tools.bench.network import (
    CHAINS,
    IO_TIMEOUT,
    Downstream,
    Run,
    aol_records,
    downstream_run,
    print_run,
    temp_folder,
)


def requests(records: list[dict[str, str]], batch: int) -> list[tuple[bytes, int]]:
    """``PushEventsRequest`` bytes of ``batch`` log events each (the record's keys at the top of the log), and
    how many events each holds."""
    from adapters.vector.codec import frame
    from adapters.vector.stubs.event_pb2 import EventWrapper
    from adapters.vector.values import set_value

    out = []
    for start in range(0, len(records), batch):
        wires = []
        for record in records[start : start + batch]:
            w = EventWrapper()
            set_value(w.log.value, record)
            wires.append(w.SerializeToString())
        out.append((frame(wires), len(wires)))
    return out


def run_once(events: int, batch: int, chain: str, seed: int, concurrency: int) -> Run:
    import grpc

    from sidecar.tools.bench.network import sidecar, vector_downstream

    reqs = requests(aol_records(events, seed), batch)
    total = sum(n for _, n in reqs)
    acked = 0
    errors: set[str] = set()
    with temp_folder() as tmp:
        down = Downstream(vector_downstream)
        try:
            sink = {
                "address": f"127.0.0.1:{down.port}",
                "batch_size": batch,
                "retry_initial_seconds": 0.05,
                "retry_max_seconds": 1.0,
            }
            with sidecar(Path(tmp), chain, {"vector": {}}, [{"vector": sink}]) as sc:
                with grpc.insecure_channel(f"127.0.0.1:{sc.port}") as channel:
                    push: grpc.UnaryUnaryMultiCallable[bytes, bytes] = channel.unary_unary("/vector.Vector/PushEvents")
                    grpc.channel_ready_future(channel).result(timeout=IO_TIMEOUT)

                    def send(req: tuple[bytes, int]) -> int:
                        try:
                            push(req[0], timeout=IO_TIMEOUT)
                        except grpc.RpcError as exc:
                            errors.add(exc.code().name)
                            return 0
                        return req[1]

                    t0 = time.time()
                    with ThreadPoolExecutor(concurrency) as pool:
                        acked = sum(pool.map(send, reqs))
                    acked_at = time.time()
                received = down.wait(total)
                sidecar_rss = sc.peak_rss()
        finally:
            down.close()
    return downstream_run(total, acked, acked_at - t0, received, t0, batch, sidecar_rss, errors)


@click.command("vector")
@click.option("--events", default=200_000, show_default=True, help="Events to send.")
@click.option("--batch", default=1000, show_default=True, help="Events per PushEvents request (client and sink).")
@click.option("--chain", type=click.Choice(CHAINS), default="passthrough", show_default=True, help="Filters to run.")
@click.option("--seed", default=1, show_default=True, help="Seed of the generated records.")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 64), help="Requests in flight.")
def COMMAND(events: int, batch: int, chain: str, seed: int, concurrency: int) -> None:
    """Events/s through vector source -> chain -> vector sink (PushEvents replies as acks), sidecar in its own
    process, into a minimal Vector server."""
    run = run_once(events, batch, chain, seed, concurrency)
    print_run(f"vector -> {chain} -> vector ({concurrency} requests in flight)", run)
