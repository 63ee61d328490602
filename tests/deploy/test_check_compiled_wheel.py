"""deploy/check_compiled_wheel.py, which the image's wheel stage runs: it passes a wheel that carries a current
compiled build of every listed module and names what is wrong with any other (synthetic wheels: fast)."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import zipfile
from importlib import util
from pathlib import Path

import pytest

from tests.deploy.dockerfile import ROOT

CHECK = ROOT / "deploy" / "check_compiled_wheel.py"
SOURCE = "adapters/otlp/scan.py"
SHIM = "adapters/otlp/scan.cpython-311-x86_64-linux-gnu.so"
LIBRARY = "adapters/otlp/scan__mypyc.cpython-311-x86_64-linux-gnu.so"
DIGEST = "adapters/otlp/scan.mypyc.sha256"
CODE = b"def f() -> int:\n    return 1\n"


def wheel(tmp_path: Path, members: dict[str, bytes]) -> Path:
    """A zip named like the project's wheel with these members."""
    path = tmp_path / "querylog_sidecar-0.1.0-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def good() -> dict[str, bytes]:
    """A current build of every listed module (pyproject.toml [tool.querylog] compiled), SOURCE's by name."""
    import setup  # the repository's setup.py (the root is on sys.path): importing it builds nothing

    members = {SOURCE: CODE, SHIM: b"\x7fELF", LIBRARY: b"\x7fELF", DIGEST: hashlib.sha256(CODE).hexdigest().encode()}
    for source in setup.compiled_sources():
        if source != SOURCE:
            stem = source.removesuffix(".py")
            members[source] = CODE
            members[f"{stem}.cpython-311-x86_64-linux-gnu.so"] = b"\x7fELF"
            members[f"{stem}__mypyc.cpython-311-x86_64-linux-gnu.so"] = b"\x7fELF"
            members[f"{stem}.mypyc.sha256"] = hashlib.sha256(CODE).hexdigest().encode()
    return members


def check(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CHECK), str(path)], capture_output=True, text=True, timeout=60)


def test_the_list_is_the_one_in_pyproject() -> None:
    """The check reads the list setup.py compiles: pyproject.toml [tool.querylog] compiled."""
    import setup  # the repository's setup.py (the root is on sys.path): importing it builds nothing

    spec = util.spec_from_file_location("check_compiled_wheel", CHECK)
    assert spec is not None and spec.loader is not None
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.compiled_modules() == setup.compiled_sources()
    assert SOURCE in setup.compiled_sources()
    assert module.DIGEST_SUFFIX == setup.DIGEST_SUFFIX


def test_a_wheel_with_a_current_build_passes(tmp_path: Path) -> None:
    done = check(wheel(tmp_path, good()))
    assert done.returncode == 0, done.stderr
    assert f"compiled: {SOURCE}" in done.stdout


@pytest.mark.parametrize(
    ("drop", "change", "says"),
    [
        ((SHIM, LIBRARY, DIGEST), {}, "no compiled build"),  # a pure-Python wheel (no compiler, mypyc failed)
        ((LIBRARY,), {}, "no compiled build"),  # a shim without its library would not even import
        ((DIGEST,), {}, "no adapters/otlp/scan.mypyc.sha256"),
        ((), {DIGEST: hashlib.sha256(b"older source").hexdigest().encode()}, "digest mismatch"),
    ],
)
def test_a_wheel_without_a_current_build_fails_naming_the_module(
    tmp_path: Path, drop: tuple[str, ...], change: dict[str, bytes], says: str
) -> None:
    members = {k: v for k, v in good().items() if k not in drop} | change
    done = check(wheel(tmp_path, members))
    assert done.returncode == 1
    assert SOURCE in done.stderr and says in done.stderr
