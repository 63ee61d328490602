"""The options of the ``vector`` source and sink as an operator writes them, and their registration."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.configs import report_invalid_lines

from adapters.vector.codec import VectorCodec
from adapters.vector.config import VectorSinkConfig, VectorSourceConfig
from adapters.vector.sink import VectorSink
from adapters.vector.source import VectorSource
from sidecar.api import CODECS, SINKS, SOURCES, ConfigValueError
from sidecar.config import load_config
from sidecar.registry import plugins

TESTDATA = Path(__file__).resolve().parent / "testdata"


def test_source_options_are_reported_at_their_lines() -> None:
    """Every line of testdata/source_invalid.yaml marked `# invalid` is a ConfigError `FILE:LINE: KEY: problem`
    at that line, under sources[0].vector."""
    reported = report_invalid_lines(TESTDATA / "source_invalid.yaml", lambda p, text: load_config(p, text=text))
    assert all(err.key.startswith("sources[0].vector.") for err in reported.values())


def test_valid_config_gives_the_options_it_writes() -> None:
    cfg = load_config(TESTDATA / "config.yaml")
    source = cfg.source("vector")
    assert source is not None and source.cls is VectorSource
    assert source.config == VectorSourceConfig(
        listen="127.0.0.1:6000", max_message_bytes=8388608, shutdown_grace_seconds=5
    )
    assert cfg.sidecar.flush_interval_seconds == 0.5  # the runtime's one release timer, no longer the source's
    (sink,) = cfg.sinks
    assert sink.cls is VectorSink and sink.config.outbox_name == "vector_downstream"
    assert cfg.source("grpc") is None  # a sources: list replaces serve's default grpc source


def test_registered_under_the_entry_point_groups() -> None:
    assert plugins(SOURCES)["vector"] is VectorSource
    assert plugins(SINKS)["vector"] is VectorSink
    assert plugins(CODECS)["vector"] is VectorCodec
    assert VectorCodec().format == "vector"  # the runtime builds registered codecs without arguments


@pytest.mark.parametrize(
    ("options", "key"),
    [
        ({"listen": "localhost"}, "listen"),
        ({"listen": "127.0.0.1:70000"}, "listen"),
        ({"tls_key_file": "k.pem"}, "tls_cert_file"),
    ],
)
def test_source_cross_field_rules(options: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigValueError) as err:
        VectorSourceConfig(**options)
    assert err.value.key == key


def test_sink_outbox_name_defaults_to_the_address(tmp_path: Path) -> None:
    """Without outbox_name the outbox is named after the address (two sinks to two Vectors never share one)."""
    path = tmp_path / "c.yaml"
    path.write_text("state_dir: state\nsinks:\n  - vector: {address: '10.0.0.5:6000'}\n", encoding="utf-8")
    from sidecar.pipeline import Pipeline

    pipeline = Pipeline(load_config(path), validate_only=True)
    try:
        (sink,) = pipeline.sinks
        assert isinstance(sink, VectorSink) and sink.outbox.name == "vector_10_0_0_5_6000"
    finally:
        pipeline.close()
    assert VectorSinkConfig().address == "127.0.0.1:6000"
