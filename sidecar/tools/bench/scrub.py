"""``querylog bench scrub [--vs-presidio]``: quality and speed of ``hipaa_scrub`` on the labelled
corpus (per-type recall and precision, ordinary words kept, queries/s on one core), optionally
against Microsoft Presidio's analyzer on the same queries, and counts on a real log (``--aol``).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from pathlib import Path
from typing import Any

import click

from sidecar.tools.bench.common import peak_rss_mib

# Presidio entities that cover each of our types (types without an entry: Presidio has no recognizer)
PRESIDIO_TYPES: dict[str, tuple[str, ...]] = {
    "name": ("PERSON",),
    "address": ("LOCATION",),
    "city": ("LOCATION",),
    "county": ("LOCATION",),
    "date": ("DATE_TIME",),
    "phone": ("PHONE_NUMBER",),
    "fax": ("PHONE_NUMBER",),
    "email": ("EMAIL_ADDRESS",),
    "ssn": ("US_SSN",),
    "account": ("US_BANK_NUMBER", "IBAN_CODE"),
    "card": ("CREDIT_CARD",),
    "license": ("US_DRIVER_LICENSE", "MEDICAL_LICENSE", "US_NPI", "US_PASSPORT"),
    "health_plan": ("US_MBI",),
    "mac": ("MAC_ADDRESS",),
    "url": ("URL",),
    "ip": ("IP_ADDRESS",),
    # kinds of the independent corpus (sidecar/tools/corpus/independent.py)
    "street": ("LOCATION",),
    "town": ("LOCATION",),
    "mbi": ("US_MBI",),
    "itin": ("US_ITIN",),
    "ssn_dotted": ("US_SSN",),
    "ipv6": ("IP_ADDRESS",),
    "phone_nanp": ("PHONE_NUMBER",),
    "phone_e164": ("PHONE_NUMBER",),
    "phone_national": ("PHONE_NUMBER",),
}
PRESIDIO_NOTE = (
    "Presidio: presidio-analyzer with its predefined recognizers, all entities. Its NLP engine is a BLANK spaCy "
    "English pipeline (tokenizer only, NO NER: no spaCy model can be downloaded here), so PERSON and LOCATION, "
    "which need an NER model, find nothing, and its speed excludes the NER model it would normally run; its URL "
    "recognizer cannot fetch the public suffix list offline."
)


def _rate(fn: Any, texts: list[str], repeat: int) -> tuple[float, float]:
    """(wall-clock texts/s, CPU-time texts/s), each the best of ``repeat`` runs over ``texts``."""
    wall = cpu = math.inf
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        for t in texts:
            fn(t)
        c1, w1 = time.process_time(), time.perf_counter()
        wall, cpu = min(wall, w1 - w0), min(cpu, c1 - c0)
    n = len(texts)
    return (n / wall if wall > 0 else math.inf), (n / cpu if cpu > 0 else math.inf)


def _fmt_rate(label: str, rates: tuple[float, float]) -> str:
    wall, cpu = rates
    return f"{label:18s}: wall {wall:>10,.0f} q/s ({1e6 / wall:8.1f} us/query)   CPU {cpu:>10,.0f} q/s"


def _versus(scrubber: Any, analyzer: Any, texts: list[str], repeat: int, what: str) -> None:
    """Both throughputs on the same texts, one after the other (never concurrently), and their ratio. The runs
    alternate (ours, theirs, ours, theirs...) so that a change in the machine's load falls on both, and each
    side keeps its best run; ours is timed over several passes per run (it is ~50x shorter)."""
    ours, peer = (0.0, 0.0), (0.0, 0.0)
    for _ in range(repeat):
        mine = _rate(scrubber.scrub, texts, 5)
        theirs = _rate(lambda q: analyzer.analyze(text=q, language="en"), texts, 1)
        ours = (max(ours[0], mine[0]), max(ours[1], mine[1]))
        peer = (max(peer[0], theirs[0]), max(peer[1], theirs[1]))
    click.echo(
        f"throughput on the same {len(texts):,} {what} queries, measured one after the other, alternating "
        f"(best of {repeat} runs each; ours best of 5 passes per run):"
    )
    click.echo(_fmt_rate("  hipaa_scrub", ours))
    click.echo(_fmt_rate("  presidio analyze", peer) + "   (blank spaCy pipeline: no NER)")
    click.echo(f"  ratio           : wall {ours[0] / peer[0]:,.0f}x   CPU {ours[1] / peer[1]:,.0f}x")


def _presidio() -> Any:
    import logging
    import tempfile

    try:
        import spacy
        from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
        from presidio_analyzer.nlp_engine import NlpEngineProvider
    except ImportError:
        raise click.ClickException(
            "--vs-presidio needs Presidio, a benchmark-only dependency: pip install -e '.[bench]' "
            "(presidio-analyzer and spacy)"
        ) from None
    for name in ("presidio-analyzer", "presidio_analyzer", "tldextract", "urllib3", "filelock"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    folder = tempfile.mkdtemp(prefix="blank-en-")
    spacy.blank("en").to_disk(folder)
    provider = NlpEngineProvider(
        nlp_configuration={"nlp_engine_name": "spacy", "models": [{"lang_code": "en", "model_name": folder}]}
    )
    engine = provider.create_engine()
    registry = RecognizerRegistry()
    registry.load_predefined_recognizers(nlp_engine=engine)
    return AnalyzerEngine(nlp_engine=engine, registry=registry, supported_languages=["en"])


def _pct(x: float) -> str:
    return "   -  " if math.isnan(x) else f"{100 * x:6.2f}"


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
@click.option("--vs-presidio", is_flag=True, help="Also run Presidio's analyzer on a sample of the same corpus.")
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
    click.echo(f"{'type':14s} {'planted':>8s} {'recall%':>8s} {'detected':>9s} {'precision%':>11s}")
    kinds = list(KINDS) + sorted(k for k in sc.planted if k not in KINDS)
    for k in kinds:
        if not sc.planted[k] and not sc.detected[k]:
            continue
        click.echo(
            f"{k:14s} {sc.planted[k]:8d} {_pct(sc.recall(k)):>8s} {sc.detected[k]:9d} {_pct(sc.precision(k)):>11s}"
        )
    groups = independent.grouped_recall(sc.planted, sc.recalled)
    click.echo("recall by group: " + ", ".join(f"{g} {_pct(r).strip()}% of {n:,}" for g, (r, n) in groups.items()))
    click.echo(f"ordinary words kept: {_pct(sc.kept).strip()}% of {sc.words:,} words in identifier-free queries")
    click.echo(f"hipaa_scrub queries/s on the whole corpus (50% carry identifiers), one core, best of {repeat}:")
    click.echo(_fmt_rate("  corpus", _rate(scrubber.scrub, texts, repeat)))
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
        click.echo(_fmt_rate("  AOL log", _rate(scrubber.scrub, aol_texts, repeat)))
    if vs_presidio:
        analyzer = _compare(items[:presidio_queries], ours, scrubber, repeat)
        if aol:
            _versus(scrubber, analyzer, aol_texts[:presidio_queries], repeat, "AOL log")
    click.echo(f"peak RSS      : {peak_rss_mib():.1f} MiB")


def _compare(items: list[tuple[str, list[tuple[int, int, str]]]], ours: Any, scrubber: Any, repeat: int) -> Any:
    from sidecar.tools.evaluate.scrubber import evaluate

    analyzer = _presidio()
    texts = [q for q, _ in items]
    for q in texts[:50]:  # warm up (first calls load and compile recognizers)
        analyzer.analyze(text=q, language="en")
    wanted = sorted({e for es in PRESIDIO_TYPES.values() for e in es})

    def theirs(q: str) -> list[tuple[int, int, str]]:
        return [(r.start, r.end, r.entity_type) for r in analyzer.analyze(text=q, language="en", entities=wanted)]

    mine = evaluate(ours, items)
    peer = evaluate(theirs, items)
    click.echo(
        f"\nvs Presidio on the first {len(items):,} corpus queries (recall: identifier covered by any detection)"
    )
    click.echo(PRESIDIO_NOTE)
    click.echo(f"{'type':14s} {'planted':>8s} {'ours%':>8s} {'presidio%':>10s}  presidio entities")
    better = True
    for k, ents in PRESIDIO_TYPES.items():
        if not mine.planted[k]:
            continue
        ours_r, peer_r = mine.recall(k), peer.recall(k)
        better = better and (ours_r > peer_r or ours_r == peer_r == 1.0)
        click.echo(f"{k:14s} {mine.planted[k]:8d} {_pct(ours_r):>8s} {_pct(peer_r):>10s}  {', '.join(ents)}")
    click.echo(f"ordinary words kept: ours {_pct(mine.kept).strip()}%, presidio {_pct(peer.kept).strip()}%")
    _versus(scrubber, analyzer, texts, repeat, "corpus")
    click.echo(f"recall above Presidio on every shared type where Presidio misses any: {'yes' if better else 'no'}")
    return analyzer
