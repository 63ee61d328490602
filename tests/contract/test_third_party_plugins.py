"""A filter, a source, a sink and a codec written from the contract page alone, registered like the built-ins.

The example plugins (``example_plugins/querylog_examples_*.py``) import nothing of the
sidecar but ``sidecar.api``; they are installed as a distribution with entry points
(a ``dist-info`` folder on ``sys.path``, conftest.py) and run through the real runtime. The
network ones (a server source and a sink with an outbox) are run in test_network_plugins.py.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from sidecar.api import CODECS, SOURCES
from sidecar.config import ConfigError, load_config
from sidecar.pipeline import Pipeline
from sidecar.registry import plugins

#: The example plugin modules (installed with entry points by the ``installed`` fixture of conftest.py).
EXAMPLES = Path(__file__).with_name("example_plugins")
MODULES = ("querylog_examples_kv", "querylog_examples_net")


@pytest.mark.parametrize("module", MODULES)
def test_examples_import_only_the_contract(module: str) -> None:
    """An example plugin module imports the standard library and ``sidecar.api``, nothing else of ours."""
    tree = ast.parse((EXAMPLES / f"{module}.py").read_text(encoding="utf-8"))
    ours = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            ours.add(node.module)
        elif isinstance(node, ast.Import):
            ours.update(alias.name for alias in node.names)
    project = {m for m in ours if m.split(".")[0] in {"sidecar", "filters", "adapters", "knowledge"}}
    assert project == {"sidecar.api"}


@pytest.mark.usefixtures("installed")
def test_third_party_plugins_run_through_the_runtime(tmp_path: Path) -> None:
    """Source -> chain -> sink: digits redacted, a non-role field set through the codec, a bad record
    dead-lettered, an unchanged record written back byte for byte, and every record acknowledged."""
    (tmp_path / "in.kv").write_text(
        "user=1;query=call 555 1234;src=web\n"
        "user=2;query=weather;src=app\n"
        "garbage without pairs\n"
        "user=3;query=flight 714;src=web\n",
        encoding="utf-8",
    )
    config = tmp_path / "chain.yaml"
    config.write_text(
        "state_dir: state\n"
        "filters:\n  - redact_digits: {mark: '#', stamp_field: src}\n"
        "sinks:\n  - json_lines: {path: out.jsonl}\n",
        encoding="utf-8",
    )
    cfg = load_config(config)
    assert [s.name for s in cfg.filters] == ["redact_digits"]
    pipeline = Pipeline(cfg)
    try:
        source_cls = plugins(SOURCES)["lines"]
        source = source_cls(source_cls.Config(path="in.kv"), pipeline.ctx)
        source.start(pipeline)
        stats = pipeline.stats()
    finally:
        pipeline.close()
    out = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [o["query"] for o in out] == ["call ### ####", "weather", "flight ###"]
    assert [o["record"] for o in out] == [
        "user=1;query=call ### ####;src=redacted",
        "user=2;query=weather;src=app",  # unchanged: the input line itself
        "user=3;query=flight ###;src=redacted",
    ]
    assert source.acknowledged == 4
    assert stats["dead_letters"] == {"not_key_value": 1}
    assert stats["filters"][0]["counts"] == {"redacted": 2}
    assert plugins(CODECS)["kv"]().format == "kv"


@pytest.mark.usefixtures("installed")
def test_third_party_config_errors_are_located(tmp_path: Path) -> None:
    """A third-party config's own rule (``__post_init__``) is reported like a built-in's: FILE:LINE: KEY."""
    config = tmp_path / "bad.yaml"
    config.write_text("state_dir: state\nfilters:\n  - redact_digits:\n      mark: '##'\n", encoding="utf-8")
    with pytest.raises(ConfigError) as err:
        load_config(config)
    assert str(err.value).startswith(f"{config}:4: filters[0].redact_digits.mark: must be one character")
