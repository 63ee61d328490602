"""``querylog bench profile``: events/s of ``profile`` with its counts in SQLite.

Paper 001's profiler: 267 us/event, 3,745 events/s (MongoDB, one thread).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import click

from sidecar.tools.bench.buffer import categorised_events, run_filter
from sidecar.tools.bench.common import peak_rss_mib


@click.command("profile")
@click.option("--events", default=500_000, show_default=True, help="Events in the synthetic stream.")
@click.option("--users", default=10_000, show_default=True, help="Distinct users in the stream.")
@click.option("--batch", default=1000, show_default=True, help="Events per process() call (one commit each).")
@click.option("--seed", default=1, show_default=True, help="Seed of the synthetic stream.")
def COMMAND(events: int, users: int, batch: int, seed: int) -> None:
    """Events/s of the profile filter on one core, counts durable in SQLite (WAL)."""
    from sidecar.logs import configure_logging

    configure_logging("warning", "json")
    evs = categorised_events(events, users, seed)
    with tempfile.TemporaryDirectory() as tmp:
        r = run_filter("profile", {}, evs, batch, Path(tmp))
    click.echo(
        f"profile: {r['events']:,} events ({users:,} users, {r['stats'].get('profiles', 0):,} profiles) "
        f"in {r['seconds']:.3f} s = {r['events_per_s']:,.0f} events/s "
        f"({r['events_per_cpu_s']:,.0f} per CPU-second)"
    )
    click.echo("paper 001 profiler: 3,745 events/s; target >= 150,000 events/s")
    click.echo(f"peak RSS: {peak_rss_mib():.1f} MiB")
