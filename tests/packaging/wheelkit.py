"""Build the wheel from the working tree and install it into a fresh virtual environment outside the repository.

The wheel is built from a copy of the repository's files (tracked and untracked, not ignored: what a clean
checkout of the working tree holds). Two ways to give the new venv its third-party dependencies:

* **linked** (:func:`link_dependencies`, fast, offline): the wheel goes in with ``--no-deps`` and the running
  interpreter's site-packages are exposed through a folder of symlinks named in a ``.pth`` file: a path line adds
  that folder to ``sys.path`` after the new venv's own site-packages, and the ``.pth`` files inside it (the main
  venv's editable-install finder) are never processed; the project's own entries (its dist-info and editable
  finder) are left out.
* **installed** (``pip install WHEEL``): pip resolves the wheel's own dependencies, as a user's ``pip install
  querylog-sidecar`` does (no extras), pinned to the versions of the running interpreter (``pip freeze`` as
  constraints) so the run is repeatable and served from the local index or pip's cache.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("sidecar", "filters", "adapters", "knowledge")


@dataclass(frozen=True)
class Wheel:
    """The built wheel and the copy of the repository it was built from."""

    path: Path
    source: Path


@dataclass(frozen=True)
class Installed:
    """A fresh venv (outside the repository) with the wheel installed, and where to run it."""

    wheel: Path
    source: Path
    venv: Path
    site: Path
    work: Path
    env: dict[str, str]

    def run(
        self, *args: str, timeout: float = 120, extra_env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        """Run a command of the new venv (``bin/NAME``) in the work folder; returns the CompletedProcess."""
        env = self.environ(extra_env)
        return subprocess.run(
            self.command(*args), cwd=self.work, env=env, capture_output=True, text=True, timeout=timeout
        )

    def command(self, *args: str) -> list[str]:
        """The argv of a command of the new venv (``bin/NAME`` and its arguments)."""
        return [str(self.venv / "bin" / args[0]), *args[1:]]

    def environ(self, extra_env: dict[str, str] | None = None) -> dict[str, str]:
        """The clean environment, plus ``extra_env``."""
        return {**self.env, **(extra_env or {})}


def _source_files() -> list[str]:
    """Files of the working tree a build sees: tracked and untracked, minus what .gitignore ignores."""
    try:
        out = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
            cwd=ROOT,
            capture_output=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git is needed to list the repository's files")
    return [name for name in out.decode().split("\0") if name and (ROOT / name).is_file()]


def copy_source(dest: Path) -> Path:
    """Copy the repository's files to dest (a clean tree: no build/, egg-info or caches)."""
    for name in _source_files():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    return dest


def build_wheel(tmp: Path) -> Wheel:
    """Copy the working tree to tmp/src and build the project's wheel (no dependencies) into tmp/dist."""
    source = copy_source(tmp / "src")
    dist = tmp / "dist"
    build = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert build.returncode == 0, build.stderr[-3000:]
    (wheel,) = dist.glob("querylog_sidecar-*.whl")
    return Wheel(wheel, source)


def link_dependencies(dest: Path) -> Path:
    """Symlinks to the running interpreter's site-packages entries, minus this project's own."""
    dest.mkdir()
    own = {*PACKAGES, "querylog_config"}
    for site in dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")]):
        for entry in Path(site).iterdir():
            name = entry.name
            if (
                name.startswith(("__editable__", "querylog_sidecar"))
                or name.split(".")[0] in own
                or entry.suffix == ".pth"
                or (dest / name).exists()
            ):
                continue
            (dest / name).symlink_to(entry)
    return dest


def pinned_versions(dest: Path) -> Path:
    """A pip constraints file with the running interpreter's versions (``name==version`` lines of pip freeze)."""
    freeze = subprocess.run(
        [sys.executable, "-m", "pip", "freeze", "--exclude-editable"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    pins = [line for line in freeze.splitlines() if "==" in line and not line.lower().startswith("querylog")]
    dest.write_text("\n".join(pins) + "\n", encoding="utf-8")
    return dest


def clean_env(tmp: Path, venv: Path) -> dict[str, str]:
    """The environment for the installed commands: no repository on any path, HOME and caches in tmp."""
    drop = ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "VIRTUAL_ENV", "NLTK_DATA")
    env = {k: v for k, v in os.environ.items() if k not in drop and not k.startswith("QUERYLOG_")}
    (tmp / "home").mkdir()
    env.update(
        HOME=str(tmp / "home"),
        XDG_CACHE_HOME=str(tmp / "cache"),
        PATH=f"{venv / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        PYTHONNOUSERSITE="1",
        PYTHONDONTWRITEBYTECODE="1",
    )
    return env


def install(wheel: Wheel, tmp: Path, *, linked: bool) -> Installed:
    """A venv in tmp/venv with the wheel installed: its dependencies linked (``linked``) or installed by pip."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True, timeout=300)
    python = str(venv / "bin" / "python")
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    if linked:
        deps = link_dependencies(tmp / "deps")
        (site / "zz_querylog_test_deps.pth").write_text(f"{deps}\n", encoding="utf-8")
        pip = [python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel.path)]
    else:
        pins = pinned_versions(tmp / "constraints.txt")
        pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", "-c", str(pins), str(wheel.path)]
    done = subprocess.run(pip, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    work = tmp / "work"
    work.mkdir()
    return Installed(wheel.path, wheel.source, venv, site, work, clean_env(tmp, venv))
