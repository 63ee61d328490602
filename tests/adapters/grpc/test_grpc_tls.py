"""TLS: `serve` with cert/key files from the config, `send --tls-ca`."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import grpc
import pytest
from click.testing import CliRunner
from helpers.grpc_sidecar import sidecar, write_config

from adapters.grpc.client import channel, get_stats
from sidecar.cli import main


def _self_signed(tmp_path: Path) -> tuple[Path, Path]:
    if shutil.which("openssl") is None:
        pytest.skip("openssl is not installed")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


def test_send_over_tls_is_byte_identical_and_plaintext_is_refused(tmp_path: Path) -> None:
    """With tls_cert_file and tls_key_file under server:, `querylog send --tls-ca` round-trips a TSV file byte for
    byte, and a plaintext channel to the same port fails with UNAVAILABLE."""
    cert, _ = _self_signed(tmp_path)
    config = write_config(tmp_path, "server: {tls_cert_file: cert.pem, tls_key_file: key.pem}\nfilters: []\n")
    src = tmp_path / "in.tsv"
    src.write_text(
        "AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n1\tweather\t2006-03-01 00:00:00\t\t\n", encoding="utf-8"
    )
    with sidecar(config) as sc:
        port = sc.source.port
        result = CliRunner().invoke(
            main,
            [
                "send",
                "--address",
                f"localhost:{port}",
                "--tls-ca",
                str(cert),
                str(src),
                "-o",
                str(tmp_path / "out.tsv"),
            ],
        )
        assert result.exit_code == 0, result.output
        plain = channel(f"localhost:{port}")
        with pytest.raises(grpc.RpcError) as err:
            get_stats(plain, timeout=5)
        plain.close()
    assert (tmp_path / "out.tsv").read_bytes() == src.read_bytes()
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
