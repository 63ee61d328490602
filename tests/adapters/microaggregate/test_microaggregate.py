"""``querylog microaggregate --method mdav`` (issue 14, paper 003): MDAV, the distances, the output invariant."""

from __future__ import annotations

import gzip
import io
import json
import random
import re
from collections import Counter
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from click.testing import CliRunner
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.microaggregate.aggregate import UserSpace, microaggregate_mdav, output_events
from adapters.microaggregate.blocks import run_blocked
from adapters.microaggregate.distance import domain_distance, word_hausdorff
from adapters.microaggregate.log import read_log, write_log
from adapters.microaggregate.mdav import mdav
from sidecar.cli import main
from sidecar.tools.generate.synthetic import generate_log

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
AOL = Path(__file__).resolve().parents[4] / "shared" / "data" / "aol-sample.tsv"


class Points:
    """Euclidean points: the average record is the mean."""

    def __init__(self, xy: npt.NDArray[np.float64]) -> None:
        self.xy = xy

    def to_average(self, members: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        centre = self.xy[members].mean(axis=0)
        return np.asarray(np.linalg.norm(self.xy[members] - centre, axis=1), dtype=np.float64)

    def to_record(self, record: int, members: npt.NDArray[np.intp]) -> npt.NDArray[np.float64]:
        return np.asarray(np.linalg.norm(self.xy[members] - self.xy[record], axis=1), dtype=np.float64)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=2, max_value=7), st.integers(min_value=0, max_value=80), st.integers(0, 2**32 - 1))
def test_mdav_clusters_have_k_to_2k_minus_1_records_and_cover_each_once(k: int, extra: int, seed: int) -> None:
    n = k + extra
    xy = np.random.default_rng(seed).normal(size=(n, 2)).round(1)  # rounding: ties and duplicates too
    clusters = mdav(Points(xy), n, k)
    assert all(k <= len(c) <= 2 * k - 1 for c in clusters)
    members = np.concatenate(clusters)
    assert sorted(members.tolist()) == list(range(n))


def test_mdav_refuses_fewer_records_than_k() -> None:
    with pytest.raises(ValueError, match="at least k"):
        mdav(Points(np.zeros((2, 2))), 2, 3)


def _write(path: Path, rows: list[tuple[str, ...]]) -> Path:
    path.write_text(HEADER + "\n" + "".join("\t".join(r) + "\n" for r in rows), encoding="utf-8")
    return path


def test_distances_match_the_equations_on_a_hand_computed_example(tmp_path: Path) -> None:
    """Two users; min-max over the log: time 0..100, rank 1..3, queries per user 1..2, words per query 1..2.

    A1=(cat, t0, r1, www.a.com) B1=(cats, t100, r1, www.a.com): d_lev(cat, cats)=1/4, d_phi=(2*1/4+0)/3=1/6,
    d_varphi=(1+0+0+3/6)/6=1/4. A2=(dog food, t100, r3, no URL) vs B1: every word pair differs fully (d_lev 1),
    d_phi=(2*1+1)/3=1, d_varphi=(0+1+1+3)/6=5/6. Hausdorff: max(max(1/4, 5/6), 1/4)=5/6. Eq. 4: (|1-0| + 5/6)/2.
    """
    assert word_hausdorff(["cat"], ["cats"]) == pytest.approx(0.25)
    assert word_hausdorff(["dog", "food"], ["cats"]) == pytest.approx(1.0)
    assert word_hausdorff([], []) == 0.0 and word_hausdorff([], ["x"]) == 1.0
    assert domain_distance(("com", "google", "www"), ("com", "google", "maps")) == pytest.approx(1 / 7)
    assert domain_distance(("com", "a"), ("org", "a")) == pytest.approx(2 / 3)
    assert domain_distance((), ()) == 0.0 and domain_distance((), ("com",)) == 1.0
    path = _write(
        tmp_path / "tiny.tsv",
        [
            ("1", "cat", "1970-01-01 00:00:00", "1", "http://www.a.com"),
            ("1", "dog food", "1970-01-01 00:01:40", "3", ""),
            ("2", "cats", "1970-01-01 00:01:40", "1", "http://www.a.com"),
        ],
    )
    space = UserSpace(read_log(str(path)), random.Random(0))
    b = space._query_set(np.array([2], dtype=np.intp))
    a = space._query_set(np.array([0, 1], dtype=np.intp))
    assert space.space.query_distance(a, b)[:, 0] == pytest.approx([1 / 4, 5 / 6])
    assert space.to_record(0, np.array([1, 0], dtype=np.intp)) == pytest.approx([11 / 12, 0.0])


