"""Counting a file's lines for the replay progress bar (:meth:`adapters.file.source.FileSource.progress`).

The count runs in a background thread (gzip decompressed too), so the bar starts at once and gets its total
when the count is done; a stream (stdin, a pipe) has none: counting would consume it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from adapters.file.reader import CHUNK, open_input


def count_lines(path: str, stop: Callable[[], bool] = lambda: False) -> int | None:
    """Lines in a (plain or gzip) file, a last line without newline included; None when unreadable or stopped."""
    try:
        with open_input(path) as stream:
            lines, last = 0, b"\n"
            while chunk := stream.read(CHUNK):
                if stop():
                    return None
                lines += chunk.count(b"\n")
                last = chunk[-1:]
            return lines + (last != b"\n")
    except (OSError, EOFError, ValueError):  # a truncated or corrupt gzip: the replay dead-letters it, no total
        return None


class LineCount:
    """The lines of a file, counted on a thread of its own: :attr:`total` is None until done (or unreadable)."""

    def __init__(self, path: str, stop: Callable[[], bool]) -> None:
        self.total: int | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._count, args=(path, stop), name="querylog-count", daemon=True)
        self._thread.start()

    def _count(self, path: str, stop: Callable[[], bool]) -> None:
        self.total = count_lines(path, stop)
        self.done.set()
