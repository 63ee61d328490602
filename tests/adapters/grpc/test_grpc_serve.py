"""`querylog serve` as a process: SIGTERM drains and exits 0; its logs carry counts, never values."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from helpers.grpc_sidecar import write_config
from helpers.serving import ServeLog

from adapters.grpc.client import channel, wait_serving
from sidecar.tools.generate.synthetic import generate_log
from sidecar.tools.send import send_file


def test_serve_stops_cleanly_on_sigterm_and_logs_no_values(tmp_path: Path) -> None:
    """`querylog serve` as a process filters a generated log sent over gRPC, exits 0 on SIGTERM with server_started
    and server_stopped JSON logs whose counts match what was sent and received, and its output names no planted
    identifier, long query or user id."""
    src = tmp_path / "in.tsv"
    with src.open("w", encoding="utf-8") as f:
        planted = generate_log(150, 5, f).planted
    assert planted
    config = write_config(
        tmp_path,
        "logging: {format: json}\nfilters:\n  - pseudonymize: {key_env: TEST_HMAC_KEY}\n  - truncate_url: {}\n",
    )
    env = {**os.environ, "TEST_HMAC_KEY": "secret-key-for-tests"}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from sidecar.cli import main; main()",
            "serve",
            "--config",
            str(config),
            "--listen",
            "127.0.0.1:0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    log = ServeLog(proc)
    try:
        (port,) = log.ports()  # the gRPC service (config path "server")
        chan = channel(f"127.0.0.1:{port}")
        assert wait_serving(chan, 30), "server did not become SERVING"
        summary = send_file(chan, str(src), str(tmp_path / "out.tsv"))
        chan.close()
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout is not None
        out = proc.stdout.read()  # to its end: the process exited
        err = log.text(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err[-2000:]
    assert summary.sent == summary.received > 0
    events = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    names = [e["event"] for e in events]
    assert "server_started" in names and "server_stopped" in names
    stopped = next(e for e in events if e["event"] == "server_stopped")
    assert stopped["events_in"] == summary.sent and stopped["events_out"] == summary.received
    # No planted identifier, long query or user id appears in the sidecar's own output.
    text = out + err
    for p in planted:
        assert p.value not in text
    lines = src.read_text(encoding="utf-8").splitlines()[1:]
    queries = {ln.split("\t")[1] for ln in lines if len(ln.split("\t")[1]) >= 12}
    assert queries and not [q for q in queries if q in text]
    users = {ln.split("\t")[0] for ln in lines}
    assert not [u for u in users if f'"{u}"' in text or f"={u} " in text]
