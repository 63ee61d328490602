"""``querylog bench classify``: queries/s of the classifier (wall and CPU), KB load time and memory.

Queries: the distinct queries of the AOL sample (``<repo>/../shared/data/aol-sample.tsv``
or ``--aol``) when present, else generated ones (words of the project's labelled set
recombined). Three modes, each timed ``--repeat`` times on a fresh classifier:

* **uncached, cold** — no per-query cache and no word-level caches at all;
* **uncached** — no per-query cache; word-level caches (spelling recommendations)
  fill as the run goes, as they would in a long-running sidecar;
* **cached** — a stream of ``--queries`` queries drawn with repeats from the pool,
  through :meth:`Classifier.classify_many` (per-query cache on).

The garbage collector is tuned as ``querylog serve`` and ``replay`` tune it (the start-up heap,
the KB's tables included, frozen; see :func:`sidecar.gctune.tune_gc`), after the KB, the tables
and the query pool are built. Only counts and rates are printed, never queries.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import click

from sidecar.tools.bench.common import peak_rss_mib

DEFAULT_AOL = Path(__file__).resolve().parents[3] / ".." / "shared" / "data" / "aol-sample.tsv"


def _pool(seed: int, source: Path | None, n: int) -> tuple[list[str], str]:
    """Distinct queries to classify and where they come from."""
    if source is not None and source.is_file():
        from knowledge.evaluate import read_aol_queries

        qs = {q for q in read_aol_queries(source) if q.strip() and q.strip() != "-"}
        return sorted(qs), f"AOL sample, distinct queries ({source.name})"
    from knowledge.evaluate import read_labelled

    rng = random.Random(seed)
    base = [q for q, _ in read_labelled()]
    words = [w for q in base for w in q.split()]
    qs = set(base)
    while len(qs) < n:
        qs.add(" ".join(rng.choice(words) for _ in range(rng.randint(1, 4))))
    return sorted(qs), "generated queries (labelled-set words recombined), distinct"


def _time(run: Callable[[], object], repeat: int) -> tuple[list[float], list[float]]:
    """Wall and CPU seconds of ``repeat`` runs."""
    walls, cpus = [], []
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        run()
        cpus.append(time.process_time() - c0)
        walls.append(time.perf_counter() - w0)
    return walls, cpus


def _line(label: str, count: int, walls: list[float], cpus: list[float], note: str) -> str:
    wall_rate = count / statistics.median(walls)
    cpu_rate = count / statistics.median(cpus)
    best = count / min(cpus)
    return (
        f"{label:16}: {count:>9,} queries  wall {wall_rate:>9,.0f}/s  CPU {cpu_rate:>9,.0f}/s "
        f"(best CPU {best:>9,.0f}/s)  {note}"
    )


@click.command("classify")
@click.option(
    "--queries",
    "n",
    default=200_000,
    show_default=True,
    help="Length of the cached stream (and size of the generated pool without AOL data).",
)
@click.option("--repeat", default=3, show_default=True, help="Timed runs per mode (median reported).")
@click.option("--seed", default=1, show_default=True, help="Seed of generated queries (when the AOL sample is absent).")
@click.option("--kb", "kb_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="KB file.")
@click.option(
    "--aol",
    "aol",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="AOL-format TSV to draw queries from (default: <repo>/../shared/data/aol-sample.tsv if present).",
)
@click.option("--generated", is_flag=True, help="Use generated queries even when the AOL sample is present.")
def COMMAND(n: int, repeat: int, seed: int, kb_path: Path | None, aol: Path | None, generated: bool) -> None:
    """Queries/s on one core (wall and CPU; cache off and on), KB load time, peak RSS."""
    from knowledge import load_kb
    from knowledge.classifier import Classifier

    repeat = max(1, repeat)
    rss0 = peak_rss_mib()
    t0 = time.perf_counter()
    kb = load_kb(kb_path)
    load_s = time.perf_counter() - t0
    rss_kb = peak_rss_mib()
    t0 = time.perf_counter()
    clf = Classifier(kb, cache_size=0)
    init_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    clf.prepare()
    prep_s = time.perf_counter() - t0
    rss_ready = peak_rss_mib()
    source = None if generated else (aol or (DEFAULT_AOL if DEFAULT_AOL.is_file() else None))
    distinct, origin = _pool(seed, source, min(n, 100_000))
    rng = random.Random(seed)
    stream = [rng.choice(distinct) for _ in range(n)]
    got = sum(1 for q in distinct if clf.classify(q) is not None)
    from sidecar.gctune import tune_gc

    tune_gc()  # as `querylog serve` and `replay` run: start-up heap (the KB's tables) frozen, gen0 at 20,000

    click.echo(f"queries        : {origin}: {len(distinct):,} (categorised {got / len(distinct):.1%})")
    click.echo(
        f"KB load        : {load_s:.3f} s, classifier tables {init_s:.3f} s, recommendation index "
        f"{prep_s:.3f} s; peak RSS {rss0:.0f} -> {rss_kb:.0f} MiB (KB) -> {rss_ready:.0f} MiB (ready)"
    )

    modes: dict[str, tuple[list[float], list[float]]] = {"cold": ([], []), "uncached": ([], []), "cached": ([], [])}
    for _ in range(repeat):
        # Fresh classifiers, built outside the timed sections: no run inherits another's caches.
        c_cold, c_unc, c_hot = Classifier(kb, cache_size=0), Classifier(kb), Classifier(kb)
        runs: dict[str, Callable[[], object]] = {
            "cold": lambda: [c_cold.classify(q) for q in distinct],  # noqa: B023 - called in this iteration
            "uncached": lambda: [c_unc.classify_uncached(q) for q in distinct],  # noqa: B023
            "cached": lambda: c_hot.classify_many(stream),  # noqa: B023
        }
        for mode, run in runs.items():
            w, c = _time(run, 1)
            modes[mode][0].extend(w)
            modes[mode][1].extend(c)
    click.echo(_line("uncached, cold", len(distinct), *modes["cold"], "(no per-query cache, no word caches)"))
    click.echo(_line("uncached", len(distinct), *modes["uncached"], "(no per-query cache; word caches fill)"))
    click.echo(_line("cached stream", len(stream), *modes["cached"], "(per-query cache on; drawn with repeats)"))
    click.echo(f"peak RSS       : {peak_rss_mib():.1f} MiB after the runs (one core; wall time includes other jobs)")
