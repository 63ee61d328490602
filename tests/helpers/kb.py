"""One compiled KB per test session: the default cache when it is current, else a fresh build."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from functools import cache
from pathlib import Path

from knowledge import default_kb_path, kb_status


@cache
def kb_file() -> Path:
    path = default_kb_path()
    kb, _ = kb_status(path)
    if kb is not None:
        return path
    from knowledge.build import build

    tmp = Path(tempfile.mkdtemp(prefix="querylog-test-kb-"))
    atexit.register(shutil.rmtree, tmp, True)
    build(tmp / "kb.qlkb")
    return tmp / "kb.qlkb"


@cache
def classifier():  # returns a Classifier (imported lazily)
    from knowledge.classifier import Classifier

    return Classifier.load(kb_file(), build_if_needed=False)
