"""Access control: mutual TLS (client certificates checked against `server.tls_client_ca_file`) and a bearer
token (`server.auth_token_file` / `auth_token_env`) on every RPC but health; `querylog send` uses both.

The certificates are made at test time (tests/helpers/certs.py): a CA, a server certificate, a client
certificate from that CA and one from another CA.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers.certs import Pki, make_pki
from helpers.grpc_sidecar import Profiles, sidecar, write_config
from structlog.testing import capture_logs

from adapters.grpc.client import channel, get_profile, get_stats
from adapters.grpc.codec import EventBatch
from adapters.grpc.source import GrpcSource
from adapters.grpc.stubs.querylog.v1.querylog_pb2_grpc import QueryLogFilterStub
from sidecar.api import ConfigValueError
from sidecar.cli import main
from sidecar.config import ConfigError, load_config
from sidecar.pipeline import Pipeline

TOKEN = "t0ken-for-tests-7f3a9c"  # a test value, never a real secret


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


def _mtls_config(tmp_path: Path, pki: Pki, extra: str = "") -> Path:
    return write_config(
        tmp_path,
        f"server: {{tls_cert_file: {pki.server.cert}, tls_key_file: {pki.server.key}, "
        f"tls_client_ca_file: {pki.ca}{extra}}}\nfilters: []\n",
    )


def _code(call: object) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as err:
        call()  # a zero-argument lambda
    code: grpc.StatusCode = err.value.code()  # RpcError is also a Call
    return code


def test_mutual_tls_refuses_plaintext_clients_without_a_certificate_and_strangers(tmp_path: Path, pki: Pki) -> None:
    """With tls_client_ca_file set, a plaintext client, a TLS client without a certificate and a client whose
    certificate another CA signed all fail to connect (UNAVAILABLE); a client with a certificate from the
    configured CA is served."""
    with sidecar(_mtls_config(tmp_path, pki)) as sc:
        address = f"127.0.0.1:{sc.source.port}"
        cases = {
            "plaintext": channel(address),
            "no certificate": channel(address, str(pki.ca)),
            "stranger": channel(address, str(pki.ca), tls_cert=str(pki.stranger.cert), tls_key=str(pki.stranger.key)),
        }
        try:
            codes = {name: _code(lambda c=chan: get_stats(c, timeout=5)) for name, chan in cases.items()}
        finally:
            for chan in cases.values():
                chan.close()
        good = channel(address, str(pki.ca), tls_cert=str(pki.client.cert), tls_key=str(pki.client.key))
        try:
            stats = get_stats(good, timeout=5)
        finally:
            good.close()
    assert codes == {name: grpc.StatusCode.UNAVAILABLE for name in cases}
    assert stats.events_in == 0


def test_token_is_asked_on_every_rpc_but_health_and_never_logged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With auth_token_env set, Filter, Ingest, GetProfile and Stats without a token or with a wrong one end with
    UNAUTHENTICATED, health answers SERVING without a token, the right token is served; Stats and /metrics count
    the refusals by reason; no log line, error message or metric carries the token."""
    monkeypatch.setenv("QUERYLOG_TEST_TOKEN", TOKEN)
    config = write_config(
        tmp_path,
        "server: {auth_token_env: QUERYLOG_TEST_TOKEN, metrics_listen: '127.0.0.1:0'}\n"
        "sinks:\n  - file: {path: out.tsv}\n",
    )
    batch = EventBatch()
    batch.events.add(user="1", query="weather", seq=1)
    with capture_logs() as logs, sidecar(config) as sc:
        address = f"127.0.0.1:{sc.source.port}"
        wrong = channel(address, token="not-the-token")
        right = channel(address, token=TOKEN)
        details = []
        try:
            codes = []
            for chan in (sc.chan, wrong):
                stub = QueryLogFilterStub(chan)
                for call in (
                    lambda s=stub: list(s.Filter(iter([batch]), timeout=5)),
                    lambda s=stub: s.Ingest(iter([batch]), timeout=5),
                    lambda c=chan: get_profile(c, "1", timeout=5),
                    lambda c=chan: get_stats(c, timeout=5),
                ):
                    with pytest.raises(grpc.RpcError) as err:
                        call()
                    codes.append(err.value.code())  # RpcError is also a Call
                    details.append(err.value.details() or "")
            health = health_pb2_grpc.HealthStub(sc.chan).Check(health_pb2.HealthCheckRequest(service=""), timeout=5)
            (response,) = list(QueryLogFilterStub(right).Filter(iter([batch]), timeout=5))
            stats = get_stats(right, timeout=5)
            metrics = urllib.request.urlopen(f"http://127.0.0.1:{sc.source.metrics_port}/metrics", timeout=5).read()
        finally:
            wrong.close()
            right.close()
    assert codes == [grpc.StatusCode.UNAUTHENTICATED] * 8
    assert health.status == health_pb2.HealthCheckResponse.SERVING
    assert [m.query for m in response.events] == ["weather"]
    assert dict(stats.rpcs_refused) == {"missing_token": 4, "wrong_token": 4}
    assert stats.events_in == 1  # the refused RPCs never reached the chain
    text = metrics.decode()
    assert 'querylog_rpcs_refused_total{reason="missing_token"} 4.0' in text
    assert 'querylog_rpcs_refused_total{reason="wrong_token"} 4.0' in text
    assert any(e["event"] == "rpc_unauthenticated" for e in logs)
    everything = repr(logs) + "".join(details) + text
    assert TOKEN not in everything and "not-the-token" not in everything


