"""``querylog bench buffer``: events/s of ``category_buffer`` with its state in SQLite.

Synthetic events already annotated like ``classify`` does (16 ODP categories,
users with favourite categories) go through the filter in batches; the state
store is a real WAL SQLite database in a temporary folder, committed every
batch. Paper 001's anonymizer: 22 us/event, 45,454 events/s, no persistence.
"""

from __future__ import annotations

import gc
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from sidecar.api import BuildContext, Event
from sidecar.tools.bench.common import peak_rss_mib


def categorised_events(n: int, users: int, seed: int) -> list[Event]:
    """``n`` events of ``users`` users (a few favourite categories each), annotated like ``classify``."""
    from knowledge.categories import load_taxonomy

    categories = load_taxonomy().names  # the shipped taxonomy's 16 ODP categories
    rng = random.Random(seed)
    favourites = [rng.sample(categories, 3) for _ in range(users)]
    out = []
    for i in range(n):
        u = rng.randrange(users)
        cat = rng.choice(favourites[u]) if rng.random() < 0.8 else rng.choice(categories)
        ev = Event(
            str(100000 + u), f"{cat.lower()} query {rng.randrange(20000)}", f"2006-03-01 {i % 24:02d}:00:00", "", ""
        )
        ev.meta = {"category": cat, "category_path": (cat,)}
        out.append(ev)
    return out


def run_filter(
    name: str,
    options: dict[str, object],
    events: list[Event],
    batch: int,
    state_dir: Path,
    class_overrides: dict[str, object] | None = None,
) -> dict[str, Any]:
    """Build the named filter on a fresh state store and time ``process`` over all batches.

    ``class_overrides`` sets class attributes on a subclass of the registered filter (e.g. a switch).
    """
    from sidecar.registry import FILTERS, plugins
    from sidecar.state import StateStore

    cls = plugins(FILTERS)[name]
    if class_overrides:
        cls = type(cls.__name__, (cls,), dict(class_overrides))
    state = StateStore(state_dir)
    ctx = BuildContext(config_dir=state_dir, state=state, rng=random.SystemRandom())
    f = cls(cls.Config(**options), ctx)
    from sidecar.gctune import tune_gc

    out = 0
    threshold = gc.get_threshold()
    tune_gc()  # as `querylog serve` does: start-up heap (here also the pre-built input) frozen, gen0 at 20,000
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(0, len(events), batch):
        out += len(f.process(events[i : i + batch]))
    seconds = time.perf_counter() - t0
    cpu = time.process_time() - c0
    gc.unfreeze()
    gc.set_threshold(*threshold)
    held = f.held()
    stats = f.stats()
    f.close()
    state.close()
    return {
        "events": len(events),
        "out": out,
        "held": held,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "events_per_s": len(events) / seconds,
        "events_per_cpu_s": len(events) / cpu,
        "stats": stats,
    }


@click.command("buffer")
@click.option("--events", default=500_000, show_default=True, help="Events in the synthetic stream.")
@click.option("--users", default=10_000, show_default=True, help="Distinct users in the stream.")
@click.option("--k", default=5, show_default=True, help="Buffer size k of every category.")
@click.option("--batch", default=1000, show_default=True, help="Events per process() call (one commit each).")
@click.option("--seed", default=1, show_default=True, help="Seed of the synthetic log (draws use the CSPRNG).")
@click.option(
    "--interpreted",
    is_flag=True,
    help="Run the filter's per-event core (filters/category_buffer/core.py) from its source even when a compiled "
    "build is in place, to measure the build.",
)
def COMMAND(events: int, users: int, k: int, batch: int, seed: int, interpreted: bool) -> None:
    """Events/s of category_buffer on one core, state durable in SQLite (WAL)."""
    from sidecar.logs import configure_logging

    configure_logging("warning", "json")
    evs = categorised_events(events, users, seed)
    with tempfile.TemporaryDirectory() as tmp:
        overrides: dict[str, object] = {}
        if interpreted:
            from filters.category_buffer.buckets import CORE
            from sidecar.api.compiled import source

            overrides["CORE"] = source(CORE)
        r = run_filter("category_buffer", {"k": k}, evs, batch, Path(tmp), overrides)
    variant = " (core interpreted)" if interpreted else ""
    click.echo(
        f"category_buffer{variant} k={k}: {r['events']:,} events ({users:,} users) in {r['seconds']:.3f} s "
        f"= {r['events_per_s']:,.0f} events/s ({r['events_per_cpu_s']:,.0f} per CPU-second); "
        f"released {r['out']:,}, held {r['held']:,}"
    )
    click.echo("paper 001 anonymizer: 45,454 events/s (no persistence); target >= 150,000 events/s")
    click.echo(f"peak RSS: {peak_rss_mib():.1f} MiB")
