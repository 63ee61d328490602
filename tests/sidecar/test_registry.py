"""The plugin registry loads a plugin the first time it is looked up, never all of a group at once."""

from __future__ import annotations

import subprocess
import sys

LOOKUP = """
import sys
from sidecar.registry import plugins
sinks = plugins("querylog.sinks")
assert "otlp" in sinks and "adapters.otlp.sink" not in sys.modules, "membership must not import"
assert sorted(sinks) and "adapters.s3.sink" not in sys.modules, "listing names must not import"
sinks["file"]
assert "adapters.file.sink" in sys.modules and "adapters.nats.sink" not in sys.modules
assert sinks["file"] is sinks["file"]
print("ok")
"""


def test_a_plugin_module_is_imported_when_it_is_looked_up_only() -> None:
    """A command imports the components it uses (each plugin module at start cost a replay about 0.1 s)."""
    run = subprocess.run([sys.executable, "-c", LOOKUP], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "ok"


def test_a_broken_plugin_names_itself_when_looked_up() -> None:
    """A plugin whose module cannot load is a PluginError naming it, raised where it is used."""
    from importlib.metadata import EntryPoint

    import pytest

    from sidecar.registry import PluginError, Plugins

    found = Plugins("querylog.sinks", {"broken": EntryPoint("broken", "no_such_module_q:Sink", "querylog.sinks")})
    assert "broken" in found and list(found) == ["broken"]
    with pytest.raises(PluginError, match="cannot load 'broken' from no_such_module_q:Sink: ModuleNotFoundError"):
        found["broken"]