def _generated(tmp_path: Path, users: int, seed: int = 3) -> Path:
    buf = io.StringIO()
    generate_log(users, seed, buf)
    path = tmp_path / "log.tsv"
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


@pytest.mark.parametrize("k", [2, 3, 5])
def test_every_cluster_gets_identical_query_multisets(tmp_path: Path, k: int) -> None:
    log = read_log(str(_generated(tmp_path, 40)))
    result = microaggregate_mdav(log, k, random.Random(k))
    out = tmp_path / "out.tsv"
    write_log(str(out), log.codec, output_events(log, result))
    rows: dict[str, Counter[tuple[str, ...]]] = {}
    for line in out.read_text(encoding="utf-8").splitlines()[1:]:
        user, *rest = line.split("\t")
        rows.setdefault(user, Counter())[tuple(rest)] += 1
    assert set(rows) == {str(u) for u in log.users}  # every user keeps their id
    for cluster in result.clusters:
        assert k <= len(cluster) <= 2 * k - 1
        multisets = [rows[str(log.users[u])] for u in cluster.tolist()]
        assert all(m == multisets[0] for m in multisets)
        assert sum(multisets[0].values()) >= 1


def test_cli_keeps_the_schema_and_header_and_reports_a_summary(tmp_path: Path) -> None:
    path = _generated(tmp_path, 25)
    out = tmp_path / "out.tsv.gz"
    run = CliRunner().invoke(main, ["microaggregate", str(path), "-k", "3", "-o", str(out), "--seed", "1"])
    assert run.exit_code == 0, run.output
    assert re.search(
        r"25 users, \d+ clusters of [345]\.\.[345] users, 1 block\(s\)(, SRP floor [^,]+)?, [\d.]+ s", run.stderr
    )
    lines = gzip.decompress(out.read_bytes()).decode("utf-8").splitlines()
    assert lines[0] == path.read_text(encoding="utf-8").splitlines()[0]
    assert all(len(line.split("\t")) == 5 for line in lines)


