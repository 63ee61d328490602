"""``format: ubi`` with the grpc source is a located config error: a ``QueryEvent`` carries five string roles and a
flat ``map<string, string>``, so a UBI record's nested objects, lists and numbers, and whether it is a query or an
event joined to one, do not survive it (a click would enter the chain as a query). ``check-config`` and ``serve``
say so at the source, and name the sources that carry UBI records."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from adapters.grpc.config import GrpcSourceConfig
from adapters.grpc.source import GrpcSource
from sidecar.api import ConfigValueError
from sidecar.cli import main
from sidecar.config import load_config
from sidecar.pipeline import Pipeline


def config(folder: Path, fmt: str) -> Path:
    path = folder / "q.yaml"
    path.write_text(
        f"state_dir: state\nschema: {{format: {fmt}}}\nsources:\n  - grpc: {{listen: '127.0.0.1:0'}}\n"
        "sinks:\n  - file: {path: out.jsonl}\n",
        encoding="utf-8",
    )
    return path


def test_check_config_refuses_format_ubi_at_the_grpc_source(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["check-config", str(config(tmp_path, "ubi"))])
    assert result.exit_code != 0
    assert f"{tmp_path / 'q.yaml'}:4" in result.output and "sources[0].grpc.format" in result.output
    assert "cannot be read by the grpc source" in result.output
    assert "http, forward, nats, vector or otlp" in result.output
    ok = CliRunner().invoke(main, ["check-config", str(config(tmp_path, "jsonl"))])
    assert ok.exit_code == 0, ok.output


def test_the_source_is_never_built_for_ubi(tmp_path: Path) -> None:
    """Built by hand with a runtime of ``format: ubi`` (as a test or an embedding program would), it refuses too."""
    path = tmp_path / "p.yaml"
    path.write_text("state_dir: state\nschema: {format: ubi}\nsinks:\n  - file: {path: out.jsonl}\n", encoding="utf-8")
    pipeline = Pipeline(load_config(path))
    try:
        with pytest.raises(ConfigValueError) as err:
            GrpcSource(GrpcSourceConfig(listen="127.0.0.1:0"), pipeline.ctx)
        assert err.value.key == "format"
    finally:
        pipeline.close()
