"""Records across formats: the framing rule of text outputs, and a record of one format rebuilt for another.

**Framing.** The code points that end a line for some reader never reach a text file raw.
Python's ``str.splitlines`` (and so many log readers) ends a line at LF, CR, VT, FF, FS, GS, RS, NEL, LS and PS,
``open()`` in text mode at a bare CR; NUL ends a C string. The rule, per format (docs/GUARANTEES.md, bad input):
a TSV value cannot be escaped, so a record holding one is dead-lettered (``field_breaks_framing``); a JSON line
is written re-encoded with escapes (JSON escapes the controls itself; NEL, LS and PS are escaped here), and so is
every dead-letter entry.

**Crossing formats.** :func:`foreign_record` keeps the source record's key set and key order (null role keys
included) when an event is written in another format.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sidecar.api import Event

__all__ = ["LINE_BREAKS", "breaks_framing", "carried_fields", "escape_breaks", "foreign_record"]

#: The code points a line reader may end a line at (``str.splitlines``: LF, CR, VT, FF, FS, GS, RS, NEL, LS,
#: PS), and NUL: none of them reaches a text output raw (see :func:`breaks_framing`).
LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029\x00"


def breaks_framing(text: str) -> bool:
    """True when ``text`` holds a code point of :data:`LINE_BREAKS` (one scan each; the three non-ASCII ones
    only when the text is not ASCII)."""
    return (
        "\n" in text
        or "\r" in text
        or "\x0b" in text
        or "\x0c" in text
        or "\x1c" in text
        or "\x1d" in text
        or "\x1e" in text
        or "\x00" in text
        or (not text.isascii() and ("\x85" in text or "\u2028" in text or "\u2029" in text))
    )


def escape_breaks(line: str) -> str:
    """A JSON text with NEL, LS and PS escaped (``json.dumps`` escapes the ASCII controls already)."""
    if line.isascii():
        return line
    return line.replace("\x85", "\\u0085").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def carried_fields(event: Event) -> Mapping[str, Any]:
    """The non-role fields of an event's original record, by name (for re-encoding in another format)."""
    codec = event.codec
    return codec.fields(event) if codec is not None else {}


def foreign_record(event: Event, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """An event of another format as a record of a format whose role keys are ``pairs`` ((role, key)).

    The source record's keys come in its own order, as its codec's ``layout(event)`` gives them ((key, role)
    pairs; a role key is written under this format's key for that role, its value the event's, null included),
    so key set and key order survive the crossing. Then come the carried fields the layout did not name, and
    the roles with a value that the source record had no key for. A codec without ``layout`` (a fixed schema,
    such as gRPC's) gives its carried fields, then the roles that have a value.
    """
    codec = event.codec
    carried = codec.fields(event) if codec is not None else {}
    layout = codec.layout(event) if codec is not None else None
    key_of = dict(pairs)
    out: dict[str, Any] = {}
    placed: set[str] = set()
    if layout is not None:
        for key, role in layout:
            if role is None:
                if key in carried:
                    out[key] = carried[key]
            elif role in key_of:
                out[key_of[role]] = getattr(event, role)
                placed.add(role)
    for key, value in carried.items():
        if key not in out:
            out[key] = value
    for role, key in pairs:
        if role not in placed:
            value = getattr(event, role)
            if value is not None:
                out[key] = value
    return out
