"""Request bodies of the ``http`` source, without I/O: content types, decompression, records, answers.

* :func:`body_format` tells from ``Content-Type`` / ``Content-Encoding`` how a body is read (or why not: 415,
  listing the accepted types or encodings).
* :func:`decompress` undoes ``gzip`` (several members one after another too) or ``deflate``, bounded.
* :func:`split_records` cuts an NDJSON body (or one JSON array of objects) into JSON lines for the runtime's
  JSON-lines codec, and a ``text/plain`` body into its lines; :func:`msgpack_records` does the same for a msgpack
  stream of maps; :func:`text_format` tells which text codec reads a ``text/plain`` body.

Bad records come back as ``(position, reason, record)``: ``oversized_record`` (the record is not kept),
``invalid_utf8``, ``lone_surrogate``, ``invalid_msgpack``, ``msgpack_too_deep``, ``msgpack_not_map``,
``msgpack_not_json``, ``json_too_deep`` (a JSON array body or a map nested deeper than Python's recursion limit:
no record is shaped like that). The runtime's codec dead-letters the lines that are no record (``invalid_json``,
``json_too_deep``, ``missing_query``...). Nothing here lets an exception of the input's making escape.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from typing import Any

import msgpack

#: Content types of an NDJSON body (an ``application/json`` body may be one array instead); none: NDJSON too.
JSON_TYPES = ("application/x-ndjson", "application/json", "application/jsonlines", "application/x-jsonlines")
MSGPACK_TYPES = ("application/msgpack", "application/x-msgpack", "application/vnd.msgpack")
#: Lines of text, each one record in the schema's format (TSV or JSON lines): Vector's `text` codec, syslog-ng.
TEXT_TYPES = ("text/plain",)
#: Every content type a body may have, in the order a 415 lists them.
ACCEPTED_TYPES = (*JSON_TYPES, *MSGPACK_TYPES, *TEXT_TYPES)
ENCODINGS = frozenset({"", "identity", "gzip", "x-gzip", "deflate"})
#: The encodings a 415 lists (``Accept-Encoding``, RFC 7694).
ACCEPTED_ENCODINGS = ("gzip", "deflate", "identity")

Bad = list[tuple[int, str, bytes | str | None]]
Records = tuple[list[str], list[int], Bad]


@dataclass
class Answer:
    """What a request is answered: status, JSON body, ``Retry-After`` seconds (0: none), whether to close, and
    headers of its own (a 415's ``Accept-Post`` / ``Accept-Encoding``)."""

    status: int
    payload: dict[str, Any] = field(default_factory=dict)
    retry_after: int = 0
    close: bool = False
    headers: dict[str, str] = field(default_factory=dict)


class BodyError(Exception):
    """A request body that cannot be read: the HTTP status and a reason slug; ``accepted``: what would have been
    (a 415 lists the content types or encodings), ``headers`` to answer with."""

    def __init__(
        self, status: int, reason: str, accepted: tuple[str, ...] = (), headers: dict[str, str] | None = None
    ) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason
        self.accepted = accepted
        self.headers = headers or {}

    def answer(self, close: bool) -> Answer:
        """The answer to a request refused with this error."""
        payload: dict[str, Any] = {"error": self.reason}
        if self.accepted:
            payload["accepted"] = list(self.accepted)
        return Answer(self.status, payload, close=close, headers=dict(self.headers))


def body_format(content_type: str | None, encoding: str | None) -> tuple[str, str]:
    """``(kind, encoding)``: kind ``ndjson``, ``json`` (an array allowed), ``msgpack`` or ``text`` (lines in the
    schema's format); :class:`BodyError` 415 listing the accepted ones for another content type or encoding."""
    enc = (encoding or "").strip().lower()
    if enc not in ENCODINGS:
        listed = ", ".join(ACCEPTED_ENCODINGS)
        raise BodyError(415, "unsupported_encoding", ACCEPTED_ENCODINGS, {"Accept-Encoding": listed})
    kind = (content_type or "").split(";", 1)[0].strip().lower()
    if kind in MSGPACK_TYPES:
        return "msgpack", enc
    if kind in TEXT_TYPES:
        return "text", enc
    if kind and kind not in JSON_TYPES:
        raise BodyError(415, "unsupported_media_type", ACCEPTED_TYPES, {"Accept-Post": ", ".join(ACCEPTED_TYPES)})
    return ("json" if kind == "application/json" else "ndjson"), enc


def decompress(body: bytes, encoding: str, limit: int) -> bytes:
    """The body without its ``Content-Encoding`` (gzip members one after another, deflate), at most ``limit``
    bytes; :class:`BodyError` 413 when longer, 400 when it is not valid."""
    if encoding in ("", "identity"):
        return body
    out: list[bytes] = []
    size = 0
    data = body
    try:
        while data:
            d = zlib.decompressobj(16 + zlib.MAX_WBITS if encoding in ("gzip", "x-gzip") else zlib.MAX_WBITS)
            chunk = d.decompress(data, limit + 1 - size)
            size += len(chunk)
            out.append(chunk)
            if size > limit or d.unconsumed_tail:
                raise BodyError(413, "body_too_large")
            if not d.eof:
                raise BodyError(400, f"invalid_{encoding.removeprefix('x-')}")
            data = d.unused_data
            if encoding == "deflate":
                break
    except zlib.error:
        raise BodyError(400, f"invalid_{encoding.removeprefix('x-')}") from None
    return b"".join(out)


def _as_lines(items: list[tuple[int, Any]], max_record_bytes: int, bad: Bad) -> tuple[list[str], list[int]]:
    """Decoded ``(position, object)`` pairs as compact JSON lines with their positions (the codec checks them)."""
    lines: list[str] = []
    positions: list[int] = []
    for i, item in items:
        try:
            line = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError):  # msgpack bin or ext values: JSON cannot carry them
            bad.append((i, "msgpack_not_json", None))
            continue
        except RecursionError:  # a map nested about a thousand deep (msgpack's own limit is higher)
            bad.append((i, "json_too_deep", None))
            continue
        try:
            size = len(line.encode("utf-8"))
        except UnicodeEncodeError:  # a "\ud800" without its pair: no UTF-8 output could carry it
            bad.append((i, "lone_surrogate", None))
            continue
        if size > max_record_bytes:
            bad.append((i, "oversized_record", None))
            continue
        lines.append(line)
        positions.append(i)
    return lines, positions


