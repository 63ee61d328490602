"""``querylog microaggregate --method odp`` (issue 14, paper 002): matrices, similarity, partition, Algorithm 5."""

from __future__ import annotations

import random
import tempfile
from collections import Counter
from pathlib import Path
from unittest.mock import patch

import numpy as np
import numpy.typing as npt
import pytest
import scipy.sparse as sp
import structlog
from click.testing import CliRunner
from helpers.microaggregate import HEADER, assert_k_anonymous, released, toy_log
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.microaggregate import odp
from adapters.microaggregate.classified import read_queries
from adapters.microaggregate.log import read_log
from adapters.microaggregate.odp import (
    Incidence,
    algorithm5,
    classification_matrix,
    greedy_partition,
    microaggregate_odp,
    threshold_matrix,
)
from sidecar.cli import main

AOL = Path(__file__).resolve().parents[4] / "shared" / "data" / "aol-sample.tsv"

#: A toy taxonomy: query string -> category path (absent: uncategorisable).
PATHS: dict[str, tuple[str, ...]] = {
    "soccer": ("Sports", "soccer"),
    "barcelona fc": ("Sports", "soccer", "clubs", "spain"),
    "tennis": ("Sports", "tennis"),
    "stocks": ("Business", "investing"),
    "mortgage rates": ("Business", "real estate", "mortgage"),
    "flu": ("Health",),
    "flu shot": ("Health", "vaccines"),
}


def toy_classify(strings: list[str]) -> list[tuple[str, ...] | None]:
    return [PATHS.get(s) for s in strings]


