"""The replay progress bar (shown on a terminal only): records read against the input's record count, with
the chain's out / held / dropped / dead-lettered counts live.

The total comes from counting the input's lines in a background thread (gzip decompressed too), so the bar
starts at once and gets its total when the count is done; stdin has none.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from adapters.file.reader import CHUNK, is_stream, open_input


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


class ReplayProgress:
    """A tqdm bar counting records; :meth:`update` after each batch, :meth:`close` at the end."""

    REFRESH_SECONDS = 0.5

    def __init__(self, path: str, header: bool) -> None:
        from tqdm import tqdm

        self.header = header
        self.bar = tqdm(total=None, unit=" records", unit_scale=True, file=sys.stderr, leave=False)
        self._total: int | None = None
        self._done = threading.Event()
        self._closed = False
        self._last = 0.0
        if not is_stream(path):  # counting would consume a pipe
            threading.Thread(target=self._count, args=(path,), name="querylog-count", daemon=True).start()

    def _count(self, path: str) -> None:
        self._total = count_lines(path, lambda: self._closed)
        self._done.set()

    def update(self, lines_seen: int, stats: Callable[[], Mapping[str, Any]]) -> None:
        """Move the bar to ``lines_seen`` input lines; ``stats`` (the chain's counters) is read at most twice
        a second."""
        now = time.monotonic()
        if now - self._last < self.REFRESH_SECONDS:
            return
        self._last = now
        if self._done.is_set() and self._total is not None and self.bar.total is None:
            self.bar.total = max(0, self._total - self.header)
        s = stats()
        shown = {
            "out": "events_out",
            "held": "events_held",
            "dropped": "events_dropped",
            "dead": "events_dead_lettered",
        }
        self.bar.set_postfix({k: s.get(v, 0) for k, v in shown.items()}, refresh=False)
        self.bar.update(max(0, lines_seen - self.header) - self.bar.n)

    def close(self) -> None:
        self._closed = True
        self.bar.close()
