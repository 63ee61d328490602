"""``querylog kb build|info|evaluate`` and ``querylog classify``."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from knowledge.classifier import Classifier
    from knowledge.evaluate import Score

_PATH = click.option(
    "--kb",
    "kb_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="KB file (default: $QUERYLOG_KB, else ~/.cache/querylog/kb.qlkb).",
)


@click.group("kb")
def kb() -> None:
    """The classifier's knowledge base (WordNet + wordfreq + the category taxonomy)."""


@kb.command("build")
@_PATH
@click.option(
    "--categories",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Categories file (default: the shipped knowledge/data/categories.yaml).",
)
@click.option("--if-missing", is_flag=True, help="Do nothing when a current, intact KB is already there.")
def build_cmd(kb_path: Path | None, categories: Path | None, if_missing: bool) -> None:
    """Compile the KB into one cached file (about half a minute)."""
    from knowledge import DEFAULT_CATEGORIES, default_kb_path, kb_status
    from knowledge.build import KBBuildError, build
    from knowledge.wordnet import WordNetMissing
    from sidecar.config.loader import ConfigError

    path = kb_path or default_kb_path()
    if if_missing:
        current, reason = kb_status(path, categories or DEFAULT_CATEGORIES)
        if current is not None:
            click.echo(f"{path}: up to date (file sha256 {_file_sha256(path)[:16]})", err=True)
            return
        click.echo(f"{path}: {reason}; building", err=True)
    try:
        r = build(path, categories)
    except (ConfigError, KBBuildError, WordNetMissing, OSError) as exc:
        click.echo(f"kb build: {exc}", err=True)
        sys.exit(2)
    counts = ", ".join(f"{k} {v:,}" for k, v in r.counts.items())
    size = f"{r.size / 2**20:.1f} MiB"
    click.echo(f"{path}: built in {r.seconds:.1f} s, {size}, file sha256 {r.sha256[:16]} ({counts})")


def _file_sha256(path: Path) -> str:
    """The sha256 of the whole KB file (what `sha256sum` prints; `kb build` reports it too)."""
    import hashlib

    return hashlib.sha256(path.read_bytes()).hexdigest()


@kb.command("info")
@_PATH
def info_cmd(kb_path: Path | None) -> None:
    """Print the KB's version, sources, sizes, hashes and load time (JSON).

    file_sha256 is the whole file's (as `kb build` and `sha256sum` print it), payload_sha256 the checksum in its
    header."""
    from knowledge import default_kb_path, kb_status

    path = kb_path or default_kb_path()
    t0 = time.perf_counter()
    current, reason = kb_status(path)
    seconds = time.perf_counter() - t0
    if current is None:
        click.echo(f"{path}: {reason}; run `querylog kb build`", err=True)
        sys.exit(1)
    out = {
        "path": str(path),
        "bytes": path.stat().st_size,
        "file_sha256": _file_sha256(path),
        "payload_sha256": current.sha256,
        "load_seconds": round(seconds, 3),
        **current.meta,
        "categories": list(current.categories),
    }
    click.echo(json.dumps(out, indent=2))