def reference_similarity(counts: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """Algorithm 2 as written: for every category, add min(M(u_i, c), M(u_p, c)) to every cell."""
    n = counts.shape[0]
    out = np.zeros((n, n), dtype=np.int64)
    for c in range(counts.shape[1]):
        out += np.minimum(counts[:, c][:, None], counts[:, c][None, :])
    return out


def reference_partition(sim: npt.NDArray[np.int64], k: int) -> list[list[int]]:
    """Algorithms 3-4 literally (rows merged into u_i, u_p's row and column deleted), ties to the lowest index,
    then the leftover rule of the odp module."""
    alive = list(range(len(sim)))
    clusters: list[list[int]] = []
    while len(alive) >= k:
        m = sim[np.ix_(alive, alive)].astype(np.float64)
        np.fill_diagonal(m, -np.inf)  # a user is not their own most similar user
        a, b = (int(v) for v in np.unravel_index(int(np.argmax(m)), m.shape))
        z = [alive[a], alive[b]]
        columns = [c for c in range(len(alive)) if c != b]
        while len(z) < k:
            m[a, :] += m[b, :]  # M'(u_i, r) += M'(u_p, r)
            columns = [c for c in columns if c != b]  # delete u_p
            candidates = [c for c in columns if c != a]
            b = candidates[int(np.argmax(m[a, candidates]))]
            z.append(alive[b])
        clusters.append(z)
        alive = [u for u in alive if u not in z]
    for u in alive:  # fewer than k left: each joins the most similar cluster with room
        score = [sim[u, c].sum() if len(c) < 2 * k - 1 else -np.inf for c in clusters]
        clusters[int(np.argmax(score))].append(u)
    return clusters


class TestMatrices:
    def test_classification_matrices_and_similarity_on_a_hand_computed_example(self, tmp_path: Path) -> None:
        """u1: soccer x2, tennis, an unknown query; u2: barcelona fc, stocks; u3: only unknown queries.

        L1 Sports: u1 3, u2 1; L2 soccer: u1 2, u2 1; L2 tennis: u1 1; L3/L4 only u2. sim(u1, u2) = min(3, 1)
        (Sports) + min(2, 1) (soccer) = 2; sim(u1, u1) = 3 + 2 + 1 = 6; u3 is at 0 from everyone."""
        rows = [("1", "soccer"), ("1", "soccer"), ("1", "tennis"), ("1", "zzz"), ("2", "barcelona fc")]
        rows += [("2", "stocks"), ("3", "zzz"), ("3", "qqq")]
        q = read_queries(toy_log(rows, tmp_path), toy_classify)
        assert (q.uncategorised, q.uncategorised_strings) == (3, 2)
        counts = classification_matrix(q).toarray()
        by_level = [int(counts[:, q.node_level == level].sum()) for level in range(5)]
        assert by_level == [5, 5, 1, 1, 0]  # categorised queries with a node at L1..L5
        x = threshold_matrix(classification_matrix(q))
        assert (x @ x.T).toarray().tolist() == [[6, 2, 0], [2, 6, 0], [0, 0, 0]]

    @settings(max_examples=80, deadline=None)
    @given(st.integers(1, 9), st.integers(1, 7), st.integers(0, 2**32 - 1))
    def test_sparse_product_equals_algorithm_2(self, users: int, categories: int, seed: int) -> None:
        """X X^T with one 0/1 column per (category, t) is exactly the sum of min counts."""
        counts = np.random.default_rng(seed).integers(0, 5, size=(users, categories)).astype(np.int64)
        x = threshold_matrix(sp.csr_array(counts))
        assert np.array_equal((x @ x.T).toarray().astype(np.int64), reference_similarity(counts))

    @settings(max_examples=60, deadline=None)
    @given(st.integers(1, 9), st.integers(1, 7), st.integers(0, 2**32 - 1), st.booleans())
    def test_incidence_rows_by_bincount_or_product(self, users: int, categories: int, seed: int, big: bool) -> None:
        """Both ways of computing rows of M_UxU (few rows: bincount; large blocks: sparse product) agree."""
        rng = np.random.default_rng(seed)
        counts = rng.integers(0, 4, size=(users, categories)).astype(np.int64)
        rows = rng.integers(0, users, size=rng.integers(1, 5)).astype(np.intp)
        with patch.object(odp, "BLOCK_CELLS", 0 if big else odp.BLOCK_CELLS):
            got = Incidence(threshold_matrix(sp.csr_array(counts))).rows(rows)
        assert np.array_equal(got, reference_similarity(counts)[rows])


class TestPartition:
    @settings(max_examples=120, deadline=None)
    @given(st.integers(2, 4), st.integers(0, 10), st.integers(1, 6), st.integers(0, 2**32 - 1))
    def test_same_clusters_as_the_literal_algorithms(self, k: int, extra: int, categories: int, seed: int) -> None:
        """The lazy best-partner implementation makes the choices of Algorithms 3-4 on the full matrix
        (small counts: many ties, all-zero users), with k..2k-1 users per cluster."""
        counts = np.random.default_rng(seed).integers(0, 3, size=(k + extra, categories)).astype(np.int64)
        got = greedy_partition(threshold_matrix(sp.csr_array(counts)), k)
        assert [c.tolist() for c in got] == reference_partition(reference_similarity(counts), k)
        assert all(k <= len(c) <= 2 * k - 1 for c in got)

    def test_the_most_similar_users_are_grouped(self) -> None:
        """Two interest groups of three users each at k=3: the clusters are the groups."""
        counts = np.array([[5, 0], [4, 1], [6, 0], [0, 5], [1, 4], [0, 6]], dtype=np.int64)
        got = greedy_partition(threshold_matrix(sp.csr_array(counts)), 3)
        assert sorted(sorted(c.tolist()) for c in got) == [[0, 1, 2], [3, 4, 5]]

    def test_progress_counts_placed_users_up_to_all(self) -> None:
        heard: list[int] = []
        counts = np.ones((11, 2), dtype=np.int64)
        greedy_partition(threshold_matrix(sp.csr_array(counts)), 3, heard.append)
        assert heard == [3, 6, 9, 11]

    def test_k_below_2_and_fewer_users_than_k_are_refused(self) -> None:
        x = threshold_matrix(sp.csr_array(np.ones((3, 2), dtype=np.int64)))
        with pytest.raises(ValueError, match="k >= 2"):
            greedy_partition(x, 1)
        with pytest.raises(ValueError, match="at least k"):
            greedy_partition(x, 4)


class TestAlgorithm5:
    def test_the_papers_repetition_example(self, tmp_path: Path) -> None:
        """A user with 4 of the cluster's 10 queries (Contrib 0.4, Quota 2), a query repeated 3 times:
        3 * 0.4 = 1.2, so one copy always and a second with probability 0.2."""
        rows = [("1", "soccer")] * 3 + [("1", "tennis")] + [("2", f"stocks {i}") for i in range(6)]
        q = read_queries(toy_log(rows, tmp_path), toy_classify)
        soccer = q.strings.index("soccer")
        rng = random.Random(5)
        runs = [algorithm5(q, np.array([0, 1], dtype=np.intp), rng) for _ in range(3000)]
        copies = Counter(r[soccer] for r in runs)
        assert set(copies) == {1, 2}
        assert copies[2] / len(runs) == pytest.approx(0.2, abs=0.03)
        for r in runs:  # user 1 never exceeds ceil(Quota) = 2; user 2 (quota 3, six unique queries) at most 3
            assert r[soccer] + r[q.strings.index("tennis")] <= 2
            assert sum(n for s, n in r.items() if q.strings[s].startswith("stocks")) <= 3

    def test_a_cluster_whose_draws_all_fail_still_releases_a_query(self, tmp_path: Path) -> None:
        """Three users of one query each (Contrib 1/3): all three draws fail with probability 8/27; then one copy
        of a most repeated query of a user with most queries is released. Nobody exceeds ceil(Quota) = 1."""
        q = read_queries(toy_log([("1", "flu"), ("2", "soccer"), ("3", "stocks")], tmp_path), toy_classify)
        sizes = Counter(sum(algorithm5(q, np.arange(3, dtype=np.intp), random.Random(s)).values()) for s in range(300))
        assert min(sizes) == 1 and max(sizes) <= 3
        assert sizes[1] / 300 > 8 / 27  # the fallback's share on top of the one-draw runs (3 * 1/3 * 4/9 = 4/9)


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 4),
    st.lists(st.lists(st.sampled_from([*PATHS, "zzz", "qqq", ""]), min_size=1, max_size=6), min_size=1, max_size=14),
    st.integers(0, 2**32 - 1),
)
def test_every_cluster_releases_identical_query_multisets(k: int, users: list[list[str]], seed: int) -> None:
    """Small random logs (one-query users, identical users, unknown and empty queries): the output invariant."""
    if len(users) < k:
        users = users + [users[0]] * (k - len(users))
    rows = [(str(u + 1), query) for u, queries in enumerate(users) for query in queries]
    with tempfile.TemporaryDirectory() as folder:
        log = toy_log(rows, Path(folder))
    heard: list[int] = []
    result = microaggregate_odp(log, k, random.Random(seed), heard.append, toy_classify)
    assert_k_anonymous(log, result, k)
    assert heard == sorted(heard) and heard[-1] == len(log.users)


