"""``querylog bench dp``: queries/s of ``dp_replace`` on one core, domains of >= 10,000 concepts.

The stream: ``--queries`` events drawn (with repeats, as in a real log) from the
distinct queries of the AOL sample (``<repo>/../shared/data/aol-sample.tsv`` or
``--aol``) when present, else from a generated log (``querylog generate``), spread
over ``--users`` users and annotated with their ``classify`` category beforehand
(untimed). The filter runs with ``budget: stream`` and a budget large enough that
nothing is suppressed (every event pays for its draws), on a real SQLite state
store committed every batch, with the production CSPRNG (no seed). Printed:

* **filter, cold** — a fresh filter (empty mapping and class-table caches);
* **filter, warm** — the same filter on a second stream of fresh events;
* **mechanism** — draws/s of the class sampler alone, for concepts drawn uniformly
  from the domain (class tables built on first use: ``cold``) and again (``warm``).

Only counts and rates are printed, never queries.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from sidecar.tools.bench.common import peak_rss_mib

DEFAULT_AOL = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "aol-sample.tsv"


def _pool(source: Path | None, seed: int) -> tuple[list[str], str]:
    if source is not None and source.is_file():
        from knowledge.evaluate import read_aol_queries

        qs = sorted({q for q in read_aol_queries(source) if q.strip() and q.strip() != "-"})
        return qs, f"AOL sample, {len(qs):,} distinct queries"
    import io

    from sidecar.tools.generate.synthetic import generate_log

    buf = io.StringIO()
    generate_log(2000, seed, buf)
    qs = sorted({line.split("\t")[1] for line in buf.getvalue().split("\n")[1:] if "\t" in line})
    return qs, f"generated log, {len(qs):,} distinct queries"


@click.command("dp")
@click.option("--queries", "n", default=100_000, show_default=True, help="Events per timed stream.")
@click.option("--users", default=10_000, show_default=True, help="Distinct users in the stream.")
@click.option("--batch", default=1000, show_default=True, help="Events per process() call (one ledger commit each).")
@click.option(
    "--domain",
    type=click.Choice(["single", "category"]),
    default="single",
    show_default=True,
    help="single: one domain under --root; category: one domain per ODP category.",
)
@click.option("--root", default="entity.n.01", show_default=True, help="Root synset of the single domain.")
@click.option(
    "--criterion",
    type=click.Choice(["sqc1", "sqc2", "nsqc"]),
    default="sqc1",
    show_default=True,
    help="Quality criterion of the mechanism.",
)
@click.option("--repeat", default=3, show_default=True, help="Timed runs of the mechanism-only figures (median).")
@click.option("--seed", default=1, show_default=True, help="Seed of the stream (the draws use the CSPRNG).")
@click.option("--aol", type=click.Path(dir_okay=False, path_type=Path), default=None, help="AOL-format log.")
@click.option("--kb", "kb_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="KB file.")
def COMMAND(
    n: int,
    users: int,
    batch: int,
    domain: str,
    root: str,
    criterion: str,
    repeat: int,
    seed: int,
    aol: Path | None,
    kb_path: Path | None,
) -> None:
    """Queries/s of dp_replace (mapping, budget ledger, exact sampling) on one core; domains >= 10,000 concepts."""
    from filters.dp_replace import DpReplaceFilter
    from filters.dp_replace.mechanism import overrun
    from knowledge.classifier import Classifier
    from sidecar.api import BuildContext, Event
    from sidecar.gctune import tune_gc
    from sidecar.logs import configure_logging
    from sidecar.state import StateStore

    configure_logging("warning", "json")
    pool, origin = _pool(aol if aol is not None else DEFAULT_AOL, seed)
    clf = Classifier.load(kb_path)
    cats = {q: (c.category if (c := clf.classify(q)) else None) for q in pool}
    rng = random.Random(seed)

    def stream() -> list[tuple[str, str]]:
        return [(str(100000 + rng.randrange(users)), rng.choice(pool)) for _ in range(n)]

    def events(rows: list[tuple[str, str]]) -> list[Event]:
        out = []
        for i, (user, q) in enumerate(rows):
            ev = Event(user, q, f"2006-03-01 {i % 24:02d}:00:00", "", "")
            ev.annotate("category", cats[q])
            out.append(ev)
        return out

    options: dict[str, Any] = {
        "epsilon": 10.0,
        "budget": "stream",
        "max_queries": 1_000_000,  # nothing suppressed: every event pays for its draws
        "window_seconds": None,
        "domain": domain,
        "root": root,
        "criterion": criterion,
        "kb_path": str(kb_path) if kb_path else None,
    }
    with tempfile.TemporaryDirectory() as tmp:
        state = StateStore(Path(tmp))
        ctx = BuildContext(config_dir=Path(tmp), state=state, rng=random.SystemRandom())
        t0 = time.perf_counter()
        f = DpReplaceFilter(DpReplaceFilter.Config(**options), ctx)
        build = time.perf_counter() - t0
        sizes = [info.concepts for info in f.domains.info()]
        tune_gc()  # as `serve` and `replay` do once the chain is built: the start-up heap (KB, tables) frozen
        lines = [_filter_run(f, label, stream(), events, batch) for label in ("filter, cold", "filter, warm")]
        members, nodes, cold, warm = _mechanism(f, rng, repeat)
        f.close()
        state.close()
    click.echo(
        f"dp_replace bench: {origin}; {users:,} users; domain {domain} ({len(sizes)} domain(s), largest "
        f"{max(sizes):,} concepts, smallest {min(sizes):,}); criterion {criterion}; build {build:.2f} s"
    )
    for line in lines:
        click.echo(line)
    click.echo(
        f"mechanism     : {len(nodes):,} draws, concepts uniform over {len(members):,}: "
        f"cold {len(nodes) / statistics.median(cold):,.0f}/s CPU, "
        f"warm {len(nodes) / statistics.median(warm):,.0f}/s CPU"
    )
    click.echo(
        f"float overrun per query (documented bound): {overrun(10.0 / 1_000_000):.1e} at this epsilon, "
        f"{overrun(1.0):.1e} at eps_q = 1; target >= 20,000 queries/s"
    )
    click.echo(f"peak RSS: {peak_rss_mib():.1f} MiB")


def _filter_run(f: Any, label: str, rows: list[tuple[str, str]], events: Callable[..., list[Any]], batch: int) -> str:
    """The filter over one stream of (user, query) rows, in batches built untimed: its line of figures."""
    n = len(rows)
    cpu = wall = 0.0
    for i in range(0, n, batch):
        evs = events(rows[i : i + batch])  # built untimed, one batch at a time (as a source hands them)
        c0, w0 = time.process_time(), time.perf_counter()
        f.process(evs)
        cpu += time.process_time() - c0
        wall += time.perf_counter() - w0
    return (
        f"{label:14}: {n:>9,} queries  {n / wall:>9,.0f}/s wall  {n / cpu:>9,.0f}/s CPU  "
        f"(replaced {f.counts['replaced']:,}, dropped {f.counts['dropped_no_concept']:,})"
    )


def _mechanism(f: Any, rng: random.Random, repeat: int) -> tuple[Any, list[int], list[float], list[float]]:
    """The class sampler alone, over 20,000 concepts drawn uniformly from the largest domain, ``repeat`` times with
    its class tables cleared first (cold) and again (warm): (the domain's members, the concepts, CPU seconds cold,
    CPU seconds warm)."""
    biggest = max(range(len(f.domains.names)), key=f.domains.size)
    members = f.domains.members(biggest).members
    nodes = [int(members[rng.randrange(len(members))]) for _ in range(20_000)]
    eps_q = 0.05
    sampler = f.sampler
    cold, warm = [], []
    for _ in range(repeat):
        sampler._prepared.clear()
        c0 = time.process_time()
        for x in nodes:
            sampler.draw(x, eps_q)
        cold.append(time.process_time() - c0)
        c0 = time.process_time()
        for x in nodes:
            sampler.draw(x, eps_q)
        warm.append(time.process_time() - c0)
    return members, nodes, cold, warm
