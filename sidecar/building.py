"""What the runtime builds its parts with: components from their config specs, codecs by format name, the few
helpers of :mod:`sidecar.pipeline` that need no runtime (a record's bytes, a sink's counters)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from typing import Any, Literal

from sidecar.api import CODECS, BuildContext, Codec, ConfigValueError, Event, Sink
from sidecar.codecs import SchemaConfig, codec_for
from sidecar.config import ComponentSpec, ConfigError, LoadedConfig
from sidecar.outbox import Outbox
from sidecar.registry import plugins

__all__ = ["build_component", "codec_lookup", "create_positions", "record_bytes", "sink_stats"]


def record_bytes(ev: Event) -> bytes | str | None:
    """An event's record as its format writes it (a line, or the codec's packed bytes for a binary format)."""
    if ev.codec is None:
        return None
    record = ev.codec.encode(ev)
    if isinstance(record, str | bytes):
        return record
    packed = ev.codec.pack_record(record)
    return packed if isinstance(packed, bytes) else None


def create_positions(db: Any) -> None:
    """The table of source positions committed with batches (``RecordBatch.checkpoint``)."""
    db.execute("CREATE TABLE IF NOT EXISTS source_positions (key TEXT PRIMARY KEY, value TEXT NOT NULL)")


def build_component(spec: ComponentSpec, ctx: BuildContext, config: LoadedConfig) -> Any:
    """Build a configured component; a ``ConfigValueError`` becomes a located ``ConfigError``."""
    try:
        return spec.cls(spec.config, ctx)
    except ConfigValueError as exc:
        key = f"{spec.path}.{exc.key}"
        raise ConfigError(str(config.file), config.doc.line(key), key, exc.problem, exc.allowed) from None


_TEXT_FORMATS: dict[str, Literal["tsv", "jsonl"]] = {"tsv": "tsv", "jsonl": "jsonl"}
"""The configured text formats, by name."""


def codec_lookup(schema: SchemaConfig) -> Callable[[str], Codec | None]:
    """Codecs by format name: the configured text codecs, else those registered under ``querylog.codecs``
    (built with the configured schema when their constructor takes a ``schema`` argument, as the forward
    codec's does: its roles are record keys)."""
    made: dict[str, Codec | None] = {}

    def lookup(fmt: str) -> Codec | None:
        if fmt not in made:
            text_format = _TEXT_FORMATS.get(fmt)
            if text_format is not None:
                made[fmt] = codec_for(dataclasses.replace(schema, format=text_format), None)
            else:
                cls = plugins(CODECS).get(fmt)
                if cls is None:
                    made[fmt] = None
                elif "schema" in inspect.signature(cls).parameters:
                    made[fmt] = cls(schema=schema)
                else:
                    made[fmt] = cls()
        return made[fmt]

    return lookup


def sink_stats(sink: Sink[Any]) -> dict[str, Any]:
    """A sink's name and its numeric counters (an outbox's pending and sent counts...), for metrics."""
    stats = getattr(sink, "stats", None)
    raw: Any = stats() if callable(stats) else {}
    counts = {str(k): v for k, v in raw.items() if isinstance(v, int | float) and not isinstance(v, bool)}
    outbox = getattr(sink, "outbox", None)
    age = {"outbox_oldest_age_seconds": outbox.oldest_age()} if isinstance(outbox, Outbox) else {}
    return {"name": sink.NAME, "written": getattr(sink, "written", 0), "counts": counts, **age}
