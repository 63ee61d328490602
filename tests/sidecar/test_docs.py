"""The reference docs are up to date with the code, and the README and docs/ pages hold together."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sidecar.cli import docs_gen as docs
from sidecar.cli import main

ROOT = Path(__file__).resolve().parents[2]
#: The pages a reader follows from the README: the README itself and every docs/ page.
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _cli() -> str:
    return docs.cli_reference(main)


@pytest.mark.parametrize(("name", "render"), [("CONFIG.md", docs.config_reference), ("CLI.md", _cli)])
def test_generated_docs_are_fresh(name: str, render: Callable[[], str]) -> None:
    """docs/*.md equal `querylog docs config|cli`; regenerate them when this fails."""
    what = "config" if name == "CONFIG.md" else "cli"
    assert (ROOT / "docs" / name).read_text(encoding="utf-8") == render(), (
        f"docs/{name} is stale: run `querylog docs {what} > docs/{name}`"
    )


def test_every_option_is_documented() -> None:
    """Every config option of every registered component has a doc string."""
    from sidecar.api import FILTERS, SINKS, SOURCES
    from sidecar.config import SidecarConfig
    from sidecar.config.loader import describe_config
    from sidecar.registry import plugins

    def walk(options: list[dict[str, Any]], where: str) -> None:
        for opt in options:
            assert opt["doc"], f"{where}.{opt['key']} has no doc"
            walk(opt.get("options", []), f"{where}.{opt['key']}")

    walk(describe_config(SidecarConfig), "top")
    for group in (FILTERS, SOURCES, SINKS):
        for name, cls in plugins(group).items():
            walk(describe_config(cls.Config), name)


def test_readme_table_names_every_component() -> None:
    """The README's table of sources, filters and sinks names exactly the registered ones (one line each)."""
    from sidecar.api import FILTERS, SINKS, SOURCES
    from sidecar.registry import plugins

    registered = {
        (kind, name)
        for group, kind in ((SOURCES, "source"), (FILTERS, "filter"), (SINKS, "sink"))
        for name in plugins(group)
    }
    listed = set()
    for line in (ROOT / "README.md").read_text(encoding="utf-8").splitlines():
        row = re.match(r"\| (source|filter|sink) \| ([^|]+) \|", line)
        if row:
            listed |= {(row[1], name) for name in re.findall(r"`([^`]+)`", row[2])}
    assert listed == registered, (
        f"README.md's component table: add {sorted(registered - listed)}, remove {sorted(listed - registered)}"
    )


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of the page's headings (lower case, punctuation dropped, spaces to hyphens)."""
    found = set()
    for line in page.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"#{1,6} (.+)", line)
        if heading:
            found.add(re.sub(r"[^\w\- ]", "", heading[1].lower()).replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_relative_links_resolve(page: Path) -> None:
    """Every relative link of the README and the docs/ pages names a file or folder that exists (and, with
    ``#anchor`` into a Markdown page, one of its headings)."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)  # links in code are not links
    broken = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists() or (anchor and dest.suffix == ".md" and anchor not in _anchors(dest)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"
