"""The pipeline examples (config/examples/*/querylog*.yaml) load and build as `check-config` does; the peers'
files they rely on are there (Fluent Bit's parsers); a source that authenticates nobody listens on loopback."""

from __future__ import annotations

import ipaddress
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from helpers import QUERYLOG, ROOT

FOLDER = ROOT / "config" / "examples"
EXAMPLES = sorted(FOLDER.glob("*/querylog.yaml"))
#: Every sidecar config of the examples: each setup's querylog.yaml and its variants (querylog-*.yaml).
CONFIGS = sorted(FOLDER.glob("*/querylog*.yaml"))
ENV = {"QUERYLOG_HMAC_KEY": "an-example-key-of-enough-bytes", "FORWARD_SHARED_KEY": "an-example-shared-key-0123"}
#: Source options by which a client proves who it is (a token, a client certificate, the forward shared key).
AUTH_KEYS = {"auth_token_file", "auth_token_env", "tls_client_ca_file", "shared_key_env", "shared_key_file"}


def test_there_is_an_example_per_setup_the_readme_names() -> None:
    assert {p.parent.name for p in EXAMPLES} == {"fluent-bit", "fluentd", "vector", "clickhouse"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.parent.name)
def test_example_config_checks(path: Path) -> None:
    env = {**os.environ, **ENV}
    run = subprocess.run([QUERYLOG, "check-config", str(path)], capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(FOLDER)))
def test_every_example_config_checks_strictly(path: Path) -> None:
    """Each sidecar config of the examples, variants included, passes `check-config --strict`."""
    run = subprocess.run(
        [QUERYLOG, "check-config", "--strict", str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, **ENV},
        timeout=60,
    )
    assert run.returncode == 0, run.stderr


def test_the_loopback_variant_is_the_keyed_config_without_the_source_key() -> None:
    """fluent-bit/querylog-loopback.yaml differs from querylog.yaml only by its source: no shared key, and it
    listens on loopback; the README names the clients that can send a key and the one that cannot."""
    keyed = yaml.safe_load((FOLDER / "fluent-bit" / "querylog.yaml").read_text(encoding="utf-8"))
    loopback = yaml.safe_load((FOLDER / "fluent-bit" / "querylog-loopback.yaml").read_text(encoding="utf-8"))
    assert {k: v for k, v in keyed.items() if k != "sources"} == {k: v for k, v in loopback.items() if k != "sources"}
    [source] = loopback["sources"]
    [(name, options)] = source.items()
    assert name == "forward" and not AUTH_KEYS & set(options)
    assert "shared_key_env" in keyed["sources"][0]["forward"]
    readme = (FOLDER / "README.md").read_text(encoding="utf-8")
    for client in ("Fluent Bit", "Fluentd", "@fluent-org/logger", "fluent-logger", "querylog-loopback.yaml"):
        assert client in readme, client


@pytest.mark.parametrize("path", CONFIGS, ids=lambda p: str(p.relative_to(FOLDER)))
def test_a_source_that_authenticates_nobody_listens_on_loopback(path: Path) -> None:
    """An example never opens a port to anyone beyond the host: a network source without a token, client
    certificates or a shared key listens on a loopback address."""
    for source in yaml.safe_load(path.read_text(encoding="utf-8")).get("sources", []):
        [(name, options)] = source.items()
        if "listen" in options and not AUTH_KEYS & set(options):
            host = options["listen"].rpartition(":")[0].strip("[]")
            assert ipaddress.ip_address(host).is_loopback, f"{name} listens on {options['listen']} for anyone"


def _sections(text: str) -> list[tuple[str, dict[str, str]]]:
    """The sections of a Fluent Bit classic config, in order: (name, {key: value}); comments left out."""
    out: list[tuple[str, dict[str, str]]] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if m := re.fullmatch(r"\[(\w+)\]", line):
            out.append((m.group(1).upper(), {}))
        else:
            key, _, value = line.partition(" ")
            out[-1][1][key.lower()] = value.strip()
    return out


def test_fluent_bit_parsers_are_defined() -> None:
    """Every parser an input of fluent-bit.conf names is defined in the Parsers_File its [SERVICE] gives
    (a relative path: beside fluent-bit.conf); the `json` parser reads JSON and keeps every key (no Time_Key)."""
    conf = FOLDER / "fluent-bit" / "fluent-bit.conf"
    sections = _sections(conf.read_text(encoding="utf-8"))
    [service] = [options for name, options in sections if name == "SERVICE"]
    parsers_file = conf.parent / service["parsers_file"]
    parsers = {
        options["name"]: options
        for name, options in _sections(parsers_file.read_text(encoding="utf-8"))
        if name == "PARSER"
    }
    named = {options["parser"] for name, options in sections if name == "INPUT" and "parser" in options}
    assert named == {"json"}
    assert named <= set(parsers)
    assert parsers["json"]["format"] == "json" and "time_key" not in parsers["json"]
