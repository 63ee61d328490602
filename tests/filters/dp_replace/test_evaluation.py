"""`querylog eval dp` (paper 004 §4): the profile topics, the JSD, HBDP's noise, where replacements land.

On the session's KB and on generated logs; the AOL sample run is in docs/DP_EVAL.md (and skips here when the
shared data folder is absent).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from helpers import ROOT
from helpers.kb import kb_file

from knowledge import KnowledgeBase
from knowledge.concepts import ConceptTree
from sidecar.cli import main
from sidecar.tools.evaluate import dp as E

AOL = ROOT.parent / "shared" / "data" / "aol-sample.tsv"


def test_the_19_topics_partition_the_four_domains(kb_tree: ConceptTree) -> None:
    """Every concept under disease, science, sport or social event has exactly one of the 19 profile topics, and
    that topic lies inside its domain; nothing outside the four domains has one (rho is total on the evaluation
    set, so Setting A loses no profile mass to concepts no topic holds)."""
    from filters.dp_replace.domains import resolve, topic_labels

    assert len(E.TOPICS19) == 19 and len(set(E.TOPICS19)) == 19
    topics = topic_labels(kb_tree, resolve(kb_tree, E.TOPICS19, "t"))
    domains = topic_labels(kb_tree, resolve(kb_tree, E.DOMAINS4, "d"))
    inside = domains >= 0
    assert int(inside.sum()) > 1000
    assert bool(np.all(topics[inside] >= 0)) and bool(np.all(topics[~inside] < 0))
    topic_domain = topic_labels(kb_tree, resolve(kb_tree, E.DOMAINS4, "d"))[resolve(kb_tree, E.TOPICS19, "t")]
    assert bool(np.all(topic_domain[topics[inside]] == domains[inside]))


@pytest.mark.parametrize(
    ("p", "q", "want"),
    [
        ([1, 0], [0, 1], 1.0),
        ([2, 2], [1, 1], 0.0),
        ([1, 1], [1, 0], 1.5 - 0.75 * math.log2(3)),  # 1/2 KL(a||m) + 1/2 KL(b||m), m = (3/4, 1/4)
        ([0, 0], [0, 0], 0.0),
        ([3, 1], [0, 0], 1.0),  # a profile emptied by the protection: the maximum
    ],
)
def test_jsd_is_the_base_2_divergence(p: list[int], q: list[int], want: float) -> None:
    """eq. 9-10 in base 2 on count vectors (scipy gives the distance: squared), in [0, 1]."""
    assert E.jsd(np.array(p, dtype=float), np.array(q, dtype=float)) == pytest.approx(want, abs=1e-12)


def test_hbdp_profile_tends_to_the_topic_size_prior(kb: KnowledgeBase) -> None:
    """HBDP's clipped noise on every bin of the domains swamps a user's few counts: its profile is close to the
    share of the domains' concepts in each topic (plus `other`), whatever eps (paper: the loss 'hardly decreases
    when increasing eps'), and its loss in Setting B is well above Setting A's (bigger histograms)."""
    users = [[n] * 5 for n in _some_concepts(kb, 40)]
    data = E.EvalSet(users, 200, 200, 200)
    ev = E.Evaluation(kb, data, seed=3)
    a = [ev.hbdp(E.SETTINGS["A"], eps, 0) for eps in (0.1, 10.0)]
    b = [ev.hbdp(E.SETTINGS["B"], eps, 0) for eps in (0.1, 10.0)]
    assert abs(a[0] - a[1]) < 0.05 and abs(b[0] - b[1]) < 0.05
    assert min(b) > max(a) + 0.1


def _some_concepts(kb: KnowledgeBase, n: int) -> list[int]:
    from filters.dp_replace.domains import resolve, topic_labels
    from knowledge.concepts import concept_tree

    tree = concept_tree(kb)
    lab = topic_labels(tree, resolve(tree, E.TOPICS19, "t"))
    nodes = np.flatnonzero(lab >= 0)
    return [int(x) for x in nodes[:: max(1, len(nodes) // n)][:n]]


def test_where_replacements_land(kb: KnowledgeBase) -> None:
    """In Setting A every replacement stays in the four domains, hence in some profile topic (in_P = 1); in
    Setting B (39,581 candidates) at eps = 1 per concept only a few percent do, below the bound
    t e^(eps/2) / (t e^(eps/2) + N - t) that holds for any exponential mechanism; larger eps keeps more in the
    input's topic."""
    users = [_some_concepts(kb, 30)]
    ev = E.Evaluation(kb, E.EvalSet(users, 30, 30, 30), seed=1)
    a = E.stay_rates(ev, E.SETTINGS["A"], (1.0, 30.0), sample=30, draws=20)
    b = E.stay_rates(ev, E.SETTINGS["B"], (1.0, 30.0), sample=30, draws=20)
    for crit in ("SQC1", "SQC2", "NSQC"):
        assert a[crit]["in_P"] == [1.0, 1.0]
        assert b[crit]["in_P"][0] < 0.15 and b[crit]["in_P"][0] <= b["bound_in_P"][0] + 0.03
        assert b[crit]["same"][1] > b[crit]["same"][0]
    assert b["bound_in_P"][0] < 0.1 and b["bound_in_P"][1] > 0.99