def test_cli_on_json_lines_writes_json_lines_with_the_same_keys(tmp_path: Path) -> None:
    path = tmp_path / "log.jsonl"
    records = [
        {"AnonID": u, "Query": q, "QueryTime": "2006-03-01 10:00:0" + str(i), "ItemRank": None, "ClickURL": None}
        for u in (1, 2, 3, 4)
        for i, q in enumerate(("weather", f"news {u}"))
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    run = CliRunner().invoke(main, ["microaggregate", str(path), "-k", "2", "-o", str(out), "--seed", "2"])
    assert run.exit_code == 0, run.output
    written = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert written and all(set(r) == set(records[0]) for r in written)
    assert {r["AnonID"] for r in written} == {1, 2, 3, 4}


def _released(path: Path) -> dict[str, Counter[tuple[str, ...]]]:
    rows: dict[str, Counter[tuple[str, ...]]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        user, *rest = line.split("\t")
        rows.setdefault(user, Counter())[tuple(rest)] += 1
    return rows


def test_bad_input_single_queries_empty_queries_and_identical_users(tmp_path: Path) -> None:
    rows = [("1", "", "2006-03-01 10:00:00", "", ""), ("2", "", "2006-03-01 10:00:00", "", "")]
    rows += [("3", "same", "2006-03-01 10:00:00", "1", "http://x.org"), ("4", "same", "2006-03-01 10:00:00", "1", "")]
    rows += [("5", "one", "2006-03-02 10:00:00", "2", "http://www.x.org")]
    path = _write(tmp_path / "odd.tsv", rows)
    out = tmp_path / "out.tsv"
    run = CliRunner().invoke(main, ["microaggregate", str(path), "-k", "2", "-o", str(out), "--seed", "3"])
    assert run.exit_code == 0, run.output
    users = Counter(line.split("\t")[0] for line in out.read_text(encoding="utf-8").splitlines()[1:])
    assert set(users) == {"1", "2", "3", "4", "5"}
    assert "2 clusters of 2..3 users" in run.stderr


@pytest.mark.parametrize(
    ("case", "queries"),
    [
        ("identical users", [["weather", "news today", "weather"]] * 7),
        ("one query each", [[f"query {u}"] for u in range(7)]),
        ("only empty queries", [[""], ["", ""], [""], [""], ["", "", ""], [""], [""]]),
    ],
)
def test_degenerate_logs_still_give_k_anonymous_output(tmp_path: Path, case: str, queries: list[list[str]]) -> None:
    """Zero distances, one-query users and empty strings: every released multiset is shared by >= k users."""
    rows = [
        (str(u), q, f"2006-03-0{1 + i % 9} 10:00:00", "1" if i % 2 else "", "http://a.com" if i % 2 else "")
        for u, qs in enumerate(queries)
        for i, q in enumerate(qs)
    ]
    path = _write(tmp_path / "log.tsv", rows)
    out = tmp_path / "out.tsv"
    run = CliRunner().invoke(main, ["microaggregate", str(path), "-k", "3", "-o", str(out), "--seed", "4"])
    assert run.exit_code == 0, (case, run.output)
    released = _released(out)
    assert set(released) == {str(u) for u in range(7)}
    groups = Counter(tuple(sorted(m.items())) for m in released.values())
    assert all(n >= 3 for n in groups.values()), case  # identical clusters may release identical rows
    if case == "one query each":
        assert all(sum(m.values()) == 1 for m in released.values())
    if case == "only empty queries":
        assert all(key[0] == "" for m in released.values() for key in m)


def test_k_below_2_and_fewer_users_than_k_are_clear_errors(tmp_path: Path) -> None:
    path = _write(tmp_path / "two.tsv", [("1", "a", "", "", ""), ("2", "b", "", "", "")])
    low = CliRunner().invoke(main, ["microaggregate", str(path), "-k", "1"])
    assert low.exit_code == 2 and "at least 2" in low.output
    few = CliRunner().invoke(main, ["microaggregate", str(path), "-k", "3"])
    assert few.exit_code == 1 and "fewer than k=3" in few.output and "impossible" in few.output
    small = CliRunner().invoke(main, ["microaggregate", str(path), "-k", "3", "--block-size", "5"])
    assert small.exit_code == 2 and "at least 2k = 6" in small.output
    with pytest.raises(ValueError, match="fewer than k=3"):
        run_blocked(read_log(str(path)), 3, "mdav", 1)
    with pytest.raises(ValueError, match="at least 2"):
        run_blocked(read_log(str(path)), 1, "mdav", 1)


def test_the_summary_goes_to_stderr_without_a_progress_bar_off_a_terminal(tmp_path: Path) -> None:
    path = _generated(tmp_path, 12)
    run = CliRunner().invoke(main, ["microaggregate", str(path), "-k", "2", "-o", str(tmp_path / "o.tsv")])
    assert run.exit_code == 0, run.output
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("microaggregate (mdav, k=2): 12 users")


@pytest.mark.skipif(not AOL.exists(), reason="../shared/data is absent")
def test_aol_sample_output_is_k_anonymous(tmp_path: Path) -> None:
    """The real sample (132 users, hundreds of queries each), k=5: only counts are asserted, nothing printed."""
    log = read_log(str(AOL))
    result = run_blocked(log, 5, "mdav", 1)
    assert all(5 <= len(c) <= 9 for c in result.clusters)
    assert sorted(np.concatenate(result.clusters).tolist()) == list(range(len(log.users)))
