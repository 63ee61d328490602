"""Dependencies point one way (DESIGN.md, the contract page): every import in the code, lazy ones included.

Layers, bottom up:

* ``sidecar.api`` — the contract: imports nothing of ours but its own modules.
* the runtime (``sidecar`` without ``sidecar.cli`` and ``sidecar.tools``) — imports the runtime only:
  never a filter, an adapter, the knowledge base, the CLI or a tool.
* ``knowledge`` — the shared knowledge base: the runtime and itself.
* a plugin component (a module of ``filters.<name>`` or ``adapters.<name>``) — what the contract page allows:
  ``sidecar.api`` (the shared option types included), its own package, the knowledge base, and the few shared
  services of :data:`SHARED_SERVICES`, each listed with its reason; never another plugin, never the rest of
  the runtime. A shared service itself imports only the contract and other shared services (listed exceptions
  in :data:`SERVICE_EXCEPTIONS`), so a plugin depends on the contract alone.
* a driver shipped in a plugin package (:data:`DRIVERS`: its CLI commands, the partitioned replay, the batch
  microaggregation tool) — the runtime, the knowledge base and its own package: a driver builds runtimes.
* ``sidecar.cli`` — the runtime and itself; commands come from the ``querylog.commands`` entry points.
* ``sidecar.tools`` — offline tools on top of everything; nothing else imports them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import ROOT

TOP = ("sidecar", "knowledge", "filters", "adapters")
#: Runtime modules a plugin component may import besides the contract, and why each is shared rather than on the
#: contract page.
SHARED_SERVICES: dict[str, str] = {
    "sidecar.serving": "the one host for asynchronous servers: a source keeps only its protocol handlers (issue 23)",
    "sidecar.boundedhttp": "aiohttp's server with max_connections, for the sources that serve HTTP (http, otlp)",
    "sidecar.grpcauth": "the bearer-token interceptor every gRPC-based server (grpc, vector) checks calls with",
    "sidecar.protowire": "protobuf wire scanning (count and size events before parsing) for the gRPC and Vector codecs",
    "sidecar.netsink": "the HTTP client, line batching and payload dead-lettering of the HTTP-based sinks",
    "sidecar.codecs": "the text codecs (TSV, JSON lines) that line-based formats (file, HTTP) read and write with",
    "sidecar.textcodecs": "text formats by name (TSV, JSON lines, a plugin's access_log) for the file source and sink",
    "sidecar.records": "the framing rule of text outputs and a record rebuilt for another format, for every encoder",
    "sidecar.objectrecords": "a protocol's records read as JSON objects by the schema's codec (format: ubi), for "
    "the sources of structured protocols (vector, otlp) and the check of those that cannot carry them (grpc)",
    "sidecar.failures": "a failed batch's outcome for a client (busy, unavailable, internal), one for all servers",
}
#: Shared services that reach further into the runtime, and why.
SERVICE_EXCEPTIONS: dict[str, set[str]] = {
    # a failed batch's outcome depends on the runtime's own errors: a full outbox, a state database, a sink
    "sidecar.failures": {"sidecar.outbox", "sidecar.state"},
    # a text format other than TSV and JSON lines (access_log) is a codec registered under querylog.codecs
    "sidecar.textcodecs": {"sidecar.registry"},
}
#: Plugin component modules that import more than the contract and the shared services, and why.
PLUGIN_EXCEPTIONS: dict[str, set[str]] = {
    # the file source reports a header that does not name the role columns as a config error located in the input
    # file itself (FILE:1: header: ...), which ConfigError carries
    "adapters.file.reader": {"sidecar.config"},
    # the grpc source's own metrics_listen, kept for configs that set it (serve's sidecar.metrics_listen is the one)
    "adapters.grpc.source": {"sidecar.metrics"},
    # the nats publisher routes users with the one partition function of `replay --workers` (same key, same
    # ranges), so a user's events land on the partition whose replica holds the user's state
    "adapters.nats.partition": {"adapters.file.scale.partition"},
}
#: Driver modules shipped in plugin packages: they build runtimes (commands, the partitioned replay, batch tools).
DRIVERS = ("adapters.file.scale", "adapters.microaggregate")


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


def _is_driver(module: str) -> bool:
    return _within(module, DRIVERS) or module.endswith(".commands") or ".commands." in module


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
    if importer in SHARED_SERVICES:
        return _within(imported, ("sidecar.api", *SHARED_SERVICES, *SERVICE_EXCEPTIONS.get(importer, ())))
    if top == "sidecar":
        return _is_runtime(imported)
    if top == "knowledge":
        return _is_runtime(imported) or imported.split(".")[0] == "knowledge"
    own = ".".join(importer.split(".")[:2])
    if top in ("filters", "adapters") and _is_driver(importer):
        return _is_runtime(imported) or _within(imported, ("knowledge", own))
    if top in ("filters", "adapters"):
        extra = PLUGIN_EXCEPTIONS.get(importer, set())
        return _within(imported, ("sidecar.api", *SHARED_SERVICES, *extra, "knowledge", own))
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
    "adapters/b/__init__.py": (
        "from sidecar.api import Source\nfrom sidecar.serving import ServerHost\nfrom adapters.b import c\n"
    ),
    "adapters/b/c.py": "",
    "adapters/b/commands.py": "from sidecar.pipeline import Pipeline\nfrom adapters.b import c\n",
    "sidecar/serving.py": "from sidecar.api import Listen\n",
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
        ("adapters/b/c.py", "from sidecar.pipeline import Pipeline\n", "adapters.b.c -> sidecar.pipeline"),
        ("adapters/b/c.py", "from sidecar import state\n", "adapters.b.c -> sidecar.state"),
        ("filters/a/x.py", "from sidecar.outbox import Outbox\n", "filters.a.x -> sidecar.outbox"),
        ("sidecar/serving.py", "from sidecar.pipeline import Pipeline\n", "sidecar.serving -> sidecar.pipeline"),
        ("adapters/b/commands.py", "from adapters.d import e\n", "adapters.b.commands -> adapters.d"),
    ],
)
def test_the_checker_fails_a_reversed_arrow(tmp_path: Path, file: str, line: str, arrow: str) -> None:
    """The checker itself: one import pointing the wrong way (even inside a function) is reported."""
    files = dict(CLEAN)
    files[file] = files.get(file, "") + line
    found = violations(_tree(tmp_path, files))
    assert [v.split(" (")[0] for v in found] == [arrow]


def test_every_listed_exception_is_still_needed() -> None:
    """An exception in the lists above names an import that exists: a stale one would hide a future violation."""
    for importer, imported in PLUGIN_EXCEPTIONS.items():
        path = ROOT.joinpath(*importer.split(".")).with_suffix(".py")
        assert imported <= imports_of(ROOT, path), f"{importer} no longer imports {sorted(imported)}: drop it"
    for service, imported in SERVICE_EXCEPTIONS.items():
        path = ROOT.joinpath(*service.split(".")).with_suffix(".py")
        assert imported <= imports_of(ROOT, path), f"{service} no longer imports {sorted(imported)}: drop it"
    for service in SHARED_SERVICES:
        assert ROOT.joinpath(*service.split(".")).with_suffix(".py").is_file(), f"{service} is gone: drop it"