def test_bad_input(tmp_path: Path) -> None:
    """Users of uncategorisable queries only, one-query users and identical users are clustered like any other;
    fewer users than k and k < 2 are refused."""
    rows = [("1", "zzz"), ("1", "qqq"), ("2", "zzz"), ("3", "flu"), ("4", "flu"), ("5", "soccer"), ("5", "stocks")]
    rows += [("6", "soccer"), ("6", "stocks"), ("7", "")]
    log = toy_log(rows, tmp_path)
    for k in (2, 3):
        assert_k_anonymous(log, microaggregate_odp(log, k, random.Random(k), None, toy_classify), k)
    identical = microaggregate_odp(log, 2, random.Random(0), None, toy_classify)
    cluster_of = {u: i for i, c in enumerate(identical.clusters) for u in c.tolist()}
    assert cluster_of[2] == cluster_of[3]  # the two "flu" users: similarity 2, the highest pair
    with pytest.raises(ValueError, match="at least k"):
        microaggregate_odp(log, 11, random.Random(0), None, toy_classify)
    with pytest.raises(ValueError, match="k >= 2"):
        microaggregate_odp(log, 1, random.Random(0), None, toy_classify)


def test_same_seed_same_output_and_no_query_in_the_logs(tmp_path: Path) -> None:
    rows = [(str(u), q) for u in range(1, 13) for q in list(PATHS)[u % 4 : u % 4 + 3]]
    log = toy_log(rows, tmp_path)
    with structlog.testing.capture_logs() as logs:
        one = released(log, microaggregate_odp(log, 3, random.Random(9), None, toy_classify))
    assert one == released(log, microaggregate_odp(log, 3, random.Random(9), None, toy_classify))
    assert logs and all(q not in str(entry) for entry in logs for q in PATHS)
    assert logs[0]["count"] == 0 and logs[0]["of"] == len(rows)


def test_cli_with_the_knowledge_base(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The registered method classifies with the KB; the output keeps the schema and the invariant."""
    from helpers.kb import kb_file

    from sidecar.tools.generate.synthetic import generate_log

    monkeypatch.setenv("QUERYLOG_KB", str(kb_file()))
    path = tmp_path / "log.tsv"
    with path.open("w", encoding="utf-8") as out:
        generate_log(30, 4, out)
    target = tmp_path / "out.tsv"
    run = CliRunner().invoke(main, ["microaggregate", str(path), "-k", "3", "--method", "odp", "-o", str(target)])
    assert run.exit_code == 0, run.output
    assert "(odp, k=3): 30 users" in run.stderr
    lines = target.read_text(encoding="utf-8").splitlines()
    assert lines[0] == HEADER and all(len(line.split("\t")) == 5 for line in lines)


@pytest.mark.skipif(not AOL.exists(), reason="../shared/data is absent")
def test_the_aol_sample_keeps_the_invariant() -> None:
    from helpers.kb import kb_file

    from adapters.microaggregate.classified import kb_classify

    log = read_log(str(AOL))
    result = microaggregate_odp(log, 3, random.Random(1), None, kb_classify(kb_file()))
    assert_k_anonymous(log, result, 3)
