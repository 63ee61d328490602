"""The labelled corpus generator and the quality measures (small runs; the bench does the big ones)."""

from __future__ import annotations

from pathlib import Path

import pytest

from filters.hipaa_scrub import HipaaScrubConfig, Scrubber
from filters.hipaa_scrub.detectors import KINDS
from sidecar.tools.corpus.hipaa import Corpus
from sidecar.tools.evaluate.scrubber import evaluate

STRUCTURED = ("ssn", "phone", "fax", "email", "ip", "mac", "vin", "card", "account", "mrn", "license", "zip", "date")
DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


@pytest.fixture(scope="module")
def corpus() -> Corpus:
    return Corpus()


@pytest.fixture(scope="module")
def scrubber() -> Scrubber:
    return Scrubber(HipaaScrubConfig())


def test_deterministic_by_seed(corpus: Corpus) -> None:
    """The corpus generator gives the same items for the same seed and other items for another seed."""
    assert list(corpus.items(200, seed=5)) == list(corpus.items(200, seed=5))
    assert list(corpus.items(200, seed=5)) != list(corpus.items(200, seed=6))


def test_spans_are_valid_and_every_type_is_planted(corpus: Corpus) -> None:
    """items(n) yields n ordinary queries beside the n planted ones; every gold span lies inside its query without
    surrounding whitespace, and 4 items per type plant every identifier type."""
    seen = set()
    items = list(corpus.items(len(KINDS) * 4, seed=2))
    assert sum(1 for _, g in items if not g) == len(KINDS) * 4  # as many ordinary queries
    for query, gold in items:
        for a, b, kind in gold:
            assert 0 <= a < b <= len(query) and query[a:b].strip() == query[a:b]
            seen.add(kind)
    assert seen == set(KINDS)


def test_quality_targets_on_a_small_corpus(corpus: Corpus, scrubber: Scrubber) -> None:
    """Recall >= 99% structured, >= 95% names and addresses; >= 98% ordinary words kept."""
    sc = evaluate(lambda q: [(s.start, s.end, s.kind) for s in scrubber.detect(q)], corpus.items(4600, seed=9))
    for kind in STRUCTURED:
        assert sc.recall(kind) >= 0.99, kind
    assert sc.recall("name") >= 0.95 and sc.recall("address") >= 0.95
    assert sc.kept >= 0.98


def test_evaluate_counts_misses_and_false_alarms() -> None:
    """evaluate scores a missed phone as recall 0, a name span on an ordinary word as precision 0, and that word as
    not kept (1 of 2 words kept)."""
    items = [("call 555-123-4567", [(5, 17, "phone")]), ("rose garden", [])]
    sc = evaluate(lambda q: [(0, 4, "name")] if q.startswith("rose") else [], items)
    assert sc.recall("phone") == 0.0 and sc.precision("name") == 0.0
    assert sc.words == 2 and sc.words_kept == 1


@pytest.mark.skipif(not (DATA / "aol-sample.tsv").is_file(), reason="shared data absent")
def test_real_log_sample(scrubber: Scrubber) -> None:
    """On real AOL queries: no crash, a small share changed, never a line lost."""
    lines = (DATA / "aol-sample.tsv").read_text(encoding="utf-8").splitlines()[1:5001]
    queries = [ln.split("\t")[1] for ln in lines]
    out = [scrubber.scrub(q)[0] for q in queries]
    changed = sum(a != b for a, b in zip(queries, out))
    assert len(out) == len(queries) and 0 < changed < 0.2 * len(queries)


def test_bench_without_presidio_says_how_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """`bench scrub` prints its table; `--vs-presidio` without Presidio fails with a clear message."""
    import sys

    from click.testing import CliRunner

    from sidecar.cli import main

    monkeypatch.setitem(sys.modules, "presidio_analyzer", None)  # importing it now raises ImportError
    r = CliRunner().invoke(main, ["bench", "scrub", "--queries", "46", "--repeat", "1", "--vs-presidio"])
    assert "ordinary words kept" in r.output and "queries/s" in r.output
    assert r.exit_code == 1 and "pip install -e '.[bench]'" in r.output
