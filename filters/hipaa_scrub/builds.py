"""The scrubber's modules that may run compiled (mypyc): :mod:`.engine` (the per-query loop) and
:mod:`.detectors.prechecks` (the word pre-checks and the cue scan). Both are pure and give the same results either
way; compiled they run faster. An extension module is imported in place of its ``.py``, so a build older than an edit
of its source would run the old code: :func:`current` gives the source's module then."""

from __future__ import annotations

import importlib.util
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType

from sidecar.api.compiled import compiled_and_current

COMPILED = ("filters/hipaa_scrub/engine.py", "filters/hipaa_scrub/detectors/prechecks.py")
"""The modules a build may compile (pyproject.toml ``[tool.querylog] compiled`` lists those that are)."""
EXTENSION_SUFFIX = EXTENSION_SUFFIXES[0]
"""The file suffix of this interpreter's extension modules (``.cpython-311-x86_64-linux-gnu.so``)."""


def source(built: ModuleType) -> ModuleType:
    """The module of ``built``'s source file, loaded apart as ``<name>_source``: the interpreted module, whatever
    build of it ``import`` found."""
    name = built.__name__ + "_source"
    if name in sys.modules:
        return sys.modules[name]
    path = Path(built.__file__ or "").with_name(built.__name__.rpartition(".")[2] + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: cannot load the module's source")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def current(built: ModuleType) -> ModuleType:
    """``built`` (as imported) when it is its ``.py`` or a compiled build of that very source
    (:mod:`sidecar.api.compiled`); else (a build older than an edit) its source: never outdated code."""
    file = built.__file__ or ""
    return built if file.endswith(".py") or compiled_and_current(file) else source(built)


def is_compiled(module: ModuleType) -> bool:
    """True when ``module`` runs from an extension module (not a ``.py``)."""
    return not (module.__file__ or "").endswith((".py", ".pyc"))
