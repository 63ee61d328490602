"""Text formats by name: the built-in TSV and JSON lines, and a plugin's (``access_log``) registered as a codec.

A line-based format of a plugin is a :class:`~sidecar.api.Codec` registered under ``querylog.codecs`` with the
format's name, built with ``schema=`` (the configured :class:`~sidecar.api.SchemaConfig`); its ``decode_many`` and
``encode`` read and write lines. A class attribute ``recognises(line) -> bool`` lets ``format: auto`` pick it from
an input's first record.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable

from sidecar.api import CODECS, BadRecord, Codec, ConfigValueError, DeadLetterSink, Event, SchemaConfig
from sidecar.codecs import JsonlCodec, TsvCodec, format_from_path
from sidecar.registry import PluginError, plugins

__all__ = ["BUILTIN_TEXT_FORMATS", "TEXT_FORMATS", "LineEncoder", "sniff_format", "text_codec"]

TEXT_FORMATS = ("tsv", "jsonl", "access_log")
"""The formats of text outputs (file, stdout, s3): a record whose own codec is one of them writes itself."""

BUILTIN_TEXT_FORMATS: dict[str, type[TsvCodec] | type[JsonlCodec]] = {"tsv": TsvCodec, "jsonl": JsonlCodec}
"""The text formats of the runtime itself."""


def text_codec(schema: SchemaConfig, path: str | None) -> Codec:
    """The codec for a schema, picking the format by file extension when ``auto`` (TSV when it says nothing).

    A format other than ``tsv``/``jsonl`` is the codec registered under that name; :class:`ConfigValueError` at
    ``format`` when none is installed, at the codec's own key when it refuses the schema."""
    fmt: str = schema.format
    if fmt == "auto":
        fmt = format_from_path(path) or "tsv"
    builtin = BUILTIN_TEXT_FORMATS.get(fmt)
    if builtin is not None:
        return builtin(schema)
    try:
        cls = plugins(CODECS).get(fmt)
    except PluginError as exc:
        raise ConfigValueError("format", str(exc)) from None
    if cls is None:
        raise ConfigValueError("format", f"no codec for the format {fmt!r} is installed")
    codec: Codec = cls(schema=schema)
    return codec


def sniff_format(line: str) -> str:
    """The text format of a record known by its content only: ``jsonl`` when it starts with ``{`` (after
    whitespace), a registered format whose codec ``recognises`` it (``access_log``: a ``combined`` line), else
    ``tsv``."""
    if line.lstrip().startswith("{"):
        return "jsonl"
    for name, cls in plugins(CODECS).items():
        recognises = getattr(cls, "recognises", None)
        if callable(recognises) and recognises(line):
            return str(name)
    return "tsv"


class LineEncoder:
    """Events into text lines, as the file and s3 sinks write them: an event whose own codec is a text codec of the
    output's format is written by it (byte for byte when unchanged), an event of a codec with a JSON form of its own
    (``json_line``: OTLP/JSON, a UBI record's own keys) as that JSON into a JSON-lines (or auto) output, any other
    converted by the output's text codec. A record the format cannot frame is dead-lettered (its roles, with the
    reason) and counted in :attr:`rejected`, never written."""

    def __init__(self, schema: SchemaConfig, fmt: str | None, dead_letters: DeadLetterSink | None, origin: str) -> None:
        self.schema = schema
        #: the output format; None: each record in its own source's text format
        self.format = fmt
        self.dead_letters = dead_letters
        self.origin = origin
        #: the first source's text codec (its layout: TSV columns) or the output's: header and conversions
        self.codec: Codec | None = None
        #: records dead-lettered because the format cannot frame them
        self.rejected = 0

    def start(self, header: str | None, codec: Codec | None) -> str | None:
        """Given the input's header and codec (as ``Sink.start`` gets them), the header the output starts with."""
        fmt = self.format
        if codec is not None and codec.format in TEXT_FORMATS and (fmt is None or codec.format == fmt):
            self.codec = codec
            return header
        self.codec = text_codec(dataclasses.replace(self.schema, format=fmt or "tsv"), None)  # type: ignore[arg-type]
        h = self.codec.header_for_output()
        return h + "\n" if h is not None else None

    def encoder(self, codec: Codec | None) -> Callable[[Event], str]:
        """How an event of ``codec`` is written (see the class)."""
        if codec is not None and codec.format in TEXT_FORMATS and (self.format is None or codec.format == self.format):
            return codec.encode
        json_line: Callable[[Event], str] | None = getattr(codec, "json_line", None)
        if json_line is not None and self.format in (None, "jsonl"):
            return json_line
        if self.codec is None:
            self.start(None, None)
        assert self.codec is not None
        return self.codec.encode

    def encode(self, events: list[Event]) -> tuple[list[Event], list[str]]:
        """The events written and their lines (without newlines); the others are dead-lettered."""
        first = events[0].codec if events else None
        encode, other = self.encoder(first), self.encoder
        many = getattr(first, "encode_many", None)  # optional: a codec's lines of a whole batch, or None
        try:
            if many is not None and encode == first.encode:  # type: ignore[union-attr]  # many: first is a codec
                lines = many(events)
                if lines is not None:
                    return events, lines
            return events, [encode(e) if e.codec is first else other(e.codec)(e) for e in events]
        except BadRecord:
            return self._encode_each(events)

    def _encode_each(self, events: list[Event]) -> tuple[list[Event], list[str]]:
        kept: list[Event] = []
        lines: list[str] = []
        for ev in events:
            try:
                lines.append(self.encoder(ev.codec)(ev))
            except BadRecord as exc:
                self.rejected += 1
                if self.dead_letters is not None:
                    roles = {"user": ev.user, "query": ev.query, "time": ev.time, "rank": ev.rank, "url": ev.url}
                    self.dead_letters.add(exc.reason, self.origin, None, json.dumps(roles, default=str))
                continue
            kept.append(ev)
        return kept, lines
