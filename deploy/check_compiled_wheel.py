"""Check that a wheel carries a current compiled build of every module in pyproject.toml ``[tool.querylog]
compiled``: an extension module (mypyc's shim and its library) and the digest of the very source beside them.

    python deploy/check_compiled_wheel.py dist/querylog_sidecar-*.whl

The image's wheel stage runs it (deploy/Dockerfile): a C compiler is there, so a module left pure Python is a
broken build, not the fallback a build without a compiler takes. Exit 0, or 1 naming what is missing.
Standard library only (the wheel stage's Python has nothing else).
"""

from __future__ import annotations

import hashlib
import sys
import tomllib
import zipfile
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
DIGEST_SUFFIX = ".mypyc.sha256"  # setup.py writes it, sidecar/api/compiled.py reads it


def compiled_modules(pyproject: Path = PYPROJECT) -> list[str]:
    """The sources listed in ``[tool.querylog] compiled`` (``adapters/otlp/scan.py``...)."""
    with open(pyproject, "rb") as f:
        sources: list[str] = tomllib.load(f)["tool"]["querylog"]["compiled"]
    return sources


def problems(wheel: Path, sources: list[str]) -> list[str]:
    """What the wheel lacks: per module, a missing shim, library or digest, or a digest of another source."""
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        found: list[str] = []
        for source in sources:
            stem = source[: -len(".py")]
            shims = [n for n in names if n.startswith(stem + ".cpython-") and n.endswith(".so")]
            libraries = [n for n in names if n.startswith(stem + "__mypyc.cpython-") and n.endswith(".so")]
            digest = stem + DIGEST_SUFFIX
            if not shims or not libraries:
                found.append(f"{source}: no compiled build in the wheel (shim {shims}, library {libraries})")
            elif digest not in names or source not in names:
                found.append(f"{source}: no {digest} or no source beside the build")
            elif archive.read(digest).decode("ascii").strip() != hashlib.sha256(archive.read(source)).hexdigest():
                found.append(f"{source}: the build is of another source (digest mismatch)")
    return found


def main(argv: list[str]) -> int:
    """``argv``: one wheel path. Prints what is missing; 1 if anything is, else 0."""
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    wheel = Path(argv[0])
    sources = compiled_modules()
    found = problems(wheel, sources)
    for line in found:
        print(f"{wheel.name}: {line}", file=sys.stderr)
    if not found:
        print(f"{wheel.name}: compiled: {', '.join(sources)}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
