"""Whether a module runs compiled (mypyc) from its current source: for modules that are faster compiled and are
used differently (or not at all) when interpreted.

The builds come from setup.py (the modules of pyproject.toml ``[tool.querylog] compiled``): the wheel, the image,
``pip install -e .`` and ``./run setup``. Beside each build setup.py writes ``<module>.mypyc.sha256``, the SHA-256
of the source it compiled. An extension module is imported in place of its ``.py``, so a source edited after the
build would silently run the old build: the digest says so exactly (file times cannot: pip writes a wheel's files
in any order, and a rebuild whose C did not change keeps the old library).
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType

__all__ = ["DIGEST_SUFFIX", "EXTENSION_SUFFIX", "compiled_and_current", "current", "is_compiled", "source"]

#: the file suffix of this interpreter's extension modules (``.cpython-311-x86_64-linux-gnu.so``)
EXTENSION_SUFFIX = EXTENSION_SUFFIXES[0]
#: the digest file beside a build: ``scan.py`` compiled -> ``scan.mypyc.sha256`` (setup.py writes it)
DIGEST_SUFFIX = ".mypyc.sha256"


def compiled_and_current(module_file: str) -> bool:
    """True when the module at ``module_file`` (its ``__file__``) was loaded from an extension module (not a
    ``.py``, nor a sourceless ``.pyc``) built from the source beside it: the digest file beside the build holds
    the source's SHA-256; a build without a digest file (``mypyc path.py`` by hand) must not be older than the
    source; a build without its source is all there is."""
    suffix = next((s for s in EXTENSION_SUFFIXES if module_file.endswith(s)), None)
    if suffix is None:
        return False
    stem = module_file[: -len(suffix)]
    source = stem + ".py"
    try:
        with open(source, "rb") as f:
            actual = hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return True
    try:
        with open(stem + DIGEST_SUFFIX, "rb") as f:
            return f.read().strip() == actual.encode("ascii")
    except FileNotFoundError:
        pass
    except OSError:
        return False
    try:
        return os.stat(source).st_mtime <= os.stat(module_file).st_mtime
    except OSError:
        return False


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
    (:func:`compiled_and_current`); else (a build older than an edit) its source: never outdated code. For a
    module used the same way compiled or not (a module used only compiled asks :func:`compiled_and_current`)."""
    file = built.__file__ or ""
    return built if file.endswith(".py") or compiled_and_current(file) else source(built)


def is_compiled(module: ModuleType) -> bool:
    """True when ``module`` runs from an extension module (not a ``.py``)."""
    return not (module.__file__ or "").endswith((".py", ".pyc"))
