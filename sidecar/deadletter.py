"""Dead letters: records that could not become events, counted by reason.

The dead-letter file (JSON lines, mode 0600) keeps the offending record so an
operator can inspect and replay it (every entry one line: a record's line breaks, NUL,
NEL, LS and PS included, are escaped); logs and metrics only ever see the reason
and the count.

Bad input never stops a run, and neither does a dead-letter file that cannot be
written (a full disk): the entries that could not be written are counted
(:attr:`DeadLetters.unwritten`), a warning names the file, the file is cut back
to its last whole entry (no torn line), and writing resumes when it can.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from collections import Counter
from pathlib import Path

import structlog

from sidecar.records import escape_breaks

log = structlog.get_logger("querylog.dead_letter")

#: Entries are handed to the OS when this much is pending (and at every :meth:`DeadLetters.flush`).
BUFFER_BYTES = 1 << 16


class DeadLetters:
    """Counts bad records by reason and appends them to a file when one is configured."""

    def __init__(self, path: Path | None, max_bytes: int = 64 * 1024 * 1024) -> None:
        self.path = path
        self.max_bytes = max_bytes
        self.counts: Counter[str] = Counter()
        #: times the file reached ``max_bytes`` and was rotated to ``FILE.1``
        self.rotations = 0
        #: entries counted but not written, the file being unwritable (a full disk)
        self.unwritten = 0
        self._fd: int | None = None
        self._size = 0  # bytes of whole entries in the file
        self._pending = bytearray()  # encoded entries not handed to the OS yet
        self._failing = False  # the last write failed (warned once until a write succeeds again)
        self._lock = threading.Lock()

    def _open(self) -> int:
        if self._fd is None:
            assert self.path is not None
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_APPEND, 0o600)
            os.fchmod(fd, 0o600)  # an existing file keeps its mode on open: tighten it
            self._fd = fd
            self._size = os.fstat(fd).st_size
        return self._fd

    def _rotate(self) -> None:
        """The file is full: it becomes ``FILE.1`` (an older ``FILE.1`` goes) and a new file starts."""
        assert self.path is not None and self._fd is not None
        os.close(self._fd)
        self._fd = None
        os.replace(self.path, self.path.with_name(self.path.name + ".1"))
        self.rotations += 1
        log.warning("dead_letter_file_rotated", rotations=self.rotations, max_bytes=self.max_bytes)

    def _drain(self) -> None:
        """Write the pending entries; on failure cut the file back to its last whole entry and count them."""
        if not self._pending:
            return
        fd = self._open()
        data = bytes(self._pending)
        done = 0
        try:
            while done < len(data):
                n = os.write(fd, data[done:])
                if n <= 0:
                    raise OSError("write returned 0")
                done += n
        except OSError as exc:
            whole = data.rfind(b"\n", 0, done) + 1  # the entries written in full stay
            try:
                os.ftruncate(fd, self._size + whole)  # no torn entry for the next one to glue onto
                self._size += whole
            except OSError:
                whole = 0
            self.unwritten += data.count(b"\n", whole)
            if not self._failing:
                self._failing = True
                log.warning(
                    "dead_letter_file_unwritable",
                    path=str(self.path),
                    error=exc.strerror or type(exc).__name__,
                    unwritten=self.unwritten,
                )
        else:
            self._size += len(data)
            if self._failing:
                self._failing = False
                log.info("dead_letter_file_writable_again", path=str(self.path), unwritten=self.unwritten)
        self._pending.clear()

    def add(
        self, reason: str, source: str, line: int | None, record: bytes | str | None, *, field: str | None = None
    ) -> None:
        """Record one bad input. ``record`` goes to the file only, never to logs; ``field``: the name of the
        field at fault, when one is (a name, never a value)."""
        with self._lock:
            first = self.counts[reason] == 0
            self.counts[reason] += 1
            if first:
                log.warning("record_dead_lettered", reason=reason, first_of_reason=True)
            if self.path is None:
                return
            entry: dict[str, object] = {"reason": reason, "source": source, "line": line}
            if field is not None:
                entry["field"] = field
            if isinstance(record, bytes):
                entry["record_b64"] = base64.b64encode(record).decode("ascii")
            elif record is not None:
                entry["record"] = record
            try:
                data = (escape_breaks(json.dumps(entry, ensure_ascii=False)) + "\n").encode("utf-8")
            except UnicodeEncodeError:  # a lone surrogate in a record: escaped, the file stays UTF-8
                data = (json.dumps(entry) + "\n").encode("ascii")
            self._open()
            held = self._size + len(self._pending)
            if held and held + len(data) > self.max_bytes:
                self._drain()
                self._rotate()
                self._open()
            self._pending += data
            if len(self._pending) >= BUFFER_BYTES:
                self._drain()

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def flush(self) -> None:
        with self._lock:
            self._drain()

    def close(self) -> None:
        with self._lock:
            self._drain()
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None
            if self.counts:
                log.info("dead_letters_summarized", **{f"count_{k}": v for k, v in sorted(self.counts.items())})
            if self.unwritten:
                log.warning("dead_letters_unwritten", path=str(self.path), unwritten=self.unwritten)
