"""Records <-> events for text formats: schema maps for TSV and JSON lines.

A codec decodes lines into :class:`~sidecar.api.Event` objects (roles + the
original record) and encodes events back into lines of the same schema. An event
whose role values are unchanged is written back as its original line, byte for
byte; a changed one has its role values written into its own record, so key
order, column order, types and untouched fields stay as they were. An event from
another source (a gRPC message, say) becomes a fresh record built from its roles
and its carried-through fields.

**An empty query is a valid record.** A query that is ``""`` (or only spaces) is
decoded as an event with that query, so a passthrough chain reproduces it byte for
byte; whether such an event is kept is a filter's decision (``hipaa_scrub``'s
``emptied``, a ``drop`` rule). A record is bad (a dead letter, by reason) only when
its framing or shape is wrong: a TSV line whose column count is not the header's
(``wrong_column_count``; a short line that lacks the query column is one), a JSON
line that is not JSON (``invalid_json``) or not an object (``json_not_object``), has
no query key or a null one (``missing_query``: there is no query at all, which is
not the same as an empty one), a query that is not a string (``query_not_string``),
no user (``missing_user``), a lone UTF-16 surrogate (``lone_surrogate``), or nesting thousands deep
(``json_too_deep``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sidecar.api import (
    AOL_COLUMNS,
    ROLES,
    BadRecord,
    Codec,
    ConfigValueError,
    Event,
    FieldError,
    RolesConfig,
    SchemaConfig,
)
from sidecar.records import LINE_BREAKS, breaks_framing, carried_fields, escape_breaks, foreign_record

__all__ = [
    "AOL_COLUMNS",
    "LINE_BREAKS",
    "JsonlCodec",
    "RolesConfig",
    "SchemaConfig",
    "TsvCodec",
    "carried_fields",
    "codec_for",
    "foreign_record",
    "format_from_path",
]


def _text(value: Any) -> str:
    return "" if value is None else str(value)


class TsvCodec(Codec):
    """Tab-separated records (AOL: ``AnonID Query QueryTime ItemRank ClickURL``)."""

    format = "tsv"

    def __init__(self, schema: SchemaConfig) -> None:
        self.schema = schema
        self.has_header = schema.header
        self._header_line: str | None = None
        self._set_columns(schema.columns)

    def _set_columns(self, columns: Iterable[str]) -> None:
        self.columns = tuple(columns)
        self.ncols = len(self.columns)
        index = {name: i for i, name in enumerate(self.columns)}
        roles = self.schema.roles.mapping()
        missing = [r for r, col in roles.items() if col is not None and col not in index]
        if missing:
            names = ", ".join(f"{r}={roles[r]}" for r in missing)
            raise ConfigValueError("schema.roles", f"role column(s) not in the record's columns: {names}", self.columns)
        self.idx: tuple[int | None, ...] = tuple(index[col] if col is not None else None for col in roles.values())
        user_i, query_i = self.idx[0], self.idx[1]
        if user_i is None or query_i is None:  # typed str in RolesConfig; the loader rejects null
            raise ConfigValueError("schema.roles", "the user and query roles need a column")
        self._user_query = (user_i, query_i)
        ti, ri, li = self._optional_idx = self.idx[2:]
        #: The column of every role when all five have one (the fast path of ``decode_many``).
        self._all_idx = (user_i, query_i, ti, ri, li) if ti is not None and ri is not None and li is not None else None
        self._role_columns = frozenset(col for col in roles.values() if col is not None)

    def accept_header(self, line: str) -> None:
        self._header_line = line
        self._set_columns(line.rstrip("\r").split("\t"))

    def decode(self, line: str, eol: str) -> Event:
        body = line[:-1] if line.endswith("\r") else line
        fields = body.split("\t")
        if len(fields) != self.ncols:
            raise BadRecord("wrong_column_count")
        if breaks_framing(body):
            raise BadRecord("field_breaks_framing")  # TSV cannot escape: a reader would split this record
        ui, qi = self._user_query
        ti, ri, li = self._optional_idx
        return Event(
            fields[ui],
            fields[qi],
            fields[ti] if ti is not None else None,
            fields[ri] if ri is not None else None,
            fields[li] if li is not None else None,
            fields,
            line,
            self,
            eol,
        )

    def decode_many(self, lines: Sequence[str], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        """Fast path: decode complete lines; bad ones are appended to ``bad`` as (index, reason).

        Only the framing makes a line bad (``wrong_column_count``, ``field_breaks_framing``): an empty query is
        an event."""
        ncols = self.ncols
        out: list[Event] = []
        append = out.append
        if self._all_idx is None or breaks_framing("".join(lines)):  # one scan of the batch for the rare case
            for i, line in enumerate(lines):
                try:
                    append(self.decode(line, eol))
                except BadRecord as exc:
                    bad.append((i, exc.reason))
            return out
        ui, qi, ti, ri, li = self._all_idx
        for i, line in enumerate(lines):
            fields = line.split("\t")
            if len(fields) != ncols or line[-1:] == "\r":
                try:
                    append(self.decode(line, eol))
                except BadRecord as exc:
                    bad.append((i, exc.reason))
                continue
            append(Event(fields[ui], fields[qi], fields[ti], fields[ri], fields[li], fields, line, self, eol))
        return out

    def encode(self, event: Event) -> str:
        if event.codec is self:
            fields = event.record
            ui, qi, ti, ri, li = self.idx
            if (
                event.raw is not None
                and fields[qi] is event.query
                and fields[ui] is event.user
                and (ti is None or fields[ti] is event.time)
                and (ri is None or fields[ri] is event.rank)
                and (li is None or fields[li] is event.url)
            ):
                return event.raw
            fields = list(fields)
            for role, i in zip(ROLES, self.idx, strict=True):
                if i is not None:
                    fields[i] = _text(getattr(event, role))
            line = self._framed("\t".join(fields))
            raw = event.raw
            return line + "\r" if raw is not None and raw[-1:] == "\r" else line
        return self._framed("\t".join(self._fresh(event)))

    def _framed(self, line: str) -> str:
        """``line`` when its values cannot break the record framing; else :class:`BadRecord`.

        The rule: a TSV value never holds a tab or a code point of :data:`LINE_BREAKS` (no escaping: a
        consumer of the log reads it as it always did). A record whose value does (a gRPC field with a
        forged line, a tab in a rank) is dead-lettered by the sink, never written.
        """
        if line.count("\t") != self.ncols - 1 or breaks_framing(line):
            raise BadRecord("field_breaks_framing")
        return line

    def fields(self, event: Event) -> Mapping[str, Any]:
        if event.codec is not self:
            return {}
        role_cols = self._role_columns
        return {c: v for c, v in zip(self.columns, event.record, strict=False) if c not in role_cols}

    def layout(self, event: Event) -> list[tuple[str, str | None]]:
        """The record's columns in order, each with the role it plays (None: a carried field)."""
        role_of = {col: role for role, col in self.schema.roles.mapping().items() if col is not None}
        return [(c, role_of.get(c)) for c in self.columns] if event.codec is self else []

    def get_field(self, event: Event, name: str) -> Any:
        try:
            return event.record[self.columns.index(name)]
        except (ValueError, IndexError, TypeError):
            raise FieldError("no_such_field") from None

    def set_field(self, event: Event, name: str, value: Any) -> None:
        if event.codec is not self:
            raise FieldError("unsupported_codec")
        if name not in self.columns:
            raise FieldError("no_such_field")  # the output keeps the input's columns
        if name in self._role_columns:
            raise FieldError("field_is_role")
        i = self.columns.index(name)
        text = _text(value)
        if "\t" in text or breaks_framing(text):
            raise FieldError("value_breaks_framing")
        fields = list(event.record)
        fields[i] = text
        event.record = fields
        raw = event.raw
        if raw is not None:
            event.raw = "\t".join(fields) + ("\r" if raw.endswith("\r") else "")

    def remove_field(self, event: Event, name: str) -> None:
        """A TSV record keeps its columns: the field is emptied."""
        self.set_field(event, name, "")

    def _fresh(self, event: Event) -> list[str]:
        carried = carried_fields(event)
        by_role = {col: getattr(event, role) for role, col in self.schema.roles.mapping().items() if col}
        return [_text(by_role[c]) if c in by_role else _text(carried.get(c)) for c in self.columns]

    def header_for_output(self) -> str | None:
        """Header to write when the output is TSV but the input was not."""
        if self._header_line is not None:
            return self._header_line
        return "\t".join(self.columns) if self.has_header else None


