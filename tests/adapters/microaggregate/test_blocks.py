"""Blocked and parallel microaggregation (issues 14, 15): the blocking rule, the k..2k-1 invariant on every output
(one process, blocks, a Dask LocalCluster of 2 processes), reproducibility whatever the workers, progress."""

from __future__ import annotations

import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from helpers.microaggregate import assert_k_anonymous, released_rows
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.microaggregate.aggregate import Result
from adapters.microaggregate.blocks import cut_blocks, run_blocked, user_order
from adapters.microaggregate.log import FlatLog, UserLog, read_log
from sidecar.cli import main
from sidecar.tools.generate.synthetic import generate_log

HEADER = "AnonID\tQuery\tQueryTime\tItemRank\tClickURL"
WORDS = ["cat", "cats", "dog", "food", "news", "zebra"]


def _ints(values: list[int]) -> np.ndarray[Any, np.dtype[np.intp]]:
    return np.array(values, dtype=np.intp)


# --- the blocking rule ---


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 60), min_size=2, max_size=120),
    st.integers(2, 6),
    st.integers(0, 40),
)
def test_blocks_hold_k_to_block_size_users_and_cover_the_order_once(counts: list[int], k: int, extra: int) -> None:
    """Whatever the sizes (heavy users close blocks early), a block never has fewer than k users nor more than
    the block size, and the blocks are consecutive runs of the order."""
    if len(counts) < k:
        return
    block_size = 2 * k + extra
    order = _ints(list(reversed(range(len(counts)))))
    blocks = cut_blocks(order, _ints(counts), k, block_size)
    assert all(k <= len(b) <= block_size for b in blocks)
    assert np.concatenate(blocks).tolist() == order.tolist()
    if len(counts) <= block_size:
        assert len(blocks) == 1  # a small log is not blocked at all