def test_token_from_a_file_over_mutual_tls_with_send(tmp_path: Path, pki: Pki) -> None:
    """auth_token_file with mutual TLS: `querylog send --tls-ca --tls-cert --tls-key --token-file` round-trips a
    TSV file byte for byte; without --token-file it exits 1 with UNAUTHENTICATED."""
    (tmp_path / "token").write_text(TOKEN + "\n", encoding="ascii")
    config = _mtls_config(tmp_path, pki, ", auth_token_file: token")
    src = tmp_path / "in.tsv"
    src.write_text(
        "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n1\tweather\t2006-03-01 00:00:00\t\t\n", encoding="utf-8"
    )
    base = ["send", "--tls-ca", str(pki.ca), "--tls-cert", str(pki.client.cert), "--tls-key", str(pki.client.key)]
    with sidecar(config) as sc:
        address = ["--address", f"127.0.0.1:{sc.source.port}", "--timeout", "20"]
        ok = CliRunner().invoke(
            main, [*base, *address, "--token-file", str(tmp_path / "token"), str(src), "-o", str(tmp_path / "out.tsv")]
        )
        refused = CliRunner().invoke(main, [*base, *address, str(src), "-o", str(tmp_path / "no.tsv")])
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "out.tsv").read_bytes() == src.read_bytes()
    assert refused.exit_code == 1
    assert "UNAUTHENTICATED" in refused.output and TOKEN not in refused.output + ok.output


