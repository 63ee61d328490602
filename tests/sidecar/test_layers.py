"""Dependencies point one way (DESIGN.md): every import in the code, lazy ones included, is checked.

Layers, bottom up:

* ``sidecar.api`` — the contract: imports nothing of ours but its own modules.
* the runtime (``sidecar`` without ``sidecar.cli`` and ``sidecar.tools``) — imports the runtime only:
  never a filter, an adapter, the knowledge base, the CLI or a tool.
* ``knowledge`` — the shared knowledge base: the runtime and itself.
* a filter (``filters.<name>``) — the contract, the runtime services a plugin may use (codecs, config,
  command helpers, state store, logs), the knowledge base, and its own package: never another filter or
  an adapter.
* an adapter (``adapters.<name>``) — the runtime, the knowledge base and its own package: never another
  adapter or a filter.
* ``sidecar.cli`` — the runtime and itself; commands come from the ``querylog.commands`` entry points.
* ``sidecar.tools`` — offline tools on top of everything; nothing else imports them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import ROOT

TOP = ("sidecar", "knowledge", "filters", "adapters")
#: Runtime modules a filter may import besides the contract.
PLUGIN_SERVICES = (
    "sidecar.api",
    "sidecar.codecs",
    "sidecar.config",
    "sidecar.commandkit",
    "sidecar.state",
    "sidecar.logs",
)


def _module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(root: Path, dotted: str) -> bool:
    base = root.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def imports_of(root: Path, path: Path) -> set[str]:
    """Our modules imported by the file ``path`` (``from a import b`` counts as ``a.b`` when b is a module)."""
    name = _module_name(root, path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if _is_module(root, sub) else base)
    return {m for m in found if m.split(".")[0] in TOP}


def _within(module: str, prefixes: tuple[str, ...]) -> bool:
    return any(module == p or module.startswith(p + ".") for p in prefixes)


def _is_runtime(module: str) -> bool:
    return module.split(".")[0] == "sidecar" and not _within(module, ("sidecar.cli", "sidecar.tools"))


def allowed(importer: str, imported: str) -> bool:
    """May module ``importer`` import module ``imported``?"""
    top = importer.split(".")[0]
    if _within(imported, ("sidecar.tools",)):
        return _within(importer, ("sidecar.tools",))
    if _within(importer, ("sidecar.api",)):
        return _within(imported, ("sidecar.api",))
    if _within(importer, ("sidecar.tools",)):
        return True
    if _within(importer, ("sidecar.cli",)):
        return _is_runtime(imported) or _within(imported, ("sidecar.cli",))
    if top == "sidecar":
        return _is_runtime(imported)
    if top == "knowledge":
        return _is_runtime(imported) or imported.split(".")[0] == "knowledge"
    own = ".".join(importer.split(".")[:2])
    if top == "filters":
        return _within(imported, (*PLUGIN_SERVICES, "knowledge", own))
    if top == "adapters":
        return _is_runtime(imported) or _within(imported, ("knowledge", own))
    return False


def violations(root: Path) -> list[str]:
    """Every import that points the wrong way, as ``importer -> imported (file)``."""
    out = []
    for top in TOP:
        for path in sorted((root / top).rglob("*.py")):
            importer = _module_name(root, path)
            out += [
                f"{importer} -> {imported} ({path.relative_to(root)})"
                for imported in sorted(imports_of(root, path))
                if not allowed(importer, imported)
            ]
    return out


def test_every_import_points_down() -> None:
    """No module of sidecar/, knowledge/, filters/ or adapters/ imports a layer above it or a sibling plugin."""
    assert violations(ROOT) == []


def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for top in TOP:
        (tmp_path / top).mkdir(exist_ok=True)
    return tmp_path


CLEAN = {
    "sidecar/__init__.py": "",
    "sidecar/api/__init__.py": "import os\nfrom sidecar.api.events import Event\n",
    "sidecar/api/events.py": "",
    "sidecar/pipeline.py": "from sidecar.api import Event\nfrom sidecar import state\n",
    "sidecar/state.py": "",
    "sidecar/cli/__init__.py": "from sidecar.pipeline import Pipeline\n",
    "sidecar/tools/__init__.py": "",
    "sidecar/tools/bench.py": "from filters.a.x import y\nfrom adapters.b import z\n",
    "knowledge/__init__.py": "from sidecar.api import Event\n",
    "filters/__init__.py": "",
    "filters/a/__init__.py": "from .x import y\nfrom knowledge import kb\nfrom sidecar.api import Filter\n",
    "filters/a/x.py": "",
    "adapters/__init__.py": "",
    "adapters/b/__init__.py": "from sidecar.pipeline import Pipeline\nfrom adapters.b import c\n",
    "adapters/b/c.py": "",
}


def test_the_checker_passes_a_clean_tree(tmp_path: Path) -> None:
    """The checker itself: a tree whose arrows all point down has no violations (relative imports resolved)."""
    assert violations(_tree(tmp_path, CLEAN)) == []


@pytest.mark.parametrize(
    ("file", "line", "arrow"),
    [
        ("sidecar/pipeline.py", "from filters.a import x\n", "sidecar.pipeline -> filters.a.x"),
        ("sidecar/state.py", "def f():\n    import adapters.b\n", "sidecar.state -> adapters.b"),
        ("sidecar/api/events.py", "from sidecar import state\n", "sidecar.api.events -> sidecar.state"),
        ("sidecar/pipeline.py", "from sidecar.cli import main\n", "sidecar.pipeline -> sidecar.cli"),
        ("knowledge/__init__.py", "from filters.a import x\n", "knowledge -> filters.a.x"),
        ("filters/a/x.py", "from adapters.b import c\n", "filters.a.x -> adapters.b.c"),
        ("filters/a/x.py", "from filters.z import q\n", "filters.a.x -> filters.z"),
        ("filters/a/x.py", "from sidecar.pipeline import Pipeline\n", "filters.a.x -> sidecar.pipeline"),
        ("adapters/b/c.py", "from adapters.d import e\n", "adapters.b.c -> adapters.d"),
        ("adapters/b/c.py", "from ...filters.a import x\n", "adapters.b.c -> filters.a.x"),
        ("sidecar/cli/__init__.py", "from sidecar.tools import bench\n", "sidecar.cli -> sidecar.tools.bench"),
    ],
)
def test_the_checker_fails_a_reversed_arrow(tmp_path: Path, file: str, line: str, arrow: str) -> None:
    """The checker itself: one import pointing the wrong way (even inside a function) is reported."""
    files = dict(CLEAN)
    files[file] = files.get(file, "") + line
    found = violations(_tree(tmp_path, files))
    assert [v.split(" (")[0] for v in found] == [arrow]