@kb.command("evaluate")
@_PATH
@click.option(
    "--data",
    "data_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Shared data folder (default: <repo>/../shared/data).",
)
@click.option(
    "--independent",
    "independent",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Independent labelled set (query, category, kind; default: tests/data/independent_queries.tsv).",
)
@click.option("--per-category", is_flag=True, help="Also print per-category figures.")
def evaluate_cmd(kb_path: Path | None, data_dir: Path | None, independent: Path | None, per_category: bool) -> None:
    """Accuracy and coverage on the labelled sets, coverage on the AOL sample (counts only).

    The independent set is reported apart: accuracy on its categorised queries and coverage, overall and per
    kind (its Adult label, outside the 16 categories, as coverage only).
    """
    from knowledge import KBUnavailable
    from knowledge import evaluate as ev
    from knowledge.classifier import Classifier

    try:
        clf = Classifier.load(kb_path)
    except KBUnavailable as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    data = data_dir or ev.SHARED_DATA
    sets: list[tuple[str, list[tuple[str, str]]]] = [("labelled (project)", ev.read_labelled())]
    mag = data / "labelled" / "magnetic_annotated.txt"
    if mag.is_file():
        sets.append(("magnetic (mapped)", ev.read_magnetic(mag)))
    for name, rows in sets:
        for mode, fn in (("classify", clf.classify), ("paper Alg. 1", clf.classify_paper)):
            s = ev.score(fn, rows)
            click.echo(f"{name:20} {mode:13} n={s.total:>6,}  coverage {s.coverage:6.1%}  accuracy {s.accuracy:6.1%}")
            if name.startswith("magnetic") and mode == "classify":
                for half, role in ((0, "tuning"), (1, "held out")):  # deterministic halves by hash
                    hs = ev.score(fn, [(q, c) for q, c in rows if ev.half_of(q) == half])
                    click.echo(
                        f"  {f'half {half} {role}':18} {mode:13} n={hs.total:>6,}  coverage {hs.coverage:6.1%}"
                        f"  accuracy {hs.accuracy:6.1%}"
                    )
            if per_category and mode == "classify":
                _per_category(s)
    _independent(clf, independent or ev.INDEPENDENT, per_category)
    aol = data / "aol-sample.tsv"
    if aol.is_file():
        queries = ev.read_aol_queries(aol)
        real = [q for q in queries if q.strip() and q.strip() != "-"]
        for label, qs in (("all lines", real), ("distinct", sorted(set(real)))):
            got, n, _ = ev.coverage(clf.classify, qs)
            click.echo(f"aol-sample {label:9} classify      n={n:>6,}  coverage {got / n if n else 0:6.1%}")
    else:
        click.echo(f"{aol}: absent, AOL coverage not measured", err=True)


def _per_category(s: Score) -> None:
    for cat, (n, cov, ok) in sorted(s.per_category.items()):
        acc = ok / cov if cov else 0.0
        click.echo(f"    {cat:16} n={n:>5}  coverage {cov / n:6.1%}  accuracy {acc:6.1%}")


def _independent(clf: Classifier, path: Path, per_category: bool) -> None:
    """The independent set's rows: overall, per kind, and its Adult label apart (coverage only)."""
    from knowledge import evaluate as ev

    if not path.is_file():
        click.echo(f"{path}: absent, independent set not measured", err=True)
        return
    try:
        rows = ev.read_independent(path)
    except ev.FormatError as exc:
        click.echo(f"kb evaluate: {exc}", err=True)
        sys.exit(2)
    for mode, fn in (("classify", clf.classify), ("paper Alg. 1", clf.classify_paper)):
        r = ev.score_independent(fn, rows)
        s = r.overall
        click.echo(
            f"{'independent':20} {mode:13} n={s.total:>6,}  coverage {s.coverage:6.1%}  accuracy {s.accuracy:6.1%}"
        )
        if mode != "classify":
            continue
        for kind, ks in sorted(r.per_kind.items()):
            click.echo(
                f"  {f'kind {kind}':18} {mode:13} n={ks.total:>6,}  coverage {ks.coverage:6.1%}"
                f"  accuracy {ks.accuracy:6.1%}"
            )
        if r.outside.total:
            click.echo(
                f"  {f'label {ev.OUTSIDE}':18} {mode:13} n={r.outside.total:>6,}  coverage {r.outside.coverage:6.1%}"
                "  (outside the 16 categories: not scored)"
            )
        if per_category:
            _per_category(s)


@click.command("classify")
@_PATH
@click.option("--paper", is_flag=True, help="Algorithm 1 as published (main unit alone decides).")
def classify_cmd(kb_path: Path | None, paper: bool) -> None:
    """Read queries (one per line) on stdin; write one JSON object per line on stdout."""
    from knowledge import KBUnavailable
    from knowledge.classifier import Classifier

    try:
        clf = Classifier.load(kb_path)
    except KBUnavailable as exc:
        click.echo(str(exc), err=True)
        sys.exit(2)
    fn = clf.classify_paper if paper else clf.classify
    out = sys.stdout
    for line in sys.stdin:
        r = fn(line.rstrip("\r\n"))
        obj: dict[str, object]
        if r is None:
            obj = {"category": None, "path": [], "main_unit": None, "confidence": 0.0}
        else:
            obj = {"category": r.category, "path": list(r.path), "main_unit": r.main_unit, "confidence": r.confidence}
        out.write(json.dumps(obj, ensure_ascii=False) + "\n")
