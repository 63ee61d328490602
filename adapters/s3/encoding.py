"""Records into the lines of an object, exactly as the ``file`` sink writes them into a file.

The choice of encoder is the file sink's (:class:`sidecar.textcodecs.LineEncoder`). One difference: an object is a
whole file, so every line of it ends with a newline (a file sink keeps an input's missing final newline).
"""

from __future__ import annotations

from sidecar.api import Codec, Event
from sidecar.textcodecs import LineEncoder

#: The object name's extension by format (before ``.gz``): UBI records are JSON lines.
EXTENSIONS = {"tsv": "tsv", "jsonl": "jsonl", "access_log": "log", "ubi": "jsonl"}


class ObjectLines(LineEncoder):
    """Encodes events into newline-terminated UTF-8 lines; records the format cannot frame are dead-lettered."""

    #: the header every object starts with ("" when the format has none)
    header = ""

    def start(self, header: str | None, codec: Codec | None) -> str | None:
        """The input's header and codec, as ``Sink.start`` gets them; :attr:`header` ends with a newline."""
        header = super().start(header, codec)
        if header and not header.endswith("\n"):
            header += "\n"
        self.header = header or ""
        return header

    def extension(self) -> str:
        """``tsv``, ``jsonl`` or ``log``: the format of the objects' records (the first codec's when auto)."""
        fmt = self.format or (self.codec.format if self.codec is not None else None)
        return EXTENSIONS.get(fmt or "", "txt")

    def object_lines(self, events: list[Event]) -> tuple[bytes, int]:
        """The events' lines (each ending with a newline) and how many events they are."""
        if self.codec is None:
            self.start(None, None)
        kept, lines = self.encode(events)
        if not lines:
            return b"", 0
        return ("\n".join(lines) + "\n").encode("utf-8"), len(kept)
