"""``querylog eval srp``: paper 002's SRP under WordNet's hierarchy, a taxonomy ``mdav``'s release never saw."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from knowledge.wordnet import locate, open_wordnet
from sidecar.cli import main
from sidecar.tools.evaluate.srp_wordnet import srp_by_level, wordnet_paths

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
FOOD = ["pizza recipe", "pasta sauce", "cheese"]
MUSIC = ["guitar lessons", "piano", "violin strings"]


def _log(path: Path, rows: list[tuple[str, str]]) -> str:
    lines = [HEADER] + [f"{u}\t{q}\t2006-03-01 10:00:{i % 60:02d}\t\t" for i, (u, q) in enumerate(rows)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_a_query_s_path_is_its_first_noun_s_lexname_then_its_hypernyms() -> None:
    with open_wordnet(locate()) as wordnet:
        paths = wordnet_paths(["pizza recipe", "the of", "xqzt", "pizza recipe"], wordnet)
    pizza = paths["pizza recipe"]
    assert pizza is not None and pizza[0] == "noun.food" and 2 <= len(pizza) <= 5
    assert paths["xqzt"] is None and paths["the of"] is None  # no noun of 3 letters or more


def test_an_unchanged_log_keeps_everything_and_an_unrelated_one_loses_the_top_level() -> None:
    original = [("1", q) for q in FOOD] + [("2", q) for q in MUSIC]
    swapped = [("1", q) for q in MUSIC] + [("2", q) for q in FOOD]
    with open_wordnet(locate()) as wordnet:
        paths = wordnet_paths([q for _, q in original], wordnet)
    same = srp_by_level(original, original, paths)
    assert all(level["mean"] == 1.0 and level["users"] == 2 for level in same["srp"].values() if level["users"])
    assert same["coverage"] == 1.0
    assert srp_by_level(original, swapped, paths)["srp"]["L1"]["mean"] == 0.0


def test_the_cli_prints_counts_only_and_says_where_srp_is_under_the_line(tmp_path: Path) -> None:
    rows = [("1", q) for q in FOOD] + [("2", q) for q in MUSIC]
    original = _log(tmp_path / "original.tsv", rows)
    same = _log(tmp_path / "same.tsv", rows)
    swapped = _log(tmp_path / "swapped.tsv", [("1", q) for q in MUSIC] + [("2", q) for q in FOOD])
    run = CliRunner().invoke(main, ["eval", "srp", original, same, swapped, "-k", "2"])
    assert run.exit_code == 0, run.output
    assert "same.tsv: 100.0 / 100.0" in run.output and "above 1/k at every level" in run.output
    assert "swapped.tsv: 0.0 / " in run.output and "under 1/k at L1" in run.output
    assert not any(word in run.output for word in ("pizza", "guitar", "piano", "cheese"))
    as_json = json.loads(CliRunner().invoke(main, ["eval", "srp", original, same, "--json"]).output)
    assert as_json["protected"][same]["srp"]["L1"]["mean"] == 1.0


def test_the_figures_do_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    """Some synsets have two hypernym chains, which nltk lists in set order: the least one is taken."""
    words = ["wine", "milk", "coffee", "water", "apple", "oil", "salt", "silver", "man", "woman", "child", "person"]
    rows = [(str(i % 3), w) for i, w in enumerate(words)]
    original = _log(tmp_path / "original.tsv", rows)
    protected = _log(tmp_path / "protected.tsv", [(str(i % 3), w) for i, w in enumerate(reversed(words))])
    code = "from sidecar.cli import main; main()"
    outputs = set()
    for seed in ("1", "2", "3", "4", "5"):
        done = subprocess.run(
            [sys.executable, "-c", code, "eval", "srp", original, protected, "--json"],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": seed},
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1
