"""Text formats by name: the built-in TSV and JSON lines, and a plugin's (``access_log``) registered as a codec.

A line-based format of a plugin is a :class:`~sidecar.api.Codec` registered under ``querylog.codecs`` with the
format's name, built with ``schema=`` (the configured :class:`~sidecar.api.SchemaConfig`); its ``decode_many`` and
``encode`` read and write lines. A class attribute ``recognises(line) -> bool`` lets ``format: auto`` pick it from
an input's first record.
"""

from __future__ import annotations

from sidecar.api import CODECS, Codec, ConfigValueError, SchemaConfig
from sidecar.codecs import JsonlCodec, TsvCodec, format_from_path
from sidecar.registry import PluginError, plugins

__all__ = ["BUILTIN_TEXT_FORMATS", "sniff_format", "text_codec"]

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
