"""``querylog microaggregate --method semantic-mdav`` (issue 14, paper 000): the taxonomy distance, MDAV, sampling."""

from __future__ import annotations

import random
import tempfile
from collections import Counter
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
import structlog
from click.testing import CliRunner
from helpers.microaggregate import HEADER, assert_k_anonymous, released, toy_log
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from adapters.microaggregate.classified import Queries, read_queries
from adapters.microaggregate.log import read_log
from adapters.microaggregate.semantic import CategorySpace, microaggregate_semantic_mdav, sample_cluster
from sidecar.cli import main

AOL = Path(__file__).resolve().parents[4] / "shared" / "data" / "aol-sample.tsv"

PATHS: dict[str, tuple[str, ...]] = {
    "soccer": ("Sports", "soccer"),
    "barcelona fc": ("Sports", "soccer", "clubs", "spain"),
    "real madrid": ("Sports", "soccer", "clubs", "spain"),
    "tennis": ("Sports", "tennis"),
    "stocks": ("Business", "investing"),
    "mortgage rates": ("Business", "real estate", "mortgage"),
    "flu": ("Health",),
    "flu shot": ("Health", "vaccines"),
}


def toy_classify(strings: list[str]) -> list[tuple[str, ...] | None]:
    return [PATHS.get(s.split(" #")[0]) for s in strings]  # "soccer #3" is another string of the same category


def emd(q: Queries, a: int, b: int) -> float:
    """The Earth Mover's distance of users ``a`` and ``b`` by linear programming, the ground distance being the
    weighted path length in the taxonomy (edge into level l: 2^(1-l)); uncategorised queries at the root."""

    def leaf(s: int) -> int:
        nodes = [n for n in q.nodes[s].tolist() if n >= 0]
        return nodes[-1] if nodes else -1

    def ancestors(node: int) -> list[int]:
        out = []
        while node >= 0:
            out.append(node)
            node = int(q.node_parent[node])
        return out

    def ground(x: int, y: int) -> float:
        ax, ay = set(ancestors(x)), set(ancestors(y))
        return float(sum(0.5 ** q.node_level[n] for n in ax ^ ay))

    def distribution(u: int) -> Counter[int]:
        start = int(q.starts[u])
        return Counter(leaf(int(s)) for s in q.sid[start : start + int(q.counts[u])].tolist())

    pa, pb = distribution(a), distribution(b)
    xs, ys = list(pa), list(pb)
    cost = np.array([[ground(x, y) for y in ys] for x in xs]).reshape(-1)
    rows = np.zeros((len(xs) + len(ys), len(xs) * len(ys)))
    for i in range(len(xs)):
        rows[i, i * len(ys) : (i + 1) * len(ys)] = 1
    for j in range(len(ys)):
        rows[len(xs) + j, j :: len(ys)] = 1
    supply = [pa[x] / q.counts[a] for x in xs] + [pb[y] / q.counts[b] for y in ys]
    return float(linprog(cost, A_eq=rows, b_eq=supply, bounds=(0, None), method="highs").fun)


QUERIES = [*PATHS, "zzz", "qqq", ""]


class TestDistance:
    def test_hand_computed_distances(self, tmp_path: Path) -> None:
        """soccer vs tennis: differ below Sports, 1/2 + 1/2 = 1; soccer vs stocks: 1 + 1/2 + 1 + 1/2 = 3;
        soccer vs an unknown query (the root): 1 + 1/2; soccer vs half soccer, half stocks: 1.5; self: 0."""
        rows = [("1", "soccer"), ("2", "tennis"), ("3", "stocks"), ("4", "zzz"), ("5", "soccer"), ("5", "stocks")]
        space = CategorySpace(read_queries(toy_log(rows, tmp_path), toy_classify))
        got = space.to_record(0, np.arange(5, dtype=np.intp))
        assert got == pytest.approx([0.0, 1.0, 3.0, 1.5, 1.5])

    @settings(max_examples=60, deadline=None)
    @given(st.lists(st.lists(st.sampled_from(QUERIES), min_size=1, max_size=7), min_size=2, max_size=4))
    def test_the_closed_form_is_the_earth_movers_distance(self, users: list[list[str]]) -> None:
        """Against an LP solution of the transport problem, for every pair of random users."""
        rows = [(str(u + 1), query) for u, queries in enumerate(users) for query in queries]
        with tempfile.TemporaryDirectory() as folder:
            q = read_queries(toy_log(rows, Path(folder)), toy_classify)
        space = CategorySpace(q)
        everyone = np.arange(len(users), dtype=np.intp)
        for a in range(len(users)):
            assert space.to_record(a, everyone) == pytest.approx([emd(q, a, b) for b in range(len(users))], abs=1e-9)

    def test_distance_to_the_average_is_to_the_mean_distribution(self, tmp_path: Path) -> None:
        rows = [("1", "soccer"), ("2", "tennis"), ("2", "flu"), ("3", "mortgage rates"), ("3", "zzz")]
        q = read_queries(toy_log(rows, tmp_path), toy_classify)
        space = CategorySpace(q)
        dense: npt.NDArray[np.float64] = space.x.toarray()
        members = np.array([0, 2], dtype=np.intp)
        want = np.abs(dense[members] - dense[members].mean(axis=0)).sum(axis=1)
        assert space.to_average(members) == pytest.approx(want)


