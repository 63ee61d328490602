"""Dead letters: records that could not become events, counted by reason.

The dead-letter file (JSON lines, mode 0600) keeps the offending record so an
operator can inspect and replay it; logs and metrics only ever see the reason
and the count.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections import Counter
from pathlib import Path
from typing import IO

import structlog

log = structlog.get_logger("querylog.dead_letter")


class DeadLetters:
    """Counts bad records by reason and appends them to a file when one is configured."""

    def __init__(self, path: Path | None, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.counts: Counter[str] = Counter()
        #: times the file reached ``max_bytes`` and was rotated to ``FILE.1``
        self.rotations = 0
        self._file: IO[str] | None = None
        self._size = 0
        self._lock = threading.Lock()

    def _open(self) -> IO[str]:
        if self._file is None:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
            os.fchmod(fd, 0o600)  # an existing file keeps its mode on open: tighten it
            self._file = os.fdopen(fd, "a", encoding="utf-8")
            self._size = os.fstat(fd).st_size
        return self._file

    def _rotate(self) -> None:
        """The file is full: it becomes ``FILE.1`` (an older ``FILE.1`` goes) and a new file starts."""
        assert self.path is not None and self._file is not None
        self._file.close()
        self._file = None
        os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        self.rotations += 1
        log.warning("dead_letter_file_rotated", rotations=self.rotations, max_bytes=self.max_bytes)

    def add(self, reason: str, source: str, line: int | None, record: bytes | str | None) -> None:
        """Record one bad input. ``record`` goes to the file only, never to logs."""
        with self._lock:
            first = self.counts[reason] == 0
            self.counts[reason] += 1
            if first:
                log.warning("record_dead_lettered", reason=reason, first_of_reason=True)
            if self.path is None:
                return
            entry: dict[str, object] = {"reason": reason, "source": source, "line": line}
            if isinstance(record, bytes):
                entry["record_b64"] = base64.b64encode(record).decode("ascii")
            elif record is not None:
                entry["record"] = record
            text = json.dumps(entry, ensure_ascii=False) + "\n"
            size = len(text.encode("utf-8"))
            out = self._open()
            if self._size and self._size + size > self.max_bytes:
                self._rotate()
                out = self._open()
            out.write(text)
            self._size += size

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def flush(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.flush()

    def close(self) -> None:
        with self._lock:
            if self._file is not None:
                self._file.close()
                self._file = None
            if self.counts:
                log.info("dead_letters_summarized", **{f"count_{k}": v for k, v in sorted(self.counts.items())})