def test_eval_dp_other_bin_and_drop_other(tmp_path: Path) -> None:
    """`querylog eval dp` on a generated log, both readings of rho: D(q)=P is exactly 0 for the exponential
    mechanism in both; with the `other` bin (default) HBDP's Setting C loss is about its Setting B loss (same
    histogram, as the paper says), with --drop-other it is not; the JSON carries the where-replacements-land
    table."""
    from sidecar.tools.generate.synthetic import generate_log

    log = tmp_path / "gen.tsv"
    with log.open("w", encoding="utf-8") as fh:
        generate_log(300, 3, fh)
    results = {}
    for flag in ("--other-bin", "--drop-other"):
        out = tmp_path / flag.strip("-")
        args = ["eval", "dp", str(log), "--runs", "1", "--budget", "query", "--settings", "B,C", "--epsilons", "1"]
        res = CliRunner().invoke(main, [*args, flag, "--stay-sample", "20", "--out", str(out), "--kb", str(kb_file())])
        assert res.exit_code == 0, res.output
        results[flag] = json.loads((out / "dp-eval.json").read_text(encoding="utf-8"))
    for r in results.values():
        for fig in r["tables"]["query"].values():
            assert all(fig["D=P"][m] == [0.0] for m in ("SQC1", "SQC2", "NSQC"))
    with_bin = results["--other-bin"]["tables"]["query"]
    assert abs(with_bin["C"]["D>P"]["HBDP"][0] - with_bin["B"]["D>P"]["HBDP"][0]) < 0.1
    dropped = results["--drop-other"]["tables"]["query"]
    assert dropped["B"]["D>P"]["HBDP"][0] - dropped["C"]["D>P"]["HBDP"][0] > 0.1
    assert set(results["--other-bin"]["stay"]) == {"B", "C"}


@pytest.mark.skipif(not AOL.is_file(), reason="the shared AOL sample is not here")
def test_eval_dp_on_the_aol_sample(tmp_path: Path) -> None:
    """On the AOL sample, eps per concept 10, Setting A: SQC2 < SQC1 < NSQC < HBDP (the paper's order), and
    D(q)=P is 0 for the exponential mechanism (only figures are read, never a line of the data)."""
    out = tmp_path / "aol"
    args = ["eval", "dp", str(AOL), "--runs", "1", "--budget", "query", "--settings", "A", "--epsilons", "10"]
    res = CliRunner().invoke(main, [*args, "--stay-sample", "0", "--out", str(out), "--kb", str(kb_file())])
    assert res.exit_code == 0, res.output
    a = json.loads((out / "dp-eval.json").read_text(encoding="utf-8"))["tables"]["query"]["A"]
    assert a["D>P"]["SQC2"][0] < a["D>P"]["NSQC"][0] < a["D>P"]["HBDP"][0]
    assert a["D>P"]["SQC1"][0] < a["D>P"]["NSQC"][0]
    assert a["D=P"]["SQC1"] == a["D=P"]["SQC2"] == a["D=P"]["NSQC"] == [0.0]