def split_records(body: bytes, json_array: bool, max_record_bytes: int) -> Records:
    """The records of a body: (lines, their 1-based positions, bad ones as (position, reason, record)).

    Blank lines are skipped; a line over ``max_record_bytes`` (``oversized_record``, not kept) or not UTF-8
    (``invalid_utf8``) is bad. ``json_array``: the body may be one JSON array of objects instead.
    """
    bad: Bad = []
    if json_array and body.lstrip()[:1] == b"[":
        try:
            items = json.loads(body)
        except ValueError:
            items = None  # not one array after all: read it as lines (each then fails as JSON, counted)
        except RecursionError:  # `[` nested thousands deep: no array of records; one reason for the body
            return [], [], [(1, "json_too_deep", None)]
        if isinstance(items, list):
            return (*_as_lines(list(enumerate(items, 1)), max_record_bytes, bad), bad)
    lines: list[str] = []
    positions: list[int] = []
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        for i, piece in enumerate(body.split(b"\n"), 1):
            if not piece.strip():
                continue
            if len(piece) > max_record_bytes:
                bad.append((i, "oversized_record", None))
                continue
            try:
                lines.append(piece.decode("utf-8"))
            except UnicodeDecodeError:
                bad.append((i, "invalid_utf8", piece))
                continue
            positions.append(i)
        return lines, positions, bad
    quick = max_record_bytes // 4  # a str of at most this many characters fits in max_record_bytes of UTF-8
    for i, line in enumerate(text.split("\n"), 1):
        if not line or (line.isspace()):
            continue
        if len(line) > quick and len(line.encode("utf-8")) > max_record_bytes:
            bad.append((i, "oversized_record", None))
            continue
        lines.append(line)
        positions.append(i)
    return lines, positions, bad


def msgpack_records(body: bytes, max_record_bytes: int) -> Records:
    """The records of a msgpack body: a stream of maps, or of ``[time, map]`` pairs as Fluent Bit's
    ``format msgpack`` sends them (``[[time, metadata], map]`` too); each map becomes one JSON line.

    Bytes that are not msgpack end the body (``invalid_msgpack``, the records before it are kept); an object
    that holds no map is ``msgpack_not_map``."""
    bad: Bad = []
    items: list[Any] = []
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=max(len(body), 1))
    unpacker.feed(body)
    end = 0
    try:
        for obj in unpacker:
            end = unpacker.tell()
            if type(obj) is list and len(obj) == 2 and type(obj[1]) is dict:
                obj = obj[1]
            items.append(obj)
    except msgpack.StackError:  # nested deeper than the unpacker's stack: the rest of the body is unreadable
        end = -2
    except Exception:  # FormatError, bad UTF-8 in a str...: the rest of the body is unreadable
        end = -1
    if end != len(body):  # damaged, too deep, or the last object cut short
        bad.append((len(items) + 1, "msgpack_too_deep" if end == -2 else "invalid_msgpack", None))
    maps: list[tuple[int, Any]] = []
    for i, item in enumerate(items, 1):
        if type(item) is dict:
            maps.append((i, item))
        else:
            bad.append((i, "msgpack_not_map", None))
    lines, positions = _as_lines(maps, max_record_bytes, bad)
    return lines, positions, sorted(bad, key=lambda b: b[0])


def text_format(schema_format: str, lines: list[str]) -> str:
    """The format of a ``text/plain`` body's lines: the schema's, or for ``auto`` JSON lines when the first line
    starts with ``{`` (after spaces), else TSV."""
    if schema_format != "auto":
        return schema_format
    return "jsonl" if lines and lines[0].lstrip().startswith("{") else "tsv"
