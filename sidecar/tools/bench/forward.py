"""``querylog bench forward``: events/s through forward source -> chain -> forward sink (PackedForward, acks).

The sidecar (``querylog serve``, its own process) has a ``forward`` source and a ``forward`` sink with
``require_ack`` into a minimal acking downstream (another process). The client sends PackedForward
messages of ``--batch`` events, each with a ``chunk`` option, on ``--connections`` connections with up to
``--window`` unacknowledged messages on each, and counts the sidecar's ``{"ack": chunk}`` replies. The
issue's target: >= 150,000 events/s through the passthrough chain on a 2-core machine. See
:mod:`sidecar.tools.bench.network` for what is printed.
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import click

from sidecar.tools.bench.common import run_threads
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

TAG = "bench.search"


def messages(records: list[dict[str, str]], batch: int) -> list[tuple[bytes, str, int]]:
    """PackedForward messages ``(bytes, chunk id, events)`` of ``batch`` records each (EventTime, as Fluent Bit)."""
    from adapters.forward.protocol import EventTime, new_chunk_id, pack_entries, packed_forward

    base = 1_700_000_000
    out = []
    for start in range(0, len(records), batch):
        part = records[start : start + batch]
        blob = pack_entries((EventTime(base + start + i, 123_456_789), r) for i, r in enumerate(part))
        chunk = new_chunk_id()
        out.append((packed_forward(TAG, blob, len(part), chunk), chunk, len(part)))
    return out


class _Connection:
    """Sends its share of the messages with at most ``window`` unacknowledged; counts acknowledged events."""

    def __init__(self, port: int, msgs: list[tuple[bytes, str, int]], window: int) -> None:
        self.port = port
        self.msgs = msgs
        self.window = window
        self.acked = 0
        self.error: str | None = None

    def run(self) -> None:
        from adapters.forward.protocol import FrameDecoder, ack_of

        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=IO_TIMEOUT) as sock:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                decoder = FrameDecoder(1 << 20)
                waiting: dict[str, int] = {}
                i = 0
                while i < len(self.msgs) or waiting:
                    while i < len(self.msgs) and len(waiting) < self.window:
                        data, chunk, n = self.msgs[i]
                        waiting[chunk] = n
                        sock.sendall(data)
                        i += 1
                    data = sock.recv(65536)
                    if not data:
                        raise ConnectionError("the sidecar closed the connection")
                    for obj in decoder.feed(data):
                        acked = ack_of(obj)
                        if acked is not None and acked in waiting:
                            self.acked += waiting.pop(acked)
        except OSError as exc:
            self.error = type(exc).__name__


def run_once(events: int, batch: int, chain: str, seed: int, connections: int, window: int) -> Run:
    from sidecar.tools.bench.network import forward_downstream, sidecar

    msgs = messages(aol_records(events, seed), batch)
    total = sum(n for _, _, n in msgs)
    with temp_folder() as tmp:
        down = Downstream(forward_downstream)
        try:
            sink: dict[str, Any] = {
                "address": f"127.0.0.1:{down.port}",
                "require_ack": True,
                "retry_initial_seconds": 0.05,
                "retry_max_seconds": 1.0,
            }
            with sidecar(Path(tmp), chain, {"forward": {}}, [{"forward": sink}]) as sc:
                conns = [_Connection(sc.port, msgs[i::connections], window) for i in range(connections)]
                t0, acked_at = run_threads([c.run for c in conns])
                acked = sum(c.acked for c in conns)
                received = down.wait(total)
                sidecar_rss = sc.peak_rss()
        finally:
            down.close()
    errors = (c.error for c in conns if c.error)
    return downstream_run(total, acked, acked_at - t0, received, t0, batch, sidecar_rss, errors)


@click.command("forward")
@click.option("--events", default=200_000, show_default=True, help="Events to send.")
@click.option("--batch", default=1000, show_default=True, help="Events per PackedForward message.")
@click.option("--chain", type=click.Choice(CHAINS), default="passthrough", show_default=True, help="Filters to run.")
@click.option("--seed", default=1, show_default=True, help="Seed of the generated records.")
@click.option("--connections", default=2, show_default=True, type=click.IntRange(1, 64), help="Client connections.")
@click.option(
    "--window",
    default=4,
    show_default=True,
    type=click.IntRange(1, 1024),
    help="Unacknowledged messages per connection.",
)
def COMMAND(events: int, batch: int, chain: str, seed: int, connections: int, window: int) -> None:
    """Events/s through forward source -> chain -> forward sink (PackedForward, chunk acks), sidecar in its own
    process, into a minimal acking downstream."""
    run = run_once(events, batch, chain, seed, connections, window)
    print_run(f"forward -> {chain} -> forward ({connections} connection(s), window {window})", run)
    if chain == "passthrough":
        click.echo("  target (issue 12): >= 150,000 events/s through the passthrough chain on 2 cores")
