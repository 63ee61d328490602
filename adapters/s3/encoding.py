"""Records into the lines of an object, exactly as the ``file`` sink writes them into a file.

The choice is the file sink's (``adapters/file/sink.py``: ``start``, ``_encoder``, ``_encode_each``): an event
whose own codec is a text codec of the sink's format is written by it (byte for byte when unchanged), an event
of a codec with a JSON form of its own (``json_line``, e.g. OTLP) as that JSON into a JSON-lines (or auto) output,
any other converted by the sink's text codec; a TSV output starts with its header. One difference: an object is a
whole file, so every line of it ends with a newline (a file sink keeps an input's missing final newline).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

from sidecar.api import BadRecord, Codec, DeadLetterSink, Event
from sidecar.codecs import SchemaConfig
from sidecar.textcodecs import text_codec

#: The file sink's text formats (a codec of one of them writes its own records).
TEXT_FORMATS = ("tsv", "jsonl", "access_log")
#: The object name's extension by format (before ``.gz``).
EXTENSIONS = {"tsv": "tsv", "jsonl": "jsonl", "access_log": "log"}


class LineEncoder:
    """Encodes events into newline-terminated UTF-8 lines; records the format cannot frame are dead-lettered."""

    def __init__(self, schema: SchemaConfig, fmt: str | None, dead_letters: DeadLetterSink | None, origin: str) -> None:
        self.schema = schema
        #: the output format; None: each record in its own source's text format
        self.format = fmt
        self.dead_letters = dead_letters
        self.origin = origin
        self.codec: Codec | None = None
        #: the header every object starts with ("" when the format has none)
        self.header = ""
        #: records dead-lettered because the format cannot frame them
        self.rejected = 0

    def start(self, header: str | None, codec: Codec | None) -> None:
        """The input's header and codec, as ``Sink.start`` gets them."""
        fmt = self.format
        if codec is not None and codec.format in TEXT_FORMATS and (fmt is None or codec.format == fmt):
            self.codec = codec
        else:
            self.codec = text_codec(dataclasses.replace(self.schema, format=fmt or "tsv"), None)  # type: ignore[arg-type]
            h = self.codec.header_for_output()
            header = h + "\n" if h is not None else None
        if header and not header.endswith("\n"):
            header += "\n"
        self.header = header or ""

    def extension(self) -> str:
        """``tsv``, ``jsonl`` or ``log``: the format of the objects' records (the first codec's when auto)."""
        fmt = self.format or (self.codec.format if self.codec is not None else None)
        return EXTENSIONS.get(fmt or "", "txt")

    def _encoder(self, codec: Codec | None) -> Callable[[Event], str]:
        if codec is not None and codec.format in TEXT_FORMATS and (self.format is None or codec.format == self.format):
            return codec.encode
        json_line: Callable[[Event], str] | None = getattr(codec, "json_line", None)
        if json_line is not None and self.format in (None, "jsonl"):
            return json_line
        assert self.codec is not None
        return self.codec.encode

    def encode(self, events: list[Event]) -> tuple[bytes, int]:
        """The events' lines (each ending with a newline) and how many events they are."""
        if self.codec is None:
            self.start(None, None)
        first = events[0].codec
        encode, other = self._encoder(first), self._encoder
        try:
            lines = [encode(e) if e.codec is first else other(e.codec)(e) for e in events]
        except BadRecord:
            lines = self._encode_each(events)
        if not lines:
            return b"", 0
        return ("\n".join(lines) + "\n").encode("utf-8"), len(lines)

    def _encode_each(self, events: list[Event]) -> list[str]:
        lines: list[str] = []
        for ev in events:
            try:
                lines.append(self._encoder(ev.codec)(ev))
            except BadRecord as exc:
                self.rejected += 1
                if self.dead_letters is not None:
                    roles = {"user": ev.user, "query": ev.query, "time": ev.time, "rank": ev.rank, "url": ev.url}
                    self.dead_letters.add(exc.reason, self.origin, None, json.dumps(roles, default=str))
        return lines
