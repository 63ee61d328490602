"""A search parameter inside a logged URL: where it is, its text, and its text written back in the same style.

Positions are in the line's own text (escaped as the server logs): ``?``, ``&``, ``=`` and ``#`` are never escaped
by nginx or Apache, so a parameter is found without unescaping the rest of the line.

A value's text: the log escapes undone (:mod:`adapters.accesslog.escapes`), ``+`` read as a space (form encoding,
what browsers send for a GET form), percent escapes decoded, UTF-8 (a byte sequence that is not UTF-8 shows as
U+FFFD). Its style (:class:`Style`): ``+`` or ``%20`` for a space, upper- or lower-case hex, bytes outside ASCII
raw or percent-encoded, and which punctuation it left unencoded. A new text is written in the style of the value
it replaces.
"""

from __future__ import annotations

import re
from codecs import escape_decode  # undocumented, in CPython since 2.x (typeshed has it)
from dataclasses import dataclass
from functools import lru_cache
from urllib.parse import unquote_to_bytes

from adapters.accesslog.escapes import escape, unescape

__all__ = ["Style", "decode_value", "encode_value", "find_param", "query_span", "style_of"]

_UNRESERVED = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_NEVER_RAW = frozenset(b"%+&#= ")
_LOWER_HEX = re.compile(rb"%(?:[0-9a-f][a-f]|[a-f][0-9a-f])")
_ANY_HEX = re.compile(rb"%[0-9A-Fa-f]{2}")


@dataclass(frozen=True)
class Style:
    """How a value was written: space as ``+`` (else ``%20``), hex case, raw UTF-8 bytes, punctuation left raw."""

    plus: bool = True
    lower: bool = False
    raw_high: bool = False
    safe: frozenset[int] = _UNRESERVED


def query_span(value: str, request_line: bool) -> tuple[int, int, int] | None:
    """``(path_start, query_start, query_end)`` of the query string in a logged URL (after ``?``, before ``#``);
    ``request_line``: ``value`` is ``METHOD TARGET PROTOCOL``. None when there is no ``?``."""
    start, end = 0, len(value)
    if request_line:
        first = value.find(" ")
        if first < 0:
            return None
        start = first + 1
        last = value.rfind(" ")
        end = last if last > first else end
    q = value.find("?", start, end)
    if q < 0:
        return None
    h = value.find("#", q, end)
    return start, q + 1, h if h >= 0 else end


def path_of(value: str, path_start: int, query_start: int) -> str:
    """The path of a URL whose target begins at ``path_start`` (a scheme and host skipped)."""
    target = value[path_start : query_start - 1]
    scheme = target.find("://")
    if scheme >= 0:
        slash = target.find("/", scheme + 3)
        return target[slash:] if slash >= 0 else "/"
    return target


def find_param(value: str, start: int, end: int, names: tuple[str, ...]) -> tuple[int, int] | None:
    """The span of the value of the first of ``names`` that the query string ``value[start:end]`` has (its first
    occurrence); None when it has none of them."""
    for name in names:
        key = name + "="
        at = value.find(key, start, end)
        while at >= 0:
            if at == start or value[at - 1] in "&;":
                vstart = at + len(key)
                amp = value.find("&", vstart, end)
                return vstart, amp if amp >= 0 else end
            at = value.find(key, at + 1, end)
    return None


def decode_value(raw: str, dialect: str) -> str:
    """The text of a logged parameter value."""
    if "\\" not in raw:
        if "%" not in raw:
            return raw.replace("+", " ")
        spaced = raw.replace("%20", " ")
        if "%" not in spaced:  # only spaces escaped (a client's encodeURIComponent): no decoder needed
            return spaced.replace("+", " ")
    return _decoded(raw, dialect)


@lru_cache(maxsize=4096)
def _decoded(raw: str, dialect: str) -> str:
    """Memoized: a referer repeats the value its search request had a few lines before."""
    data = (unescape(raw, dialect) if "\\" in raw else raw.encode("utf-8")).replace(b"+", b" ")
    if b"\\" not in data:
        try:  # %XX as \xXX: CPython's escape decoder, 3x urllib's; a % without two hex digits raises
            return escape_decode(data.replace(b"%", b"\\x"))[0].decode("utf-8", "replace")
        except ValueError:
            pass
    return unquote_to_bytes(data).decode("utf-8", "replace")


def style_of(raw: str, dialect: str) -> Style:
    """The style of a logged parameter value."""
    data = unescape(raw, dialect)
    if "%" not in raw and "+" not in raw and not any(b >= 0x80 for b in data):
        return Style(safe=_UNRESERVED | _raw_punctuation(data))
    pct20 = data.find(b"%20")
    plus = data.find(b"+")
    return Style(
        plus=pct20 < 0 or 0 <= plus < pct20,
        lower=_LOWER_HEX.search(data) is not None,
        raw_high=any(b >= 0x80 for b in _ANY_HEX.sub(b"", data)),
        safe=_UNRESERVED | _raw_punctuation(_ANY_HEX.sub(b"", data)),
    )


def _raw_punctuation(data: bytes) -> frozenset[int]:
    return frozenset(b for b in data if 0x21 <= b <= 0x7E and b not in _NEVER_RAW)


def encode_value(text: str, style: Style, dialect: str) -> str:
    """``text`` as a parameter value in ``style``, escaped for the log line."""
    out = bytearray()
    hexfmt = b"%%%02x" if style.lower else b"%%%02X"
    for b in text.encode("utf-8"):
        if b == 0x20:
            out += b"+" if style.plus else b"%20"
        elif b in style.safe or (b >= 0x80 and style.raw_high):
            out.append(b)
        else:
            out += hexfmt % b
    return escape(bytes(out), dialect)
