"""One compiled KB per test session, in a folder of its own: a snapshot of the default cache when it is current,
else a fresh build. Never the shared cache file itself: another worktree's run (or a serve of other code) may
rebuild and replace it mid-session, and a chain with ``rebuild: false`` would then find it stale."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from functools import cache
from pathlib import Path

from knowledge import default_kb_path, kb_status


@cache
def kb_file() -> Path:
    tmp = Path(tempfile.mkdtemp(prefix="querylog-test-kb-"))
    atexit.register(shutil.rmtree, tmp, True)
    path = tmp / "kb.qlkb"
    try:  # a hard link: the builder replaces the cache by a rename, so the linked file never changes
        os.link(default_kb_path(), path)
    except FileNotFoundError:
        pass
    except OSError:  # another file system
        shutil.copyfile(default_kb_path(), path)
    kb, _ = kb_status(path)
    if kb is None:
        path.unlink(missing_ok=True)
        from knowledge.build import build

        build(path)
    return path


@cache
def classifier():  # returns a Classifier (imported lazily)
    from knowledge.classifier import Classifier

    return Classifier.load(kb_file(), build_if_needed=False)
