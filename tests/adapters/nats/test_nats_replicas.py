"""Replicas of the sidecar on a partitioned JetStream stream (real nats-server): a kill -9 loses nothing that was
published (redeliveries counted), and two replicas splitting the partitions build every user's profile exactly
as one replica reading them all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from helpers import ROOT, wait_until
from helpers.kb import kb_file
from helpers.natskit import STREAM, config_file, consumer_state, output, pipeline, publish, record, seqs, source
from helpers.waiting import exited

from sidecar.tools.bench.natsserver import NatsServer

RECORDS = 20_000
KILL_AT = 5_000
WORDS = ("dogs", "cats", "flu", "mortgage rates", "football scores", "pasta recipe", "guitar chords")


def _replica(folder: Path, url: str, **options: Any) -> subprocess.Popen[bytes]:
    config = config_file(folder)
    opts = {"servers": [url], "stream": STREAM, "pull_wait_seconds": 0.2, **options}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log_file = folder / "replica.log"
    before = log_file.read_bytes().count(b"replica_started") if log_file.exists() else 0  # an earlier replica's
    with log_file.open("ab") as log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "sidecar.tools.bench.natsreplica",
                str(config),
                str(folder / "counts.json"),
                json.dumps(opts),
            ],
            stdout=log,
            stderr=log,
            env=env,
        )
    wait_until(  # this replica's own marker (it blocks SIGTERM before): the log is shared with the killed one
        lambda: log_file.read_bytes().count(b"replica_started") > before, what="the replica", abort=exited(proc)
    )
    return proc


def _settled(url: str, durables: list[str]) -> bool:
    from nats.js.errors import NotFoundError

    try:
        return all(consumer_state(url, d) == {"pending": 0, "ack_pending": 0} for d in durables)
    except NotFoundError:
        return False


@pytest.mark.parametrize("per_message", [1, 50])
def test_kill9_of_a_replica_loses_nothing_published(nats_server: NatsServer, tmp_path: Path, per_message: int) -> None:
    """``per_message``: records per input message (50: a message is acknowledged once all its lines are durable)."""
    records = (record(i, users=500) for i in range(RECORDS))
    publish(nats_server.url, records, partitions=2, records_per_message=per_message)
    options = {"partition_count": 2, "batch_size": 500 // per_message, "ack_wait_seconds": 5}  # 500 records a pull
    first = _replica(tmp_path, nats_server.url, **options)
    try:
        wait_until(lambda: len(output(tmp_path)) >= KILL_AT, what="records before the kill", abort=exited(first))
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    at_kill = len(output(tmp_path))
    second = _replica(tmp_path, nats_server.url, **options)
    try:
        wait_until(lambda: _settled(nats_server.url, ["querylog_p0", "querylog_p1"]), what="every message acknowledged")
    finally:
        second.send_signal(signal.SIGTERM)
        assert second.wait(60) == 0
    seen = seqs(tmp_path)
    counts = json.loads((tmp_path / "counts.json").read_text(encoding="utf-8"))["source"]
    lost = set(range(RECORDS)) - set(seen)
    duplicates = sum(n - 1 for n in seen.values() if n > 1)
    print(
        f"nats kill -9 ({per_message} record(s)/message): published {RECORDS}, in the output at the kill {at_kill}, "
        f"lost {len(lost)}, duplicates {duplicates}, messages redelivered to the restarted replica "
        f"{counts.get('redelivered', 0)}"
    )
    assert lost == set()
    # a duplicate is a record of a message delivered again, never more
    assert duplicates <= counts.get("redelivered", 0) * per_message


def _profiles(folder: Path) -> dict[str, dict[str, int]]:
    import sqlite3

    with sqlite3.connect(folder / "state" / "querylog.db") as conn:
        rows = conn.execute("SELECT user, category, count FROM profile_counts").fetchall()
    out: dict[str, dict[str, int]] = {}
    for user, category, count in rows:
        out.setdefault(str(user), {})[str(category)] = int(count)
    return out


def test_two_replicas_build_the_profiles_of_one(nats_server: NatsServer, tmp_path: Path) -> None:
    n, users = 4000, 120
    lines = []
    for i in range(n):
        user = f"natsprof{i % users}"
        lines.append(
            (user, json.dumps({"AnonID": user, "Query": WORDS[(i * 7 + i // users) % len(WORDS)], "seq": i}).encode())
        )
    publish(nats_server.url, lines, partitions=4)
    chain = [{"classify": {"kb_path": str(kb_file()), "rebuild": False}}, {"profile": {}}]
    runs: dict[str, list[tuple[int, ...] | None]] = {"one": [None], "two": [(0, 1), (2, 3)]}
    profiles: dict[str, dict[str, dict[str, int]]] = {}
    for run, assignments in runs.items():
        merged: dict[str, dict[str, int]] = {}
        for k, parts in enumerate(assignments):
            folder = tmp_path / f"{run}{k}"
            pipe = pipeline(folder, filters=chain)
            src = source(pipe, nats_server.url, partition_count=4, partitions=parts, durable=f"{run}{k}")
            try:
                src.start(pipe)
                durables = [f"{run}{k}_p{p}" for p in (parts or range(4))]
                wait_until(lambda d=durables: _settled(nats_server.url, d), what=f"{run}{k} settled")  # type: ignore[misc]
            finally:
                src.stop(grace=5)
                pipe.close()
            mine = _profiles(folder)
            assert not set(mine) & set(merged)  # each user's profile lives on one replica
            merged.update(mine)
        profiles[run] = merged
    assert len(profiles["one"]) == users
    assert profiles["two"] == profiles["one"]
    assert sum(sum(p.values()) for p in profiles["one"].values()) == n
    assert Counter(c for p in profiles["one"].values() for c in p)  # categories were counted
