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
import os
from importlib.machinery import EXTENSION_SUFFIXES

__all__ = ["DIGEST_SUFFIX", "compiled_and_current"]

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
