"""Loading the compiled knowledge base: status, staleness, rebuild on demand."""

from __future__ import annotations

import hashlib
from pathlib import Path

import structlog

from knowledge.paths import BUILDER_VERSION, DEFAULT_CATEGORIES, default_kb_path
from knowledge.store import KBCorrupt, KnowledgeBase, decode

log = structlog.get_logger("querylog.kb")


class KBUnavailable(Exception):
    """The KB cannot be loaded (and was not rebuilt); the message says why and what to run."""


def _stale_reason(kb: KnowledgeBase, categories: Path) -> str | None:
    if kb.meta.get("builder") != BUILDER_VERSION:
        return "built by another builder version"
    try:
        want = hashlib.sha256(categories.read_bytes()).hexdigest()
    except OSError:
        return None  # the categories file is gone: the compiled KB is all we have
    if kb.meta["sources"]["categories"]["sha256"] != want:
        return "categories file changed since the build"
    return None


def kb_status(path: Path, categories: Path = DEFAULT_CATEGORIES) -> tuple[KnowledgeBase | None, str | None]:
    """``(kb, None)`` when ``path`` holds a usable, current KB, else ``(None, reason)``."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, f"unreadable ({exc.strerror})"
    try:
        kb = decode(data)
    except KBCorrupt as exc:
        return None, f"corrupt: {exc}"
    reason = _stale_reason(kb, categories)
    return (None, f"stale: {reason}") if reason else (kb, None)


#: KBs loaded by this process, by file identity: filters of one chain (``classify``, ``dp_replace``) share one copy.
_LOADED: dict[tuple[str, int, int, int], KnowledgeBase] = {}


def _identity(path: Path) -> tuple[str, int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns)


def load_kb(path: Path | None = None, *, categories: Path | None = None, build_if_needed: bool = True) -> KnowledgeBase:
    """Load the compiled KB; rebuild it when missing, corrupt or stale (if allowed).

    A file already loaded by this process (same path, inode, size and modification time: the builder replaces
    the file by a rename, so a rebuilt KB is a new file) is not read again; its staleness is still checked.
    """
    path = path or default_kb_path()
    cats = categories or DEFAULT_CATEGORIES
    ident = _identity(path)
    cached = _LOADED.get(ident) if ident is not None else None
    if cached is not None and _stale_reason(cached, cats) is None:
        return cached
    kb, reason = kb_status(path, cats)
    if kb is not None:
        if ident is not None:
            _LOADED[ident] = kb
        return kb
    if not build_if_needed:
        raise KBUnavailable(f"knowledge base {path} is {reason}; run `querylog kb build`")
    from knowledge.build import KBBuildError, build
    from knowledge.wordnet import WordNetMissing
    from sidecar.config.loader import ConfigError

    log.warning("kb_rebuilding", reason=(reason or "").split(":")[0])
    try:
        report = build(path, cats)
    except (KBBuildError, WordNetMissing, ConfigError, OSError) as exc:
        raise KBUnavailable(f"knowledge base {path} is {reason} and cannot be rebuilt: {exc}") from None
    log.info("kb_built", seconds=round(report.seconds, 1), size=report.size)
    return decode(path.read_bytes())
