"""The package build's compiled part: the modules listed in pyproject.toml ``[tool.querylog] compiled``, compiled
with mypyc into extension modules beside their sources (everything else about the package is in pyproject.toml).

Used by every build: ``pip wheel .`` / ``pip install .`` (the image's wheel stage), ``pip install -e .`` and
``./run setup`` (``python setup.py build_ext --inplace``). Each module also works interpreted, so a build never
fails for want of a compiler: when mypyc is missing or fails, or a C compiler is missing or fails, the module
stays pure Python and the build log says so (``querylog-sidecar: NOT COMPILED ...``). ``QUERYLOG_COMPILE=0`` in
the environment builds no extension at all (a pure-Python wheel).

Beside each build goes ``<module>.mypyc.sha256``: the SHA-256 of the source it was compiled from, which
:mod:`sidecar.api.compiled` compares with the source beside it at import (an edited source never runs an old
build; file times cannot say it, as pip writes a wheel's files in any order).
"""

from __future__ import annotations

import hashlib
import os
import sys
import tomllib
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from typing import Any

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent
#: the suffix of the digest file written beside a module's build (sidecar/api/compiled.py reads it)
DIGEST_SUFFIX = ".mypyc.sha256"
#: extension attribute: the source (relative path) of the module an extension belongs to
SOURCE_ATTR = "_querylog_source"


def warn(message: str) -> None:
    """A line the build log shows whatever pip's verbosity (stderr), loud on purpose."""
    print(f"querylog-sidecar: NOT COMPILED: {message}", file=sys.stderr, flush=True)


def compiled_sources() -> list[str]:
    """The modules to compile: pyproject.toml ``[tool.querylog] compiled`` (paths relative to the root)."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        table = tomllib.load(f).get("tool", {}).get("querylog", {})
    sources = table.get("compiled", [])
    if not isinstance(sources, list) or not all(isinstance(s, str) and s.endswith(".py") for s in sources):
        raise SystemExit("pyproject.toml [tool.querylog] compiled: a list of module paths ending in .py")
    return sources


def source_digest(path: str | Path) -> str:
    """The SHA-256 (hex) of a source file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def remove_in_place_build(source: str) -> None:
    """Remove a module's build from beside its source (an extension module is imported in the source's place)."""
    stem = ROOT / source[: -len(".py")]
    for suffix in EXTENSION_SUFFIXES:
        for name in (f"{stem}{suffix}", f"{stem}__mypyc{suffix}"):
            Path(name).unlink(missing_ok=True)
    Path(f"{stem}{DIGEST_SUFFIX}").unlink(missing_ok=True)


#: mypy options of the build (after pyproject.toml [tool.mypy]): a build environment holds setuptools and mypy, not
#: the package's dependencies, so the type check that mypyc needs must not fail for them: imports of missing
#: packages are Any (what mypyc compiles as generic objects, always correct), the modules the compiled one imports
#: are read for their types with their errors not reported. The project's own mypy run (./run test) is the strict one.
BUILD_MYPY_OPTIONS = ["--follow-imports=silent", "--ignore-missing-imports", "--no-warn-unused-ignores"]

#: the modules mypyc did not translate (an in-place build removes their earlier builds)
NOT_TRANSLATED: list[str] = []


def mypyc_extensions(sources: list[str]) -> list[Extension]:
    """The extensions of each module mypyc translates (each its own library: one failing leaves the others)."""
    if os.environ.get("QUERYLOG_COMPILE", "1") == "0":
        warn("QUERYLOG_COMPILE=0: every module stays pure Python")
        NOT_TRANSLATED.extend(sources)
        return []
    try:
        from mypyc.build import mypycify
    except ImportError as e:
        warn(f"mypyc is not installed ({e}); every module stays pure Python")
        NOT_TRANSLATED.extend(sources)
        return []
    extensions: list[Extension] = []
    for source in sources:
        try:
            group = mypycify([*BUILD_MYPY_OPTIONS, source], separate=True)
        except (Exception, SystemExit) as e:  # mypyc reports type errors with SystemExit
            warn(f"mypyc failed on {source} ({type(e).__name__}: {e}); it stays pure Python")
            NOT_TRANSLATED.append(source)
            continue
        for ext in group:
            setattr(ext, SOURCE_ATTR, source)
        extensions.extend(group)
    return extensions


class OptionalBuildExt(build_ext):
    """build_ext where a module whose C does not build stays pure Python (its other outputs removed: a shim
    without its library would fail to import), and each built module gets its source digest beside it."""

    def run(self) -> None:
        """Build (in place or not), then write each built module's digest where its shim went."""
        self._failed: set[str] = set()
        self._in_place = bool(self.inplace)  # build_ext builds in build/ and copies after: remember where to clean
        if self._in_place:
            for source in NOT_TRANSLATED:
                remove_in_place_build(source)
        try:
            super().run()
        except Exception as e:  # no compiler at all, a broken toolchain: nothing compiled, the build goes on
            warn(f"the extensions could not be built ({type(e).__name__}: {e}); every module stays pure Python")
            self._failed.update(getattr(ext, SOURCE_ATTR, "") for ext in self.extensions)
            self._drop_failed()
            return
        for ext in self.extensions:
            source = getattr(ext, SOURCE_ATTR, None)
            if source is None or ext.name.endswith("__mypyc"):
                continue
            digest = Path(self.get_ext_fullpath(ext.name)).parent / (Path(source).stem + DIGEST_SUFFIX)
            digest.write_text(source_digest(ROOT / source) + "\n", encoding="ascii")

    def build_extensions(self) -> None:
        """Each module's extensions together: any failure drops the module (its built files removed)."""
        self.check_extensions_list(self.extensions)
        for ext in self.extensions:
            source = getattr(ext, SOURCE_ATTR, "")
            if source in self._failed:
                continue
            try:
                self.build_extension(ext)
            except Exception as e:  # CCompilerError, DistutilsExecError, a missing compiler...
                warn(f"the C build of {source or ext.name} failed ({type(e).__name__}: {e}); it stays pure Python")
                self._failed.add(source)
        self._drop_failed()

    def _drop_failed(self) -> None:
        """Remove the failed modules' extensions (and whatever of them was built) from this build."""
        keep: list[Any] = []
        build_py = self.get_finalized_command("build_py")
        for ext in self.extensions:
            source = getattr(ext, SOURCE_ATTR, "")
            if source in self._failed:
                built, in_place = (
                    Path(self.get_ext_fullpath(ext.name)),
                    Path(self._get_inplace_equivalent(build_py, ext)[0]),
                )
                built.unlink(missing_ok=True)
                if self._in_place:  # an earlier build in the tree would run in the source's place: gone too
                    in_place.unlink(missing_ok=True)
                    in_place.with_name(Path(source).stem + DIGEST_SUFFIX).unlink(missing_ok=True)
            else:
                keep.append(ext)
        self.extensions = keep


if __name__ == "__main__":
    setup(ext_modules=mypyc_extensions(compiled_sources()), cmdclass={"build_ext": OptionalBuildExt})