def test_a_last_block_under_k_is_merged_and_split_in_halves() -> None:
    """7 equal users, k=3, block size 6: the rule would leave [6 users][1 user]; merged, 7 > 6, split 3 + 4."""
    blocks = cut_blocks(_ints(list(range(7))), _ints([5] * 7), 3, 6)
    assert [b.tolist() for b in blocks] == [[0, 1, 2], [3, 4, 5, 6]]
    # with room in the previous block the remainder simply joins it
    assert [len(b) for b in cut_blocks(_ints(list(range(11))), _ints([1] * 11), 3, 10)] == [11 // 2, 11 - 11 // 2]
    assert [len(b) for b in cut_blocks(_ints(list(range(9))), _ints([1] * 9), 2, 8)] == [4, 5]


def test_heavy_users_close_a_block_early_but_never_below_k() -> None:
    """Budget = block size x mean queries = 10 x 100.75: three heavy users pass it, the rest fill by users."""
    counts = _ints([400] * 4 + [1] * 12)
    blocks = cut_blocks(_ints(list(range(16))), counts, 2, 10)
    assert [len(b) for b in blocks] == [3, 10, 3]


@pytest.mark.parametrize(
    ("users", "k", "block_size", "message"),
    [(5, 1, 10, "at least 2"), (5, 3, 5, "at least 2k = 6"), (2, 3, 10, "fewer than k=3")],
)
def test_impossible_blocking_is_a_clear_error(users: int, k: int, block_size: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        cut_blocks(_ints(list(range(users))), _ints([1] * users), k, block_size)


def _log(rows: list[tuple[str, str]], folder: Path, name: str = "log.tsv") -> Path:
    lines = [HEADER]
    for i, (user, query) in enumerate(rows):
        url = f"http://www.site{i % 3}.com" if i % 2 else ""
        lines.append(f"{user}\t{query}\t2006-03-01 10:{i // 60 % 60:02d}:{i % 60:02d}\t{'1' if url else ''}\t{url}")
    path = folder / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_users_are_ordered_by_query_count_then_top_word(tmp_path: Path) -> None:
    rows = [("a", "zebra"), ("a", "zebra news"), ("b", "cat"), ("b", "cat food"), ("c", "dog"), ("d", "news")]
    log = read_log(str(_log(rows, tmp_path)))
    assert [log.users[u] for u in user_order(FlatLog.of(log)).tolist()] == ["c", "d", "b", "a"]


# --- the invariant on every output ---


random_logs = st.lists(
    st.lists(st.lists(st.sampled_from(WORDS), max_size=3).map(" ".join), min_size=1, max_size=6),
    min_size=2,
    max_size=24,
)


def _as_log(users: list[list[str]], folder: Path) -> UserLog:
    return read_log(str(_log([(f"u{u}", q) for u, qs in enumerate(users) for q in qs], folder)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(random_logs, st.integers(2, 4), st.integers(0, 6), st.integers(0, 2**31))
def test_every_blocked_output_is_k_anonymous(
    tmp_path: Path, users: list[list[str]], k: int, extra: int, seed: int
) -> None:
    """Random small logs (empty queries, one-query users, identical users), blocks from 2k users up."""
    if len(users) < k:
        return
    log = _as_log(users, tmp_path)
    result = run_blocked(log, k, "mdav", seed, block_size=2 * k + extra)
    assert_k_anonymous(log, result, k, whole_rows=True)


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    """A distributed LocalCluster of 2 worker processes for the whole module."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster:
        yield str(cluster.scheduler_address)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(random_logs, st.integers(2, 3), st.integers(0, 2**31))
def test_every_parallel_output_is_k_anonymous_and_equals_the_one_process_output(
    tmp_path: Path, scheduler: str, users: list[list[str]], k: int, seed: int
) -> None:
    """The same blocks on 2 Dask worker processes give the same clusters and aggregates as one process."""
    if len(users) < k:
        return
    log = _as_log(users, tmp_path)
    parallel = run_blocked(log, k, "mdav", seed, block_size=2 * k, scheduler=scheduler)
    assert_k_anonymous(log, parallel, k, whole_rows=True)
    alone = run_blocked(log, k, "mdav", seed, block_size=2 * k)
    assert [c.tolist() for c in parallel.clusters] == [c.tolist() for c in alone.clusters]
    assert released_rows(log, parallel) == released_rows(log, alone)


def _generated(tmp_path: Path, users: int) -> Path:
    buf = io.StringIO()
    generate_log(users, 5, buf)
    path = tmp_path / "generated.tsv"
    path.write_text(buf.getvalue(), encoding="utf-8")
    return path


def test_cli_with_two_workers_writes_the_same_bytes_as_one(tmp_path: Path) -> None:
    """--workers 2 (its own LocalCluster of 2 processes) and --workers 1 (no Dask), same --seed: same output."""
    pytest.importorskip("distributed")
    path = _generated(tmp_path, 60)
    outputs = []
    for workers in ("1", "2"):
        out = tmp_path / f"out{workers}.tsv"
        args = ["microaggregate", str(path), "-k", "3", "--seed", "7", "--block-size", "20", "--workers", workers]
        run = CliRunner().invoke(main, [*args, "-o", str(out)])
        assert run.exit_code == 0, run.output
        assert "60 users" in run.stderr and "block(s)" in run.stderr
        outputs.append(out.read_bytes())
    assert outputs[0] == outputs[1]
    assert int(run.stderr.split(" block(s)")[0].rsplit(" ", 1)[1]) >= 3


def test_one_worker_imports_nothing_of_dask(tmp_path: Path) -> None:
    path = _generated(tmp_path, 30)
    code = (
        "import sys\n"
        "from adapters.microaggregate.blocks import run_blocked\n"
        "from adapters.microaggregate.log import read_log\n"
        f"run_blocked(read_log({str(path)!r}), 3, 'mdav', 1, block_size=10)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed')))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_the_same_seed_gives_the_same_output_and_progress_counts_every_user(tmp_path: Path) -> None:
    log = read_log(str(_generated(tmp_path, 50)))
    seen: list[int] = []
    first = run_blocked(log, 2, "mdav", 11, block_size=12, progress=seen.append)
    again = run_blocked(log, 2, "mdav", 11, block_size=12)
    assert first.blocks == again.blocks >= 4
    assert released_rows(log, first) == released_rows(log, again)
    assert seen == sorted(seen) and seen[-1] == 50 and len(seen) > first.blocks


def test_any_registered_method_runs_per_block_and_merges_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in method (clusters of k in block order, each releasing its first user's first query) sees only
    its block's users; the merged result maps block-local users and strings back to the whole log."""
    from adapters.microaggregate.aggregate import Aggregate
    from adapters.microaggregate.methods import METHODS

    seen: list[list[str]] = []

    def chunks(log: UserLog, k: int, rng: Any, progress: Any) -> Result:
        seen.append(list(log.users))
        n = len(log.users)
        cuts = [np.arange(i, min(i + k, n), dtype=np.intp) for i in range(0, n - n % k, k)]
        if n % k:
            cuts[-1] = np.concatenate([cuts[-1], np.arange(n - n % k, n, dtype=np.intp)])
        strings = sorted({str(e.query) for g in log.events for e in g}, reverse=True)  # a block-local order
        aggs = [Aggregate([strings.index(str(log.events[c[0]][0].query))], [0.0], [1.0], [-1], [""]) for c in cuts]
        return Result(cuts, aggs, strings)

    monkeypatch.setitem(METHODS, "chunks", (chunks, "test stand-in"))
    rows = [(f"u{u}", f"q{u % 5} x{u}") for u in range(23) for _ in range(1 + u % 3)]
    log = read_log(str(_log(rows, tmp_path)))
    result = run_blocked(log, 3, "chunks", 1, block_size=8)
    assert result.blocks == len(seen) >= 3 and sorted(u for block in seen for u in block) == sorted(log.users)
    for members, agg in zip(result.clusters, result.aggregates):
        first = log.events[int(members[0])][0]
        assert result.strings[agg.sid[0]] == first.query  # the string survived the re-indexing
        assert {log.users[int(u)] for u in members} <= set(next(b for b in seen if log.users[int(members[0])] in b))
    assert_k_anonymous(log, result, 3, whole_rows=True)
