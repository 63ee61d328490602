"""setup.py's compiled modules built as the image's wheel stage builds them (a Python with none of the package's
dependencies: mypyc's type check must not need them), and when things go wrong: without a C compiler the wheel
still builds (pure Python, the log says NOT COMPILED); in place (``./run setup``'s ``setup.py build_ext
--inplace``) a build follows its source: an edited source is not run compiled, a failed rebuild (a type error, no
compiler) removes the old build so the source runs."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

import pytest

from tests.packaging.wheelkit import ROOT, copy_source

pytestmark = pytest.mark.slow

SCAN = "adapters/otlp/scan.py"
PROBE = "import adapters.otlp.scan as s; print(s.__file__.rsplit('/', 1)[1], s.COMPILED)"
BUILT = f"scan{EXTENSION_SUFFIXES[0]}"  # the module's file when it runs compiled
NO_COMPILER = {"CC": "/bin/false"}  # a compiler that fails every call (as good as none: the build must go on)


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run a command in cwd with os.environ plus env; its CompletedProcess."""
    return subprocess.run(args, cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv with nothing but pip (the image's wheel stage: python:3.11-slim, no dependency installed)."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    return venv / "bin" / "python"


def build_wheel(python: Path, tmp_path: Path, env: dict[str, str] | None = None) -> tuple[Path, str]:
    """``pip wheel -v --no-deps`` of a copy of the working tree with ``python``: the wheel and pip's output."""
    source = copy_source(tmp_path / "src")
    dist = tmp_path / "dist"
    built = run([str(python), "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(dist), str(source)], tmp_path, env)
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    (wheel,) = dist.glob("querylog_sidecar-*.whl")
    return wheel, built.stdout + built.stderr


def check_wheel(wheel: Path) -> subprocess.CompletedProcess[str]:
    """deploy/check_compiled_wheel.py on the wheel (the image's wheel stage runs it)."""
    return run([sys.executable, str(ROOT / "deploy" / "check_compiled_wheel.py"), str(wheel)], wheel.parent)


def test_a_python_without_the_dependencies_builds_the_wheel_compiled(bare_python: Path, tmp_path: Path) -> None:
    wheel, log = build_wheel(bare_python, tmp_path)
    assert "NOT COMPILED" not in log
    check = check_wheel(wheel)
    assert check.returncode == 0, check.stderr
    assert wheel.name.endswith("-linux_x86_64.whl")


def test_without_a_c_compiler_the_wheel_is_pure_python_and_the_log_says_so(bare_python: Path, tmp_path: Path) -> None:
    wheel, log = build_wheel(bare_python, tmp_path, NO_COMPILER)
    assert f"querylog-sidecar: NOT COMPILED: the C build of {SCAN} failed" in log
    names = zipfile.ZipFile(wheel).namelist()
    assert SCAN in names and not [n for n in names if n.endswith((".so", ".mypyc.sha256"))]
    check = check_wheel(wheel)
    assert check.returncode == 1 and "no compiled build" in check.stderr


def test_an_in_place_build_follows_its_source(tmp_path: Path) -> None:
    """Build in place (mypy from this venv, as ./run setup does); the module runs compiled. Edit the source: not
    compiled any more (its old build is not used). Rebuild without a compiler: the old build is removed, NOT
    COMPILED is said, the source runs. Rebuild with the compiler: compiled again. A type error: mypyc fails, the
    old build is removed, the source runs."""
    tree = copy_source(tmp_path / "src")
    build = [sys.executable, "setup.py", "build_ext", "--inplace"]
    probe = [sys.executable, "-c", PROBE]

    assert run(build, tree).returncode == 0
    assert run(probe, tree).stdout.split() == [BUILT, "True"]

    digest = tree / "adapters/otlp/scan.mypyc.sha256"
    assert digest.is_file()

    with (tree / SCAN).open("a", encoding="utf-8") as f:
        f.write("\n\ndef _edited() -> int:\n    return 1\n")
    assert run(probe, tree).stdout.split() == [BUILT, "False"]

    failed = run(build, tree, NO_COMPILER)
    assert failed.returncode == 0, failed.stderr[-3000:]
    assert f"NOT COMPILED: the C build of {SCAN} failed" in failed.stderr
    assert run(probe, tree).stdout.split() == ["scan.py", "False"]
    assert not list((tree / "adapters/otlp").glob("scan*.so")) and not digest.exists()

    assert run(build, tree).returncode == 0
    assert run(probe, tree).stdout.split() == [BUILT, "True"]

    with (tree / SCAN).open("a", encoding="utf-8") as f:
        f.write("\n\ndef _mistyped() -> int:\n    return 'one'\n")
    failed = run(build, tree)
    assert failed.returncode == 0, failed.stderr[-3000:]
    assert f"NOT COMPILED: mypyc failed on {SCAN}" in failed.stderr
    assert run(probe, tree).stdout.split() == ["scan.py", "False"]
    assert not list((tree / "adapters/otlp").glob("scan*.so")) and not digest.exists()
