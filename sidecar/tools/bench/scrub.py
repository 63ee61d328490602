"""``querylog bench scrub [--vs-presidio]``: quality and speed of ``hipaa_scrub`` on the labelled
corpus (per-type recall and precision, ordinary words kept, queries/s on one core), optionally
against Microsoft Presidio's analyzer on the same queries (:mod:`.scrub_presidio`: blank and with an NER model),
and counts on a real log (``--aol``).
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import click

from sidecar.tools.bench.common import peak_rss_mib
from sidecar.tools.bench.scrub_presidio import compare, fmt_rate, pct, rate, versus


def aol_counts(path: Path, scrubber: Any) -> tuple[int, int, Counter[str]]:
    """(queries, queries changed, identifiers found per type) over the Query column of an AOL TSV."""
    found: Counter[str] = Counter()
    n = changed = 0
    with path.open(encoding="utf-8", errors="replace") as fh:
        header = fh.readline().rstrip("\n").split("\t")
        qi = header.index("Query") if "Query" in header else 1
        for line in fh:
            cols = line.rstrip("\n").split("\t")
            if len(cols) <= qi:
                continue
            n += 1
            new, c = scrubber.scrub(cols[qi])
            found.update(c)
            changed += new != cols[qi]
    return n, changed, found


def engine_build() -> str:
    """Whether the scrubber's per-query loop and word pre-checks run compiled (mypyc) or interpreted."""
    from filters.hipaa_scrub.detectors import PRECHECKS
    from filters.hipaa_scrub.scrubber import ENGINE
    from sidecar.api.compiled import is_compiled

    def how(module: Any) -> str:
        return "compiled" if is_compiled(module) else "interpreted"

    return f"per-query loop {how(ENGINE)}, word pre-checks {how(PRECHECKS)} (sidecar/api/compiled.py)"


@click.command("scrub")
@click.option("--queries", default=23_000, show_default=True, help="Planted queries (as many ordinary ones are added).")
@click.option("--seed", default=1, show_default=True, help="Corpus seed (the own corpus).")
@click.option(
    "--corpus",
    "corpus",
    default="own",
    show_default=True,
    help="own: the generated corpus the scrubber was tuned on; independent: the frozen corpus written from the "
    "formats' public definitions (tests/data/independent_hipaa.jsonl); or the path of such a JSON-lines file.",
)
@click.option("--repeat", default=3, show_default=True, help="Timing runs; the best is reported.")
@click.option(
    "--vs-presidio",
    is_flag=True,
    help="Also run Presidio's analyzer (blank pipeline, and with the NER model) on a sample of the same corpus.",
)
@click.option(
    "--presidio-queries", default=4600, show_default=True, help="Corpus queries given to both in the comparison."
)
@click.option(
    "--aol",
    "aol",
    type=click.Path(dir_okay=False),
    default=None,
    help="Also count what is found in the Query column of an AOL-format TSV (counts only).",
)
def COMMAND(
    queries: int, seed: int, corpus: str, repeat: int, vs_presidio: bool, presidio_queries: int, aol: str | None
) -> None:
    """Recall/precision per type, ordinary words kept and queries/s of hipaa_scrub (optionally vs Presidio)."""
    from filters.hipaa_scrub.detectors import KINDS
    from filters.hipaa_scrub.scrubber import Scrubber
    from sidecar.tools.corpus import independent
    from sidecar.tools.corpus.hipaa import Corpus
    from sidecar.tools.evaluate.scrubber import evaluate

    t0 = time.perf_counter()
    scrubber = Scrubber()
    build_s = time.perf_counter() - t0
    if corpus == "own":
        items = list(Corpus().items(queries, seed))
        what = f"{queries:,} with planted identifiers, seed {seed}"
    else:
        path = independent.FROZEN if corpus == "independent" else Path(corpus)
        if not path.is_file():
            raise click.ClickException(f"{path}: no such file (--corpus own | independent | PATH)")
        items = independent.read(path)
        what = f"{sum(1 for _, g in items if g):,} with planted identifiers, frozen file {path.name}"
    texts = [q for q, _ in items]

    def ours(q: str) -> list[tuple[int, int, str]]:
        return [(s.start, s.end, s.kind) for s in scrubber.detect(q)]

    sc = evaluate(ours, items)
    click.echo(f"corpus        : {len(items):,} queries ({what}); filter build {build_s:.2f} s")
    click.echo(f"engine        : {engine_build()}")
    click.echo(f"{'type':14s} {'planted':>8s} {'recall%':>8s} {'detected':>9s} {'precision%':>11s}")
    kinds = list(KINDS) + sorted(k for k in sc.planted if k not in KINDS)
    for k in kinds:
        if not sc.planted[k] and not sc.detected[k]:
            continue
        click.echo(
            f"{k:14s} {sc.planted[k]:8d} {pct(sc.recall(k)):>8s} {sc.detected[k]:9d} {pct(sc.precision(k)):>11s}"
        )
    groups = independent.grouped_recall(sc.planted, sc.recalled)
    click.echo("recall by group: " + ", ".join(f"{g} {pct(r).strip()}% of {n:,}" for g, (r, n) in groups.items()))
    click.echo(f"ordinary words kept: {pct(sc.kept).strip()}% of {sc.words:,} words in identifier-free queries")
    click.echo(f"hipaa_scrub queries/s on the whole corpus (50% carry identifiers), one core, best of {repeat}:")
    click.echo(fmt_rate("  corpus", rate(scrubber.scrub, texts, repeat)))
    if aol:
        path = Path(aol)
        if not path.is_file():
            raise click.ClickException(f"{aol}: no such file")
        n, changed, found = aol_counts(path, scrubber)
        aol_texts = [
            ln.split("\t")[1]
            for ln in path.read_text(encoding="utf-8", errors="replace").splitlines()[1:]
            if "\t" in ln
        ]
        click.echo(
            f"AOL log       : {n:,} queries, {changed:,} changed; found "
            + ", ".join(f"{k} {v}" for k, v in found.most_common())
        )
        click.echo(fmt_rate("  AOL log", rate(scrubber.scrub, aol_texts, repeat)))
    if vs_presidio:
        configs = compare(items[:presidio_queries], ours, scrubber, repeat)
        if aol:
            versus(scrubber, configs, aol_texts[:presidio_queries], repeat, "AOL log")
    click.echo(f"peak RSS      : {peak_rss_mib():.1f} MiB")