def test_send_token_env_and_option_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`send --token-env VAR` sends the variable's token; an unset variable, a value that is no variable name (a
    pasted token, not echoed) and --tls-cert without --tls-key are usage errors (exit 2)."""
    monkeypatch.setenv("QUERYLOG_TEST_TOKEN", TOKEN)
    config = write_config(tmp_path, "server: {auth_token_env: QUERYLOG_TEST_TOKEN}\nfilters: []\n")
    src = tmp_path / "in.tsv"
    src.write_text("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n1\tmaps\t\t\t\n", encoding="utf-8")
    cert = tmp_path / "c.pem"
    cert.write_text("x")
    with sidecar(config) as sc:
        run = ["send", "--address", f"127.0.0.1:{sc.source.port}", str(src), "-o", str(tmp_path / "out.tsv")]
        ok = CliRunner().invoke(main, [*run, "--token-env", "QUERYLOG_TEST_TOKEN"])
        unset = CliRunner().invoke(main, [*run, "--token-env", "QUERYLOG_NO_SUCH_VAR"])
        pasted = CliRunner().invoke(main, [*run, "--token-env", "Bearer abc-123.xyz"])
        half = CliRunner().invoke(main, [*run, "--tls-cert", str(cert)])
    assert ok.exit_code == 0, ok.output
    assert (tmp_path / "out.tsv").read_bytes() == src.read_bytes()
    assert unset.exit_code == pasted.exit_code == half.exit_code == 2
    assert "abc-123" not in pasted.output


def test_token_and_mutual_tls_options_are_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """auth_token_env naming an unset variable is a config error naming server.auth_token_env when the source is
    built (the value never shown); an empty token file names auth_token_file."""
    monkeypatch.delenv("QUERYLOG_UNSET_TOKEN", raising=False)
    (tmp_path / "empty").write_text("\n")
    for body, key in (
        ("server: {auth_token_env: QUERYLOG_UNSET_TOKEN}\n", "auth_token_env"),
        ("server: {auth_token_file: empty}\n", "auth_token_file"),
    ):
        cfg = load_config(write_config(tmp_path, body))
        spec = cfg.source("grpc")
        assert spec is not None
        pipeline = Pipeline(cfg)
        try:
            with pytest.raises(ConfigValueError) as err:
                GrpcSource(spec.config, pipeline.ctx)
        finally:
            pipeline.close()
        assert err.value.key == key


# ---- GetProfile answers the configured profile reader only (issue 24, item 11) ----------------------------------


def _profile_code(chan: grpc.Channel) -> tuple[grpc.StatusCode, str]:
    """GetProfile for the known user 42 of the Profiles filter: OK, or the status and details it ended with."""
    try:
        get_profile(chan, "42", timeout=5)
    except grpc.RpcError as exc:
        return exc.code(), exc.details() or ""  # RpcError is also a Call
    return grpc.StatusCode.OK, ""


def test_get_profile_is_refused_by_default_with_how_to_configure_a_reader(tmp_path: Path) -> None:
    """With no profile reader configured, GetProfile is PERMISSION_DENIED for anyone (a client can learn the
    pseudonym of any raw id through Filter), and the details name the options that configure a reader."""
    config = write_config(tmp_path, "server: {profile_lookup: raw}\nfilters: []\n")
    with sidecar(config, extra_filters=(Profiles(),)) as sc:
        code, details = _profile_code(sc.chan)
        stats = get_stats(sc.chan, timeout=5)
    assert code == grpc.StatusCode.PERMISSION_DENIED
    assert "profile_reader_token_file" in details and "profile_reader_subject" in details
    assert dict(stats.rpcs_refused) == {"not_profile_reader": 1}


def test_get_profile_answers_the_reader_token_not_the_ingest_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With an ingest token and a reader token: the reader's token reads profiles; the ingest token alone is
    PERMISSION_DENIED; no token is UNAUTHENTICATED; the reader's token does not stand in for the ingest token on
    the other RPCs. A reader token equal to the ingest token is a config error (the value never shown)."""
    reader = "reader-t0ken-for-tests-5d2e"
    monkeypatch.setenv("QUERYLOG_TEST_TOKEN", TOKEN)
    monkeypatch.setenv("QUERYLOG_TEST_READER", reader)
    config = write_config(
        tmp_path,
        "server: {profile_lookup: raw, auth_token_env: QUERYLOG_TEST_TOKEN, "
        "profile_reader_token_env: QUERYLOG_TEST_READER}\nsinks:\n  - file: {path: out.tsv}\n",
    )
    batch = EventBatch()
    batch.events.add(user="1", query="weather", seq=1)
    with (
        sidecar(config, extra_filters=(Profiles(),)) as sc,
        channel(sc.address, token=reader) as as_reader,
        channel(sc.address, token=TOKEN) as as_ingest,
    ):
        codes = {
            "reader": _profile_code(as_reader)[0],
            "ingest token": _profile_code(as_ingest)[0],
            "no token": _profile_code(sc.chan)[0],
        }
        with pytest.raises(grpc.RpcError) as err:
            QueryLogFilterStub(as_reader).Ingest(iter([batch]), timeout=5)
        profile = get_profile(as_reader, "42", timeout=5)
    assert codes == {
        "reader": grpc.StatusCode.OK,
        "ingest token": grpc.StatusCode.PERMISSION_DENIED,
        "no token": grpc.StatusCode.UNAUTHENTICATED,
    }
    assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
    assert profile.total == 4
    monkeypatch.setenv("QUERYLOG_TEST_READER", TOKEN)
    cfg = load_config(config)
    spec = cfg.source("grpc")
    assert spec is not None
    pipeline = Pipeline(cfg)
    try:
        with pytest.raises(ConfigValueError) as same:
            GrpcSource(spec.config, pipeline.ctx)
    finally:
        pipeline.close()
    assert same.value.key == "profile_reader_token_env" and TOKEN not in str(same.value)


def test_get_profile_answers_the_reader_certificate_subject(tmp_path: Path, pki: Pki) -> None:
    """Under mutual TLS, profile_reader_subject names the client certificate allowed to read profiles: its
    subject or its common name lets it in; another name does not (PERMISSION_DENIED). The option needs mutual
    TLS."""
    codes = {}
    for subject in ("CN=frontend-1", "frontend-1", "CN=profile-reader"):
        config = _mtls_config(tmp_path, pki, f", profile_lookup: raw, profile_reader_subject: '{subject}'")
        with sidecar(config, extra_filters=(Profiles(),)) as sc:
            client = channel(
                f"127.0.0.1:{sc.source.port}", str(pki.ca), tls_cert=str(pki.client.cert), tls_key=str(pki.client.key)
            )
            with client:
                codes[subject] = _profile_code(client)[0]
    assert codes == {
        "CN=frontend-1": grpc.StatusCode.OK,
        "frontend-1": grpc.StatusCode.OK,
        "CN=profile-reader": grpc.StatusCode.PERMISSION_DENIED,
    }
    with pytest.raises(ConfigError) as err:
        load_config(write_config(tmp_path, "server: {profile_reader_subject: reader}\n"))
    assert "profile_reader_subject" in str(err.value)