class JsonlCodec(Codec):
    """One JSON object per line; roles mapped to top-level keys, other keys carried through."""

    format = "jsonl"

    def __init__(self, schema: SchemaConfig) -> None:
        self.schema = schema
        self.keys = schema.roles.mapping()
        self.pairs = tuple((role, key) for role, key in self.keys.items() if key is not None)
        self._role_keys = frozenset(key for _, key in self.pairs)

    def decode(self, line: str, eol: str) -> Event:
        return self._decode(line, eol, True)

    def _decode(self, line: str, eol: str, check: bool) -> Event:
        """``check``: look for a code point that breaks a line (the caller knows there is none when False)."""
        body = line[:-1] if line.endswith("\r") else line
        try:
            record = json.loads(body)
        except ValueError:
            raise BadRecord("invalid_json") from None
        except RecursionError:  # thousands of nested arrays or objects: no record is shaped like that
            raise BadRecord("json_too_deep") from None
        if not isinstance(record, dict):
            raise BadRecord("json_not_object")
        try:
            surrogate = ("\\ud" in body or "\\uD" in body) and _lone_surrogate(record)
        except RecursionError:
            raise BadRecord("json_too_deep") from None
        if surrogate:
            raise BadRecord("lone_surrogate")  # valid JSON, but no UTF-8 output could carry it
        values = {role: record.get(key) for role, key in self.pairs}
        query = values.get("query")
        if not isinstance(query, str):
            raise BadRecord("missing_query" if query is None else "query_not_string")
        if values.get("user") is None:
            raise BadRecord("missing_user")
        get = values.get
        if check and breaks_framing(body):  # a bare CR as whitespace, NEL/LS/PS in a string: written escaped
            line = _dumps(record, line)
        return Event(get("user"), query, get("time"), get("rank"), get("url"), record, line, self, eol)

    def decode_many(self, lines: Sequence[str], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        out: list[Event] = []
        check = breaks_framing("".join(lines))  # one scan of the batch; a CRLF batch checks each line
        for i, line in enumerate(lines):
            try:
                out.append(self._decode(line, eol, check))
            except BadRecord as exc:
                bad.append((i, exc.reason))
        return out

    def fields(self, event: Event) -> Mapping[str, Any]:
        if event.codec is not self or not isinstance(event.record, dict):
            return {}
        role_keys = self._role_keys
        return {k: v for k, v in event.record.items() if k not in role_keys}

    def layout(self, event: Event) -> list[tuple[str, str | None]]:
        """The record's keys in order, each with the role it plays (None: a carried field)."""
        if event.codec is not self or not isinstance(event.record, dict):
            return []
        role_of = {key: role for role, key in self.pairs}
        return [(k, role_of.get(k)) for k in event.record]

    def get_field(self, event: Event, name: str) -> Any:
        record = event.record
        if not isinstance(record, dict) or name not in record:
            raise FieldError("no_such_field")
        return record[name]

    def set_field(self, event: Event, name: str, value: Any) -> None:
        if event.codec is not self or not isinstance(event.record, dict):
            raise FieldError("unsupported_codec")
        if name in self._role_keys:
            raise FieldError("field_is_role")
        record = dict(event.record)
        record[name] = value
        event.record = record
        if event.raw is not None:
            event.raw = _dumps(record, event.raw)

    def remove_field(self, event: Event, name: str) -> None:
        if event.codec is not self or not isinstance(event.record, dict):
            raise FieldError("unsupported_codec")
        if name in self._role_keys:
            raise FieldError("field_is_role")
        if name not in event.record:
            return
        record = {k: v for k, v in event.record.items() if k != name}
        event.record = record
        if event.raw is not None:
            event.raw = _dumps(record, event.raw)

    def encode(self, event: Event) -> str:
        if event.codec is self:
            record = event.record
            changed = event.raw is None
            for role, key in self.pairs:
                if record.get(key) is not getattr(event, role) and record.get(key) != getattr(event, role):
                    changed = True
                    break
            if not changed and event.raw is not None:  # not changed: raw is not None (checked first)
                return event.raw
            record = dict(record)
            for role, key in self.pairs:
                if key in record or getattr(event, role) is not None:
                    record[key] = getattr(event, role)
            return _dumps(record, event.raw or "")
        return escape_breaks(json.dumps(foreign_record(event, self.pairs), ensure_ascii=False, separators=(",", ":")))


def _lone_surrogate(record: dict[str, Any]) -> bool:
    """True when a decoded value holds a UTF-16 surrogate without its pair (``"\\ud800"``)."""
    try:
        json.dumps(record, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _dumps(record: dict[str, Any], raw: str) -> str:
    """A JSON line in the style of ``raw``: compact unless it had spaces after colons; CRLF kept; every code
    point of :data:`LINE_BREAKS` escaped."""
    compact = '": ' not in raw
    line = escape_breaks(json.dumps(record, ensure_ascii=False, separators=(",", ":") if compact else None))
    return line + "\r" if raw.endswith("\r") else line


def codec_for(schema: SchemaConfig, path: str | None) -> TsvCodec | JsonlCodec:
    """The TSV or JSON-lines codec for a schema, picking the format by file extension when ``auto`` (TSV when it
    says nothing). Any text format, a plugin's included: :func:`sidecar.textcodecs.text_codec`."""
    fmt: str = schema.format
    if fmt == "auto":
        fmt = format_from_path(path) or "tsv"
    if fmt not in ("tsv", "jsonl"):
        raise ConfigValueError("format", f"{fmt} records cannot be read here (tsv or jsonl only)")
    return TsvCodec(schema) if fmt == "tsv" else JsonlCodec(schema)


def format_from_path(path: str | None) -> str | None:
    if not path or path == "-":
        return None
    name = path[:-3] if path.endswith(".gz") else path
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith((".tsv", ".txt", ".tab")):
        return "tsv"
    return None
