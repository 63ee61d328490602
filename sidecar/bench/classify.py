"""``querylog bench classify``: queries/s of the classifier, KB load time and memory."""

from __future__ import annotations

import random
import time
from pathlib import Path

import click

from sidecar.bench import peak_rss_mib


def _queries(n: int, seed: int, source: Path | None) -> list[str]:
    """``n`` queries: from an AOL-format file when given (counts only are printed), else synthetic."""
    rng = random.Random(seed)
    if source is not None:
        from sidecar.kb.evaluate import read_aol_queries

        pool = [q for q in read_aol_queries(source) if q.strip()]
    else:
        from sidecar.kb.evaluate import read_labelled

        pool = [q for q, _ in read_labelled()]
        words = [w for q in pool for w in q.split()]
        pool += [" ".join(rng.choice(words) for _ in range(rng.randint(1, 4))) for _ in range(n)]
    return [rng.choice(pool) for _ in range(n)]


@click.command("classify")
@click.option("--queries", "n", default=200_000, show_default=True, help="Queries to classify.")
@click.option("--seed", default=1, show_default=True)
@click.option("--kb", "kb_path", type=click.Path(dir_okay=False, path_type=Path), default=None, help="KB file.")
@click.option("--aol", "aol", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="Draw queries from this AOL-format TSV instead of synthetic ones.")
def COMMAND(n: int, seed: int, kb_path: Path | None, aol: Path | None) -> None:
    """Queries/s (one core, distinct and repeated queries), KB load time, peak RSS."""
    from sidecar.classifier import Classifier
    from sidecar.kb import load_kb

    rss0 = peak_rss_mib()
    t0 = time.perf_counter()
    kb = load_kb(kb_path)
    load_s = time.perf_counter() - t0
    rss_kb = peak_rss_mib()
    queries = _queries(n, seed, aol)
    distinct = sorted(set(queries))
    cold = Classifier(kb, cache_size=0)
    t0 = time.perf_counter()
    cold.prepare()
    prep_s = time.perf_counter() - t0
    # CPU time of this process: the machine is shared, wall time would count other jobs.
    t0 = time.process_time()
    got = sum(1 for q in distinct if cold.classify(q) is not None)
    cold_s = time.process_time() - t0
    fresh = Classifier(kb)
    t0 = time.process_time()
    for q in distinct:
        fresh.classify_uncached(q)
    fresh_s = time.process_time() - t0
    warm = Classifier(kb)
    warm.prepare()
    t0 = time.process_time()
    warm.classify_many(queries)
    warm_s = time.process_time() - t0
    click.echo(f"KB load        : {load_s:.3f} s  (RSS {rss0:.0f} -> {rss_kb:.0f} MiB); "
               f"recommendation index {prep_s:.3f} s")
    rate = len(distinct) / cold_s
    click.echo(f"distinct, cold : {len(distinct):>9,} queries  {cold_s:.2f} s CPU  {rate:>9,.0f} queries/s"
               f"  (no caches at all; categorised {got / len(distinct):.1%})")
    click.echo(f"distinct       : {len(distinct):>9,} queries  {fresh_s:.2f} s CPU  "
               f"{len(distinct) / fresh_s:>9,.0f} queries/s  (no query cache; word caches fill as it goes)")
    click.echo(f"stream (cached): {len(queries):>9,} queries  {warm_s:.2f} s CPU  "
               f"{len(queries) / warm_s:>9,.0f} queries/s")
    click.echo(f"peak RSS       : {peak_rss_mib():.1f} MiB")