class TestSampling:
    def test_strata_keep_the_clusters_category_shares(self, tmp_path: Path) -> None:
        """30 pooled queries, 20 about soccer and 10 about stocks, 3 users: 10 released, by largest remainders
        6.67 -> 7 soccer and 3.33 -> 3 stocks, whatever the draw."""
        rows = [(str(u % 3 + 1), f"soccer #{u}") for u in range(20)] + [
            (str(u % 3 + 1), f"stocks #{u}") for u in range(10)
        ]
        q = read_queries(toy_log(rows, tmp_path), toy_classify)
        for seed in range(20):
            chosen = sample_cluster(q, np.arange(3, dtype=np.intp), random.Random(seed))
            by_topic = Counter(q.strings[s].split(" #")[0] for s in chosen.elements())
            assert by_topic == Counter({"soccer": 7, "stocks": 3})
            assert max(chosen.values()) == 1  # without replacement: each pooled query at most once

    def test_sampling_varies_with_the_random_source(self, tmp_path: Path) -> None:
        rows = [(str(u % 2 + 1), f"soccer #{u}") for u in range(12)]
        q = read_queries(toy_log(rows, tmp_path), toy_classify)
        draws = {tuple(sorted(sample_cluster(q, np.arange(2, dtype=np.intp), random.Random(s)))) for s in range(30)}
        assert len(draws) > 10


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 4),
    st.lists(st.lists(st.sampled_from(QUERIES), min_size=1, max_size=6), min_size=1, max_size=14),
    st.integers(0, 2**32 - 1),
)
def test_every_cluster_releases_identical_query_multisets(k: int, users: list[list[str]], seed: int) -> None:
    """Small random logs (one-query users, identical users, unknown and empty queries): the output invariant,
    and progress heard as users are placed, up to all of them."""
    if len(users) < k:
        users = users + [users[0]] * (k - len(users))
    rows = [(str(u + 1), query) for u, queries in enumerate(users) for query in queries]
    with tempfile.TemporaryDirectory() as folder:
        log = toy_log(rows, Path(folder))
    heard: list[int] = []
    result = microaggregate_semantic_mdav(log, k, random.Random(seed), heard.append, toy_classify)
    assert_k_anonymous(log, result, k)
    assert heard == sorted(heard) and heard[-1] == len(log.users)


def test_bad_input(tmp_path: Path) -> None:
    """Users of uncategorisable queries only are at distance 0 from each other and end up together; identical
    users too; one-query users are fine; fewer users than k and k < 2 are refused."""
    rows = [("1", "zzz"), ("2", "qqq"), ("2", "zzz"), ("3", "flu"), ("4", "flu"), ("5", "soccer"), ("6", "soccer")]
    rows += [("6", "tennis"), ("7", "stocks"), ("8", "mortgage rates"), ("8", "stocks")]
    log = toy_log(rows, tmp_path)
    result = microaggregate_semantic_mdav(log, 2, random.Random(0), None, toy_classify)
    assert_k_anonymous(log, result, 2)
    cluster_of = {u: i for i, c in enumerate(result.clusters) for u in c.tolist()}
    assert cluster_of[0] == cluster_of[1] and cluster_of[2] == cluster_of[3]
    assert_k_anonymous(log, microaggregate_semantic_mdav(log, 3, random.Random(1), None, toy_classify), 3)
    with pytest.raises(ValueError, match="at least k"):
        microaggregate_semantic_mdav(log, 9, random.Random(0), None, toy_classify)
    with pytest.raises(ValueError, match="k >= 2"):
        microaggregate_semantic_mdav(log, 1, random.Random(0), None, toy_classify)


def test_same_seed_same_output_and_no_query_in_the_logs(tmp_path: Path) -> None:
    rows = [(str(u), q) for u in range(1, 13) for q in list(PATHS)[u % 5 : u % 5 + 3]]
    log = toy_log(rows, tmp_path)
    with structlog.testing.capture_logs() as logs:
        one = released(log, microaggregate_semantic_mdav(log, 3, random.Random(9), None, toy_classify))
    assert one == released(log, microaggregate_semantic_mdav(log, 3, random.Random(9), None, toy_classify))
    assert logs and all(q not in str(entry) for entry in logs for q in PATHS)


def test_cli_with_the_knowledge_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from helpers.kb import kb_file

    from sidecar.tools.generate.synthetic import generate_log

    monkeypatch.setenv("QUERYLOG_KB", str(kb_file()))
    path = tmp_path / "log.tsv"
    with path.open("w", encoding="utf-8") as out:
        generate_log(30, 5, out)
    target = tmp_path / "out.tsv"
    args = ["microaggregate", str(path), "-k", "3", "--method", "semantic-mdav", "-o", str(target)]
    run = CliRunner().invoke(main, args)
    assert run.exit_code == 0, run.output
    assert "(semantic-mdav, k=3): 30 users" in run.stderr
    lines = target.read_text(encoding="utf-8").splitlines()
    assert lines[0] == HEADER and all(len(line.split("\t")) == 5 for line in lines)


@pytest.mark.skipif(not AOL.exists(), reason="../shared/data is absent")
def test_the_aol_sample_keeps_the_invariant() -> None:
    from helpers.kb import kb_file

    from adapters.microaggregate.classified import kb_classify

    log = read_log(str(AOL))
    assert_k_anonymous(log, microaggregate_semantic_mdav(log, 3, random.Random(1), None, kb_classify(kb_file())), 3)
