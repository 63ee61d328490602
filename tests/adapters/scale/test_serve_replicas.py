"""Serving at scale: 2 `querylog serve` replicas, each owning the users whose keyed hash is in its range;
`querylog send -a A -a B` routes a generated stream by that hash. Every user's profile equals a one-replica
run's, and lives on its owner only."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from functools import partial
from pathlib import Path

import grpc
import pytest
from helpers import exited, wait_until
from helpers.kb import kb_file
from helpers.serving import bound_ports

from adapters.file.scale.partition import DEFAULT_KEY, KEY_ENV, owner
from adapters.grpc.client import channel, get_profile, wait_serving
from sidecar.cli import main
from sidecar.tools.generate.synthetic import generate_log

#: the profile reader's token (a test value, never a real secret), in the replicas' environment
READER_ENV, READER = "QUERYLOG_TEST_READER", "reader-t0ken-for-tests-5d2e"


def _config(tmp_path: Path, name: str) -> Path:
    """The profile chain (scrub, classify on the query alone, profile) behind a gRPC source, its own state."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(
        f"state_dir: state-{name}\n"
        "logging: {format: json, level: warning}\n"
        f"sources:\n  - grpc: {{listen: 127.0.0.1:0, profile_lookup: raw, profile_reader_token_env: {READER_ENV}}}\n"
        "filters:\n"
        "  - hipaa_scrub: {emptied: drop}\n"
        f"  - classify: {{kb_path: {str(kb_file())!r}, rebuild: false, use_url: false}}\n"
        "  - profile: {}\n",
        encoding="utf-8",
    )
    return path


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[list[str]]:
    """Three `querylog serve` processes: two replicas (a, b) and one alone; their addresses. Each listens on
    port 0; the configs log at warning, which hides serve's ``listening`` event, so the port is the one the
    process listens on."""
    procs: list[subprocess.Popen[bytes]] = []
    addresses: list[str] = []
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV}
    env[READER_ENV] = READER  # GetProfile answers the configured profile reader only
    try:
        for name in ("a", "b", "alone"):
            cmd = [sys.executable, "-c", "from sidecar.cli import main; main()", "serve", "--config"]
            cmd += [str(_config(tmp_path, name)), "--listen", "127.0.0.1:0"]
            err = open(tmp_path / f"{name}.err", "wb")  # noqa: SIM115 - the child writes to it; closed below
            procs.append(subprocess.Popen(cmd, cwd=tmp_path, env=env, stderr=err))
            err.close()
        for name, proc in zip(("a", "b", "alone"), procs, strict=True):
            (port,) = wait_until(
                partial(bound_ports, proc.pid), what=f"{name} to listen", timeout=120, abort=exited(proc)
            )
            address = f"127.0.0.1:{port}"
            addresses.append(address)
            chan = channel(address)
            ok = wait_serving(chan, 120)
            chan.close()
            assert ok, f"{name} did not become SERVING: {(tmp_path / f'{name}.err').read_text()[-1500:]}"
        yield addresses
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def _profile(chan: grpc.Channel, user: str) -> tuple[dict[str, int], int] | None:
    """GetProfile's counts and total; None when the replica knows no such user (NOT_FOUND)."""
    try:
        p = get_profile(chan, user)
    except grpc.RpcError as exc:
        if exc.code() == grpc.StatusCode.NOT_FOUND:
            return None
        raise
    return dict(p.counts), p.total


def _send(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["send", *argv])
    assert done.value.code in (0, None)


def test_routed_replicas_hold_the_same_profiles_as_one(
    tmp_path: Path, replicas: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each event goes to owner(user, 2); afterwards GetProfile on a user's owner equals GetProfile on the
    single replica (counts per category), the other replica knows nothing of that user, and the two outputs
    hold the same records."""
    monkeypatch.delenv(KEY_ENV, raising=False)
    buf = io.StringIO()
    generate_log(60, 13, buf)
    src = tmp_path / "in.tsv"
    src.write_text(buf.getvalue(), encoding="utf-8")
    a, b, alone = replicas
    _send(["-a", a, "-a", b, str(src), "-o", str(tmp_path / "routed.tsv")])
    _send(["-a", alone, str(src), "-o", str(tmp_path / "alone.tsv")])
    routed = (tmp_path / "routed.tsv").read_text(encoding="utf-8").splitlines()
    single = (tmp_path / "alone.tsv").read_text(encoding="utf-8").splitlines()
    assert routed[0] == single[0] and sorted(routed[1:]) == sorted(single[1:]) and len(single) > 1000
    users = sorted({line.split("\t", 1)[0] for line in buf.getvalue().splitlines()[1:]})
    chans = [channel(x, token=READER) for x in (a, b, alone)]
    try:
        owned = [0, 0]
        for user in users:
            mine = owner(user, 2, DEFAULT_KEY)
            want = _profile(chans[2], user)
            assert _profile(chans[mine], user) == want
            assert _profile(chans[1 - mine], user) is None
            owned[mine] += want is not None
        assert min(owned) > 0 and sum(owned) > len(users) * 0.9, owned
    finally:
        for c in chans:
            c.close()
