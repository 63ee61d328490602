"""On a ``distributed.LocalCluster`` of 2 worker processes: the same log as one process, and a worker (or the
whole client) killed mid-partition is resumed from the partition's last commit: no event lost or written twice,
per-user state counted once."""

from __future__ import annotations

import dataclasses
import os
import signal
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path

import pytest
from helpers import ROOT, exited, wait_until

from adapters.file.scale.replay import ScaleSummary, scaled_replay
from sidecar.config import load_config
from sidecar.drive import replay
from sidecar.tools.generate.synthetic import generate_log

distributed = pytest.importorskip("distributed")

Config = Callable[[str], Path]
HIPAA = "state_dir: state\nfilters:\n  - hipaa_scrub: {emptied: keep}\n"


def _profile_chain() -> str:
    """A chain with per-user state and an exact output: profile counts every event once (under unknown, as
    no classify runs; classify is left out because its result can depend on its cache's history)."""
    return "state_dir: state\nfilters:\n  - hipaa_scrub: {emptied: drop}\n  - profile: {}\n"


@pytest.fixture(scope="module")
def cluster() -> Iterator[distributed.LocalCluster]:
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c:
        yield c


def _profiles(state: Path) -> dict[tuple[str, str], int]:
    """Every partition's profile counts, by (user, category); users are disjoint across partitions."""
    out: dict[tuple[str, str], int] = {}
    for db in sorted((state / "partitions").glob("*-of-*/querylog.db")):
        with sqlite3.connect(db) as conn:
            for user, cat, n in conn.execute("SELECT user, category, count FROM profile_counts"):
                assert (user, cat) not in out, "a user in two partitions"
                out[(user, cat)] = n
    return out


def _one_process_profiles(cfg: Path, src: Path, out: Path, state: Path) -> dict[tuple[str, str], int]:
    loaded = load_config(cfg)
    loaded = dataclasses.replace(loaded, sidecar=dataclasses.replace(loaded.sidecar, state_dir=str(state)))
    replay(loaded, str(src), str(out))
    with sqlite3.connect(state / "querylog.db") as conn:
        return {(u, c): n for u, c, n in conn.execute("SELECT user, category, count FROM profile_counts")}


def test_local_cluster_output_is_byte_identical(
    tmp_path: Path, log_file: Path, config: Config, cluster: distributed.LocalCluster
) -> None:
    """hipaa_scrub on 2 cluster workers (scheduler address) equals the one-process replay byte for byte;
    the partitions ran in the cluster's worker processes, not here."""
    cfg = config(HIPAA)
    loaded = load_config(cfg)
    loaded = dataclasses.replace(loaded, sidecar=dataclasses.replace(loaded.sidecar, state_dir=str(tmp_path / "one")))
    replay(loaded, str(log_file), str(tmp_path / "one.tsv"))
    out = tmp_path / "many.tsv"
    s = scaled_replay(str(cfg), str(log_file), str(out), workers=2, scheduler=cluster.scheduler_address)
    assert out.read_bytes() == (tmp_path / "one.tsv").read_bytes()
    assert {r.pid for r in s.parts} <= set(_worker_pids(cluster).values())
    assert os.getpid() not in {r.pid for r in s.parts}


def _worker_pids(cluster: distributed.LocalCluster) -> dict[str, int]:
    with distributed.Client(cluster) as client:
        return dict(client.run(os.getpid))


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log large enough (5,000 users, about 130,000 lines) that partition 0 has committed output for a third of
    a second here, so the kill tests see it mid-way on a faster machine too (with 10,000 lines it finished between
    two polls on CI)."""
    path = tmp_path_factory.mktemp("big") / "big.tsv"
    with path.open("w", encoding="utf-8") as f:
        generate_log(5000, 11, f)
    return path


def _has_output(path: Path) -> bool:
    """``path`` holds committed output (a partition is mid-way)."""
    try:
        return path.stat().st_size > 0
    except FileNotFoundError:
        return False


#: Seconds between two looks at a partition's output: short, so a fast machine is still seen mid-partition.
POLL = 0.002


def test_a_worker_killed_mid_partition_is_retried_without_loss_or_duplicates(
    tmp_path: Path, big_log: Path, config: Config
) -> None:
    """SIGKILL of a worker process running a partition once partition 0 has committed output: Dask retries the task on
    a worker, which cuts the output back to the last commit and continues. The merged log and every user's
    profile equal an uninterrupted run's."""
    cfg = config(_profile_chain())
    want_profiles = _one_process_profiles(cfg, big_log, tmp_path / "one.tsv", tmp_path / "one")
    want = (tmp_path / "one.tsv").read_bytes()
    out = tmp_path / "many.tsv"
    result: dict[str, ScaleSummary | BaseException] = {}
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c,
        distributed.Client(c) as client,
    ):
        pids = dict(client.run(os.getpid))

        def run() -> None:
            try:
                result["s"] = scaled_replay(
                    str(cfg), str(big_log), str(out), workers=2, scheduler=c.scheduler_address, commit_lines=100
                )
            except BaseException as exc:  # handed to the test thread
                result["s"] = exc

        t = threading.Thread(target=run)
        t.start()
        run_dir = tmp_path / "state" / "partitions" / "run-of-0002"
        wait_until(
            partial(_has_output, run_dir / "part-0000.out.tmp"),
            what="partition 0 to commit output",
            timeout=120,
            interval=POLL,
            abort=lambda: None if t.is_alive() else "the run ended first",
        )
        busy, victim = next(
            (a, int(k.split("-")[1])) for a, keys in client.processing().items() for k in keys if "partition-" in k
        )
        os.kill(pids[busy], signal.SIGKILL)
        t.join(timeout=300)
    s = result["s"]
    assert isinstance(s, ScaleSummary), s
    assert s.parts[victim].pid != pids[busy], f"partition {victim} finished on another process"
    assert out.read_bytes() == want
    assert _profiles(tmp_path / "state") == want_profiles


def test_resume_after_the_client_is_killed(tmp_path: Path, big_log: Path, config: Config) -> None:
    """The whole replay killed (SIGKILL) mid-partition, then `--resume`: each partition continues from its own
    commit; output and profiles equal an uninterrupted run's. A further --resume finds the run complete."""
    cfg = config(_profile_chain())
    want_profiles = _one_process_profiles(cfg, big_log, tmp_path / "one.tsv", tmp_path / "one")
    out = tmp_path / "many.tsv"
    code = (
        "from adapters.file.scale.replay import scaled_replay\n"
        f"scaled_replay({str(cfg)!r}, {str(big_log)!r}, {str(out)!r}, workers=2, scheduler='synchronous',"
        " commit_lines=300, resume=True)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT)
    try:
        wait_until(
            partial(_has_output, tmp_path / "state" / "partitions" / "run-of-0002" / "part-0000.out.tmp"),
            what="partition 0 to commit output",
            timeout=120,
            interval=POLL,
            abort=exited(proc),
        )
        assert proc.poll() is None, "finished before the kill"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert not out.exists()
    s = scaled_replay(str(cfg), str(big_log), str(out), workers=2, scheduler="synchronous", resume=True)
    assert out.read_bytes() == (tmp_path / "one.tsv").read_bytes()
    assert _profiles(tmp_path / "state") == want_profiles
    assert s.records_in == sum(1 for _ in big_log.open()) - 1
    again = scaled_replay(str(cfg), str(big_log), str(out), workers=2, scheduler="synchronous", resume=True)
    assert again.already_done
    assert _profiles(tmp_path / "state") == want_profiles
