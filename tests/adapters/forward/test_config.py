"""Options of the forward source and sink as an operator writes them (testdata/), secrets from env or files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from helpers import TEST_KEY, TEST_KEY_ENV
from helpers.configs import report_invalid_lines

from adapters.forward.config import ForwardSinkConfig, ForwardSourceConfig
from adapters.forward.sink import ForwardSink
from adapters.forward.source import ForwardSource
from sidecar.api import SINKS, SOURCES, BuildContext, ConfigValueError
from sidecar.config import ConfigError, load_config
from sidecar.config.loader import describe_config
from sidecar.registry import plugins

TESTDATA = Path(__file__).resolve().parent / "testdata"


def test_source_invalid_values_are_reported_at_their_lines() -> None:
    """Every line of testdata/source_invalid.yaml marked `# invalid` is a ConfigError FILE:LINE: KEY: problem
    naming a key of the forward source."""
    reported = report_invalid_lines(TESTDATA / "source_invalid.yaml", lambda p, text: load_config(p, text=text))
    for err in reported.values():
        assert err.key.startswith("sources[0].forward."), str(err)
    texts = " ".join(str(e) for e in reported.values())
    assert "x y" not in texts  # a pasted secret is never echoed


def test_the_valid_config_builds_the_source_and_the_sink(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """testdata/config.yaml: the source builds with its shared key from the environment; the sink too."""
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)
    shutil.copy(TESTDATA / "config.yaml", tmp_path / "config.yaml")
    cfg = load_config(tmp_path / "config.yaml")
    spec = cfg.source("forward")
    assert spec is not None and isinstance(spec.config, ForwardSourceConfig)
    source = ForwardSource(spec.config, BuildContext(config_dir=tmp_path))
    assert source.shared_key == TEST_KEY.encode() and source.self_hostname == "sidecar-in"
    (sink_spec,) = cfg.sinks
    sink = ForwardSink(sink_spec.config, BuildContext(config_dir=tmp_path, validate_only=True))
    assert sink.outbox is None  # check-config: nothing is created


def test_secrets_come_from_env_or_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A named variable that is not set, or a file that cannot be read, is an error on that option's key; a file
    is read (trailing newline stripped) relative to the config folder."""
    ctx = BuildContext(config_dir=tmp_path)
    monkeypatch.delenv("FWD_NOT_SET", raising=False)
    with pytest.raises(ConfigValueError) as err:
        ForwardSource(ForwardSourceConfig(shared_key_env="FWD_NOT_SET"), ctx)
    assert err.value.key == "shared_key_env"
    with pytest.raises(ConfigValueError) as err:
        ForwardSink(
            ForwardSinkConfig(shared_key_file="missing.key"), BuildContext(config_dir=tmp_path, validate_only=True)
        )
    assert err.value.key == "shared_key_file"
    (tmp_path / "key").write_text("from-a-file-0123456789\n")
    src = ForwardSource(ForwardSourceConfig(shared_key_file="key"), ctx)
    assert src.shared_key == b"from-a-file-0123456789"


@pytest.mark.parametrize("side", ["source", "sink"])
def test_a_shared_key_under_16_bytes_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, side: str) -> None:
    """A guessable shared key proves nothing: under 16 bytes is an error on its key (the value never shown),
    as for pseudonymize's HMAC key (issue 24 item 20)."""
    monkeypatch.setenv("FWD_SHORT_KEY", "k")
    ctx = BuildContext(config_dir=tmp_path, validate_only=True)
    with pytest.raises(ConfigValueError) as err:
        if side == "source":
            ForwardSource(ForwardSourceConfig(shared_key_env="FWD_SHORT_KEY"), ctx)
        else:
            ForwardSink(ForwardSinkConfig(shared_key_env="FWD_SHORT_KEY"), ctx)
    assert err.value.key == "shared_key_env"
    assert "at least 16" in err.value.problem and "'k'" not in err.value.problem


def test_a_bad_certificate_is_a_config_error(tmp_path: Path) -> None:
    """TLS files that do not load are reported on tls_cert_file (the file's content is never shown)."""
    (tmp_path / "c.pem").write_text("not a certificate")
    cfg = ForwardSourceConfig(tls_cert_file="c.pem", tls_key_file="c.pem")
    with pytest.raises(ConfigValueError) as err:
        ForwardSource(cfg, BuildContext(config_dir=tmp_path))
    assert err.value.key == "tls_cert_file" and "not a certificate" not in err.value.problem


def test_every_option_is_documented_and_registered() -> None:
    """Both components are registered as `forward` and every option (nested users too) has a doc string."""
    assert plugins(SOURCES)["forward"] is ForwardSource
    assert plugins(SINKS)["forward"] is ForwardSink

    def walk(options: list[dict[str, object]]) -> None:
        for opt in options:
            assert opt["doc"], opt["key"]
            walk(opt.get("options", []))

    walk(describe_config(ForwardSourceConfig))
    walk(describe_config(ForwardSinkConfig))


def test_cross_field_rules() -> None:
    """Users need a shared key; a username needs a password; both TLS files or none."""
    with pytest.raises(ConfigError, match="shared key"):
        load_config(
            "x.yaml",
            text="sources:\n  - forward: {users: [{username: a, password_env: P}]}\n",
        )
    with pytest.raises(ConfigError, match="password"):
        load_config("x.yaml", text="sinks:\n  - forward: {username: a, shared_key_env: K}\n")
    with pytest.raises(ConfigError, match="tls_key_file"):
        load_config("x.yaml", text="sources:\n  - forward: {tls_cert_file: c.pem}\n")
