"""The generated reference docs are up to date with the code."""

from __future__ import annotations

from pathlib import Path

import pytest

from sidecar.cli import docs_gen as docs
from sidecar.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("name", "render"),
    [("CONFIG.md", docs.config_reference), ("CLI.md", lambda: docs.cli_reference(main))],
)
def test_generated_docs_are_fresh(name: str, render) -> None:  # type: ignore[no-untyped-def]  # parametrized renderer
    """docs/*.md equal `querylog docs config|cli`; regenerate them when this fails."""
    what = "config" if name == "CONFIG.md" else "cli"
    assert (ROOT / "docs" / name).read_text(encoding="utf-8") == render(), (
        f"docs/{name} is stale: run `querylog docs {what} > docs/{name}`"
    )


def test_every_option_is_documented() -> None:
    """Every config option of every registered component has a doc string."""
    from sidecar.api import FILTERS, SINKS
    from sidecar.config import SidecarConfig
    from sidecar.config.loader import describe_config
    from sidecar.registry import plugins

    def walk(options, where):  # type: ignore[no-untyped-def]  # local recursive helper
        for opt in options:
            assert opt["doc"], f"{where}.{opt['key']} has no doc"
            walk(opt.get("options", []), f"{where}.{opt['key']}")

    walk(describe_config(SidecarConfig), "top")
    for group in (FILTERS, SINKS):
        for name, cls in plugins(group).items():
            walk(describe_config(cls.Config), name)
