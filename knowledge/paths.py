"""Where the knowledge base's inputs and its compiled file live."""

from __future__ import annotations

import os
from pathlib import Path

#: Bumped whenever the builder's output changes; a KB from another version is stale.
BUILDER_VERSION = "7"
#: The category taxonomy shipped with the package (16 ODP top-level categories over WordNet anchors).
DEFAULT_CATEGORIES = Path(__file__).resolve().parent / "data" / "categories.yaml"
#: The labelled magnetic set's taxonomy mapped onto the 16 categories (for ``querylog kb evaluate``).
MAGNETIC_CATEGORIES = Path(__file__).resolve().parent / "data" / "magnetic_categories.yaml"


def default_kb_path() -> Path:
    """``$QUERYLOG_KB``, else ``$XDG_CACHE_HOME/querylog/kb.qlkb``, else ``~/.cache/querylog/kb.qlkb``."""
    env = os.environ.get("QUERYLOG_KB")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "querylog" / "kb.qlkb"
