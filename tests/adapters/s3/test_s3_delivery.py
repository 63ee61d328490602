"""The s3 sink's delivery under faults, against moto's S3 server: S3 down then up, a restart with objects left in
the outbox, kill -9 of a writer process, a full outbox (backpressure), an S3 error code, TLS."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest
import structlog
from helpers import find_leaks, wait_until

from .conftest import Moto, add_sink, pipeline, receive, records_of, rows


def test_peer_down_then_up_nothing_lost(moto: Moto, s3_credentials: None, tmp_path: Path) -> None:
    bucket = moto.bucket()
    moto.stop()  # the endpoint refuses connections
    pipe = pipeline(tmp_path)
    sink = add_sink(pipe, moto.url, bucket, max_object_bytes=2048)
    lines = rows(200)
    with structlog.testing.capture_logs() as logs:
        try:
            for start in range(0, 200, 25):
                receive(pipe, lines[start : start + 25])  # acknowledged: staged, then objects in the outbox
            wait_until(lambda: sink.stats()["failures"] >= 2, what="uploads failing while S3 is down")
            assert sink.stats()["pending_events"] == 200
            moto.start_again()
            wait_until(lambda: sink.stats()["pending_batches"] == 0, what="the outbox drained", timeout=30)
        finally:
            pipe.close()
    assert records_of(moto.objects(bucket)) == lines
    needles = ({r.split("\t")[1] for r in lines} | {r.split("\t")[0] for r in lines}, [], [])
    assert find_leaks(logs, needles) == []
    assert any(e.get("event") == "outbox_send_failed" for e in logs)


def test_a_restart_uploads_what_the_last_run_left(moto: Moto, s3_credentials: None, tmp_path: Path) -> None:
    bucket = moto.bucket()
    moto.stop()
    pipe = pipeline(tmp_path)
    sink = add_sink(pipe, moto.url, bucket, max_object_bytes=2048, close_drain_seconds=0)
    lines = rows(100)
    try:
        receive(pipe, lines)
    finally:
        pipe.close()  # S3 is down: the objects stay in the outbox, in the state database
    assert sink.counts["objects_closed"] == 1 and not sink.counts["objects_uploaded"]
    moto.start_again()
    again = pipeline(tmp_path)  # the same state folder
    restarted = add_sink(again, moto.url, bucket, max_object_bytes=2048)
    try:
        wait_until(lambda: restarted.stats()["pending_batches"] == 0, what="the last run's objects sent")
    finally:
        again.close()
    assert records_of(moto.objects(bucket)) == lines


def test_kill_9_mid_stream_loses_nothing_acknowledged(moto: Moto, s3_credentials: None, tmp_path: Path) -> None:
    """A writer killed with SIGKILL while objects close and upload; a restart on its state folder uploads what was
    staged or in the outbox: every acknowledged record is in the bucket (duplicates counted, none expected)."""
    import os
    import signal
    import subprocess
    import sys

    bucket = moto.bucket()
    script = Path(__file__).with_name("s3_writer.py")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(script.parent), str(script.parents[3])])}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path), moto.url, bucket],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    acked = 0
    try:
        assert proc.stdout is not None
        for line in proc.stdout:  # (the process's log lines too: only "acked <n>" counts)
            acked = int(line.split()[1]) if line.startswith("acked ") else acked
            if acked >= 3000 and moto.count(bucket):  # objects uploaded, more staged and in the outbox
                break
        proc.send_signal(signal.SIGKILL)
        for line in proc.stdout:  # what it printed before it died
            acked = int(line.split()[1]) if line.startswith("acked ") else acked
    finally:
        proc.kill()
        proc.wait()
    assert acked >= 3000
    restarted = pipeline(tmp_path)
    add_sink(restarted, moto.url, bucket, max_object_bytes=4096)
    restarted.close()  # the restart closes what was staged and drains the outbox
    got = [r.split("\t")[1] for r in records_of(moto.objects(bucket))]
    wanted = {f"kill test record {i}" for i in range(acked)}
    assert wanted <= set(got), f"lost {len(wanted - set(got))} of {acked} acknowledged"
    print(f"s3 kill -9: acknowledged {acked}, stored {len(set(got))}, duplicates {len(got) - len(set(got))}")
    assert len(got) == len(set(got))  # an object is moved into the outbox with its rows deleted: no duplicate


def test_an_s3_error_is_logged_by_its_code_and_the_object_waits(
    moto: Moto, s3_credentials: None, tmp_path: Path
) -> None:
    """A bucket that does not exist yet: the upload fails with S3's code (logged, nothing else of the answer), the
    object stays in the outbox, and goes up once the operator created the bucket."""
    bucket = "querylog-" + secrets.token_hex(6)
    pipe = pipeline(tmp_path)
    sink = add_sink(pipe, moto.url, bucket, max_object_seconds=0.1)
    with structlog.testing.capture_logs() as logs:
        try:
            receive(pipe, rows(10))
            wait_until(lambda: sink.counts["upload_failures"] >= 1, what="an upload refused")
            moto.client().create_bucket(Bucket=bucket)
            wait_until(lambda: sink.stats()["pending_events"] == 0, what="the object uploaded")
        finally:
            pipe.close()
    failed = [e for e in logs if e["event"] == "s3_upload_failed"]
    assert failed and {e["error"] for e in failed} == {"NoSuchBucket"}
    assert records_of(moto.objects(bucket)) == rows(10)


def test_a_full_outbox_stops_the_runtime_taking_batches(moto: Moto, s3_credentials: None, tmp_path: Path) -> None:
    """S3 down and the outbox at its bound: a batch is refused before anything runs (Backpressure: the source does
    not acknowledge), nothing piles up in staging; S3 back: the object goes up and batches are taken again."""
    from sidecar.api import Backpressure

    bucket = moto.bucket()
    moto.stop()
    pipe = pipeline(tmp_path)
    sink = add_sink(pipe, moto.url, bucket, max_object_bytes=1024, outbox_max_batches=1)
    try:
        receive(pipe, rows(50))
        wait_until(lambda: pipe.backpressure() is not None, what="the object in the outbox, at its bound")
        with pytest.raises(Backpressure):
            receive(pipe, rows(50, 50))
        assert sink.stats()["staged_events"] == 0
        moto.start_again()
        wait_until(lambda: pipe.backpressure() is None, what="the outbox drained", timeout=30)
        receive(pipe, rows(50, 50))
    finally:
        pipe.close()
    assert records_of(moto.objects(bucket)) == rows(100)


def test_tls_checks_the_endpoint_with_the_configured_ca(moto: Moto, s3_credentials: None, tmp_path: Path) -> None:
    """An https endpoint: with `tls_ca_file` (its CA) the object goes up; with the system CAs only the certificate
    is refused (SSLError, logged by that name) and the object waits in the outbox."""
    from helpers.certs import make_pki

    from .conftest import MotoTls

    pki = make_pki(tmp_path / "pki")
    bucket = moto.bucket()  # the backends are this process's: the TLS server sees the bucket too
    server = MotoTls(pki.server.cert, pki.server.key)
    try:
        trusted = pipeline(tmp_path / "trusted")
        add_sink(trusted, server.url, bucket, tls_ca_file=str(pki.ca))
        try:
            receive(trusted, rows(10))
        finally:
            trusted.close()
        assert records_of(moto.objects(bucket)) == rows(10)
        unknown = pipeline(tmp_path / "unknown")
        sink = add_sink(unknown, server.url, bucket, max_object_seconds=0.1, close_drain_seconds=0)
        with structlog.testing.capture_logs() as logs:
            try:
                receive(unknown, rows(5, 100))
                wait_until(lambda: sink.counts["upload_failures"] >= 1, what="the certificate refused")
            finally:
                unknown.close()
        assert {e["error"] for e in logs if e["event"] == "s3_upload_failed"} == {"SSLError"}
        assert len(moto.objects(bucket)) == 1
    finally:
        server.stop()
