"""Every component's config files as an operator writes them: ``tests/<layer>/<component>/testdata/``.

``config.yaml`` is a complete, valid sidecar config that uses the component with several of its
options set: it loads and its chain and sinks build (``check-config``). ``config_invalid.yaml`` gives
the component bad values, each on a line marked ``# invalid``: every one is a ``ConfigError`` that
reads ``FILE:LINE: KEY: problem`` at its line, naming its key.
"""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import TEST_KEY, TEST_KEY_ENV
from helpers.configs import report_invalid_lines
from helpers.kb import kb_file

from sidecar.api import FILTERS, SINKS, SOURCES
from sidecar.config import LoadedConfig, load_config
from sidecar.pipeline import Pipeline
from sidecar.registry import plugin_origin, plugins

TESTS = Path(__file__).resolve().parent
VALID = sorted(TESTS.rglob("testdata/config.yaml"))
INVALID = sorted(TESTS.rglob("testdata/config_invalid.yaml"))


def folder(path: Path) -> str:
    """The component folder of a testdata file, relative to tests/ (``filters/drop``)."""
    return path.parent.parent.relative_to(TESTS).as_posix()


def configured(cfg: LoadedConfig) -> dict[str, list[dict[str, Any]]]:
    """The options written in the file for each configured component, by name (``grpc``: also the deprecated
    server section)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for key in ("sources", "filters", "sinks"):
        for item in cfg.doc.data.get(key) or ():
            ((name, options),) = item.items()
            out.setdefault(name, []).append(options or {})
    if "server" in cfg.doc.data:
        out["grpc"] = [cfg.doc.data["server"] or {}]
    return out


def test_config_files_come_in_pairs() -> None:
    """Every testdata folder with a config.yaml has a config_invalid.yaml and the other way round."""
    assert VALID, "no testdata/config.yaml under tests/"
    assert [p.parent for p in VALID] == [p.parent for p in INVALID]


def built_in(group: str) -> dict[str, Any]:
    """This project's registered components of an entry-point group (not third-party plugins), by name."""
    return {
        name: cls
        for name, cls in plugins(group).items()
        if plugin_origin(group, name).startswith(("filters.", "adapters."))
    }


def test_every_component_with_options_has_config_files() -> None:
    """Each built-in filter with options has tests/filters/<name>/testdata/, and each built-in source and sink with
    options is used in some testdata/config.yaml."""
    filters = built_in(FILTERS)
    assert {"drop", "hipaa_scrub", "classify"} <= set(filters)
    for name, cls in filters.items():
        if dataclasses.fields(cls.Config):
            assert TESTS / "filters" / name / "testdata" / "config.yaml" in VALID, name
    used = {name for path in VALID for name in configured(load_config(path))}
    sinks = built_in(SINKS)
    assert {"file", "stdout"} <= set(sinks)
    sources = built_in(SOURCES)
    assert {"grpc", "forward", "vector", "http"} <= set(sources)
    for name, cls in (*sinks.items(), *sources.items()):
        if dataclasses.fields(cls.Config):
            assert name in used, name


@pytest.mark.parametrize("path", VALID, ids=folder)
def test_valid_config_loads_and_builds(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """testdata/config.yaml, copied into tmp_path, loads with load_config, uses its folder's component with
    several options set, and builds its chain and sinks (Pipeline, as check-config does) with state in tmp_path."""
    monkeypatch.setenv(TEST_KEY_ENV, TEST_KEY)  # configs name this variable for HMAC keys, never a key
    config = tmp_path / "config.yaml"
    shutil.copy(path, config)
    cfg = load_config(config)
    component = path.parent.parent.name
    options = configured(cfg)
    assert component in options, f"{folder(path)}: config.yaml does not use {component}"
    spec = next(s for s in (*cfg.filters, *cfg.sinks, *cfg.sources) if s.name == component)
    wanted = min(2, len(dataclasses.fields(spec.cls.Config)))
    assert max(len(o) for o in options[component]) >= wanted, f"{component}: set several options"
    for f in cfg.filters:
        if f.name == "classify" and f.config.kb_path and not Path(f.config.kb_path).is_absolute():
            cfg.resolve(f.config.kb_path).symlink_to(kb_file())  # the session's KB where the config says
    assert cfg.state_dir.is_relative_to(tmp_path)
    Pipeline(cfg).close()
    assert cfg.state_dir.is_dir()


@pytest.mark.parametrize("path", INVALID, ids=folder)
def test_invalid_config_reports_each_value_at_its_line(path: Path) -> None:
    """Every line of testdata/config_invalid.yaml marked `# invalid` is a ConfigError `FILE:LINE: KEY: problem`
    at that line naming a key of a component written there (each reported line is blanked until the file loads)."""
    reported = report_invalid_lines(path, lambda p, text: load_config(p, text=text))
    for err in reported.values():
        assert err.key.startswith(("sources[", "filters[", "sinks[", "server.")), str(err)
