"""`querylog kb evaluate` and its scoring: the independent set's rows (overall, per kind, Adult apart)."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner
from helpers.kb import kb_file

from knowledge.evaluate import FormatError, Labelled, read_independent, score_independent
from sidecar.cli import main

# Made-up queries in the independent set's format (never lines of that set).
SAMPLE = (
    "query\tcategory\tkind\n"
    "flu symptoms\tHealth\tinformational\n"
    "ebay\tShopping\tnavigational\n"
    "soccer\tHome\tnavigational\n"
    "xqzvwk\tComputers\tnavigational\n"
    "adult words\tAdult\tnavigational\n"
)


def _classify(query: str) -> object | None:
    """A stand-in classifier: a fixed answer per query."""
    from knowledge.classifier import Classification

    cats = {"flu symptoms": "Health", "ebay": "Shopping", "soccer": "Sports", "adult words": "Society"}
    cat = cats.get(query)
    return None if cat is None else Classification(cat, (cat,), query, 1.0)


def test_read_independent(tmp_path: Path) -> None:
    """Rows come back as (query, category, kind), in order, after the header."""
    f = tmp_path / "set.tsv"
    f.write_text(SAMPLE, encoding="utf-8")
    rows = read_independent(f)
    assert len(rows) == 5 and rows[0] == Labelled("flu symptoms", "Health", "informational")


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("query\tcategory\n", "line 1"),
        ("query\tcategory\tkind\nflu\tHealth\n", "line 2"),
        ("query\tcategory\tkind\nflu\t\tnavigational\n", "line 2"),
        ("", "line 1"),
    ],
    ids=["header", "two-fields", "empty-label", "empty-file"],
)
def test_read_independent_rejects_a_bad_shape(tmp_path: Path, text: str, where: str) -> None:
    """A wrong header, a short line or an empty field is a FormatError naming the line, not its text."""
    f = tmp_path / "set.tsv"
    f.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError, match=where) as info:
        read_independent(f)
    assert "flu" not in str(info.value)


def test_score_independent_counts_adult_apart_and_per_kind(tmp_path: Path) -> None:
    """Accuracy over the categorised rows, coverage over all; Adult rows are coverage only, never in the overall."""
    f = tmp_path / "set.tsv"
    f.write_text(SAMPLE, encoding="utf-8")
    r = score_independent(_classify, read_independent(f))
    assert (r.overall.total, r.overall.covered, r.overall.correct) == (4, 3, 2)
    assert (r.outside.total, r.outside.covered) == (1, 1)
    nav = r.per_kind["navigational"]
    assert (nav.total, nav.covered, nav.correct) == (3, 2, 1)
    assert r.per_kind["informational"].accuracy == 1.0


def test_evaluate_command_reports_the_independent_set(tmp_path: Path) -> None:
    """`kb evaluate --independent FILE` prints an "independent" row, one row per kind and the Adult row."""
    f = tmp_path / "set.tsv"
    f.write_text(SAMPLE, encoding="utf-8")
    empty = tmp_path / "data"
    empty.mkdir()
    res = CliRunner().invoke(
        main, ["kb", "evaluate", "--kb", str(kb_file()), "--data", str(empty), "--independent", str(f)]
    )
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    indep = [ln for ln in lines if ln.startswith("independent") and "classify" in ln]
    assert len(indep) == 1 and "n=     4" in indep[0] and "coverage" in indep[0] and "accuracy" in indep[0]
    assert any("kind informational" in ln and "n=     1" in ln for ln in lines)
    assert any("kind navigational" in ln and "n=     3" in ln for ln in lines)
    assert any("label Adult" in ln and "n=     1" in ln for ln in lines)
    assert "xqzvwk" not in res.output  # counts only, never a query


def test_evaluate_command_refuses_a_malformed_set(tmp_path: Path) -> None:
    """A malformed independent set is exit 2 with the line number."""
    f = tmp_path / "set.tsv"
    f.write_text("query\tcategory\n", encoding="utf-8")
    res = CliRunner().invoke(
        main,
        ["kb", "evaluate", "--kb", str(kb_file()), "--data", str(tmp_path / "none"), "--independent", str(f)],
    )
    assert res.exit_code == 2 and "line 1" in res.output
