"""How web servers escape a value in an access-log line, both ways.

* nginx (``escape=default``): ``"``, ``\\``, bytes below 0x20 and from 0x7f up as ``\\xXX`` (upper-case hex).
* Apache (``ap_escape_logitem``): ``\\\\`` and ``\\"``, ``\\b \\n \\r \\t \\v``, other control and non-ASCII
  bytes as ``\\xhh`` (lower-case hex).

:func:`unescape` gives the bytes a value stood for (a character outside ASCII in the line, as a server writing
without escapes would leave it, stands for its UTF-8 bytes); :func:`escape` writes bytes in the dialect.
"""

from __future__ import annotations

import re

__all__ = ["escape", "to_text", "unescape"]

_ESCAPED = re.compile(rb'["\\\x00-\x1f\x7f-\xff]')
"""The bytes both servers escape: a quote, a backslash, control bytes, bytes outside ASCII."""
_APACHE_NAMED = {ord("\b"): b"\\b", ord("\n"): b"\\n", ord("\r"): b"\\r", ord("\t"): b"\\t", ord("\v"): b"\\v"}
_NGINX_UNESC = re.compile(rb"\\x([0-9A-Fa-f]{2})")
_APACHE_UNESC = re.compile(rb'\\(x[0-9A-Fa-f]{2}|[\\"bnrtv])')
_APACHE_CHARS = {b"\\": b"\\", b'"': b'"', b"b": b"\b", b"n": b"\n", b"r": b"\r", b"t": b"\t", b"v": b"\v"}


def _nginx_byte(m: re.Match[bytes]) -> bytes:
    return b"\\x%02X" % m.group()[0]


def _apache_byte(m: re.Match[bytes]) -> bytes:
    b = m.group()[0]
    if b in (0x22, 0x5C):
        return b"\\" + m.group()
    return _APACHE_NAMED.get(b) or b"\\x%02x" % b


def _apache_char(m: re.Match[bytes]) -> bytes:
    code = m.group(1)
    return bytes([int(code[1:], 16)]) if code[:1] == b"x" else _APACHE_CHARS[code]


def escape(data: bytes, dialect: str) -> str:
    """``data`` as the server would write it into the line."""
    return _ESCAPED.sub(_apache_byte if dialect == "apache" else _nginx_byte, data).decode("ascii")


def unescape(text: str, dialect: str) -> bytes:
    """The bytes of a value as written in the line."""
    data = text.encode("utf-8")
    if "\\" not in text:
        return data
    if dialect == "apache":
        return _APACHE_UNESC.sub(_apache_char, data)
    return _NGINX_UNESC.sub(lambda m: bytes([int(m.group(1), 16)]), data)


def to_text(text: str, dialect: str) -> str:
    """A value as text: unescaped, UTF-8 (a byte sequence that is not UTF-8 shows as U+FFFD)."""
    if "\\" not in text:
        return text
    return unescape(text, dialect).decode("utf-8", "replace")
