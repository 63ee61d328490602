"""The ``otlp`` sink against a receiver that demands a client certificate: our own otlp source requiring mutual
TLS takes the sink's batches with its client certificate (gRPC and HTTP) and never without one; a certificate
that cannot be read is a config error at its key."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import wait_until
from helpers.certs import make_pki
from helpers.otlp import QUICK, otlp_sidecar, request_bytes, send, sending_sidecar, write_config

from sidecar.config import ConfigError

SERVICE = "opentelemetry.proto.collector.logs.v1.LogsService"


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_the_sink_presents_its_client_certificate_to_a_source_requiring_mutual_tls(
    protocol: str, tmp_path: Path
) -> None:
    """Sidecar B's otlp source requires a client certificate of its CA: A's sink delivers with one; a sink without
    one (or with another CA's) delivers nothing, its batch kept in the outbox and retried."""
    pki = make_pki(tmp_path / "pki")
    (tmp_path / "b").mkdir()
    options = {
        "tls_cert_file": str(pki.server.cert),
        "tls_key_file": str(pki.server.key),
        "tls_client_ca_file": str(pki.ca),
    }
    with otlp_sidecar(write_config(tmp_path / "b"), **options) as b:
        if protocol == "grpc":
            endpoint = f"localhost:{b.source.port}"
        else:
            endpoint = f"https://localhost:{b.source.http_port}/v1/logs"
        base = f"endpoint: '{endpoint}', protocol: {protocol}, tls_ca_file: '{pki.ca}', {QUICK}"
        for n, pair in enumerate((None, pki.stranger)):  # refused: no certificate, another CA's
            folder = tmp_path / f"refused-{n}"
            folder.mkdir()
            cert = f", tls_cert_file: '{pair.cert}', tls_key_file: '{pair.key}'" if pair else ""
            no_drain = base.replace("close_drain_seconds: 5", "close_drain_seconds: 0")  # nothing will get through
            with sending_sidecar(folder, f"{{{no_drain}{cert}}}") as refused:
                send(refused, request_bytes())
                (sink,) = refused.sinks
                wait_until(lambda: sink.stats()["failures"] >= 1, what="the refused attempt", timeout=20)  # type: ignore[attr-defined]  # noqa: B023
                assert sink.stats()["sent_batches"] == 0  # type: ignore[attr-defined]
        assert b.source.stats().get("records_accepted", 0) == 0
        client = f", tls_cert_file: '{pki.client.cert}', tls_key_file: '{pki.client.key}'"
        with sending_sidecar(tmp_path, f"{{{base}{client}}}") as a:
            send(a, request_bytes())
            wait_until(lambda: b.source.stats().get("records_accepted", 0) == 6, what="B to take A's batch")
    assert len((tmp_path / "b" / "out.jsonl").read_text(encoding="utf-8").splitlines()) == 6


@pytest.mark.parametrize("protocol", ["grpc", "http"])
def test_a_client_certificate_that_cannot_be_read_is_an_error_at_its_key(protocol: str, tmp_path: Path) -> None:
    pki = make_pki(tmp_path / "pki")
    endpoint = "127.0.0.1:9" if protocol == "grpc" else "https://127.0.0.1:9/v1/logs"
    sink = (
        f"{{endpoint: '{endpoint}', protocol: {protocol}, tls_ca_file: '{pki.ca}', tls_cert_file: missing.pem,"
        " tls_key_file: missing.key}"
    )
    located = r"sidecar.yaml:\d+: sinks\[0\]\.otlp\.tls_(cert|key)_file: cannot"
    with pytest.raises(ConfigError, match=located), sending_sidecar(tmp_path, sink):
        pass
