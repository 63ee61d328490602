"""pyproject.toml's explicit package list names every package folder (fast; the wheel test is slow)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOP_LEVEL = ("sidecar", "filters", "adapters", "knowledge")


def package_folders() -> set[str]:
    """Dotted names of the folders under the top-level packages that hold files (code or data)."""
    found = set()
    for top in TOP_LEVEL:
        for folder in [ROOT / top, *(ROOT / top).rglob("*")]:
            if not folder.is_dir() or "__pycache__" in folder.parts or folder.name.startswith("."):
                continue
            if any(f.is_file() and f.suffix != ".pyc" for f in folder.iterdir()):
                found.add(".".join(folder.relative_to(ROOT).parts))
    return found


def setuptools_config() -> dict:
    """The ``[tool.setuptools]`` table of pyproject.toml."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def test_every_package_folder_is_listed() -> None:
    """Each folder with files under sidecar/filters/adapters/knowledge is in [tool.setuptools] packages."""
    listed = set(setuptools_config()["packages"])
    missing = package_folders() - listed
    assert not missing, f"add to [tool.setuptools] packages in pyproject.toml: {sorted(missing)}"
    stale = listed - package_folders() - {"querylog_config"}
    assert not stale, f"listed in [tool.setuptools] packages but no such folder: {sorted(stale)}"


def test_config_folder_ships_as_querylog_config() -> None:
    """config/ is the package querylog_config (package-dir), with its YAML files and examples as package data."""
    cfg = setuptools_config()
    assert "querylog_config" in cfg["packages"]
    assert cfg["package-dir"]["querylog_config"] == "config"
    assert cfg["package-data"]["querylog_config"] == ["*.yaml", "examples/README.md", "examples/*/*"]
    assert (ROOT / "config" / "__init__.py").is_file()
    assert {p.stem for p in (ROOT / "config").glob("*.yaml")} >= {"default", "hipaa", "k-anonymity", "passthrough"}
