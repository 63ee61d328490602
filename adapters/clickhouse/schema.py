"""Records to ClickHouse rows: which field fills which column, value conversion, inferred tables, mismatches.

Values go out as JSONEachRow values that ClickHouse 18.16 reads into the column's type: text as it is, numbers
as numbers (quoted text into a number column is parsed by ClickHouse), a JSON object or array into a String
column as its JSON text, an RFC 3339 time (what Vector sends) into a DateTime column as the unix seconds of the
instant it names (:func:`to_datetime`). A missing, null or (for a non-String column) empty value becomes NULL in a
Nullable column, the column's default when it has a DEFAULT, and is otherwise refused (the row is dead-lettered as
``empty_value_for_typed_column``) instead of silently becoming ``0`` or ``0000-00-00 00:00:00``; a String
column without Nullable takes its default (``""``), an ``Array(String)`` its default (or ``[]``). A list goes into
an ``Array(String)`` column with each item that is no text as its JSON text (``7`` -> ``"7"``).
"""

from __future__ import annotations

import calendar
import datetime as dt
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sidecar.api import ROLES, Event, SinkError
from sidecar.netsink import PeerAnswer

#: A value the record does not have (a JSON key that is absent).
MISSING: Any = object()
#: A converter's answer meaning "leave the key out of the row" (ClickHouse fills the column's default).
OMIT: Any = object()

#: What ClickHouse 18.16 reads into a DateTime column from JSONEachRow without extra settings, and writes back
#: unchanged (the AOL QueryTime format); unix seconds work too but come back formatted.
DATETIME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}")
#: An RFC 3339 (or ISO 8601) time: ``T`` or a space, any fraction, ``Z``, an offset or none.
RFC3339 = re.compile(r"(\d{4}-\d\d-\d\d)[Tt ](\d\d:\d\d:\d\d)(\.\d+)?([Zz]|[+-]\d\d:?\d\d)?")

#: ClickHouse error codes that mean "this data cannot go into this table" (the row, not the server, is wrong):
#: CANNOT_PARSE_TEXT, _ESCAPE_SEQUENCE, _QUOTED_STRING, _INPUT_ASSERTION_FAILED, ATTEMPT_TO_READ_AFTER_EOF,
#: CANNOT_READ_ALL_DATA, CANNOT_PARSE_DATE, _DATETIME, TYPE_MISMATCH, ARGUMENT_OUT_OF_BOUND,
#: CANNOT_CONVERT_TYPE, CANNOT_PARSE_NUMBER, INCORRECT_DATA, TOO_LARGE_STRING_SIZE,
#: CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN, CANNOT_PARSE_UUID.
DATA_ERROR_CODES = frozenset({6, 25, 26, 27, 32, 33, 38, 41, 53, 69, 70, 72, 117, 131, 349, 376})


#: MergeTree's virtual columns (ClickHouse 18.16): a real column so named reads back as the virtual one's value.
VIRTUAL_COLUMNS = frozenset({"_part", "_part_index", "_partition_id", "_sample_factor"})
#: The longest column name, as ClickHouse names the column's data files (``%XX`` for each byte that is no ASCII
#: letter, digit or ``_``), that leaves room in a 255-byte file name for the longest suffix a created column gets
#: (``.null.mrk``, Nullable): a longer one is created, but no INSERT can write it (error 76, CANNOT_OPEN_FILE).
FILE_NAME_MAX = 255 - len(".null.mrk")
#: ClickHouse error codes that mean a CREATE TABLE statement cannot be, i.e. its column names (the records' keys):
#: SYNTAX_ERROR (also a statement over max_query_size), TOO_DEEP_AST, TOO_BIG_AST.
CREATE_DATA_CODES = frozenset({62, 167, 168})
_FILE_SAFE = re.compile(rb"[A-Za-z0-9_]+")


def column_name_ok(name: str) -> bool:
    """Whether ``create_table`` may make ``name`` a column: not empty (ClickHouse refuses it), UTF-8 (no lone
    surrogate), no MergeTree virtual column, and short enough for its data files' names (:data:`FILE_NAME_MAX`)."""
    if not name or name in VIRTUAL_COLUMNS or len(name) > FILE_NAME_MAX:
        return False
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    unsafe = len(_FILE_SAFE.sub(b"", raw))
    return len(raw) + 2 * unsafe <= FILE_NAME_MAX


class Reject(Exception):
    """A record that cannot become a row of the table; ``reason`` is a slug (dead-letter reason), ``field`` the
    name of the field at fault when one is (a name, never a value)."""

    def __init__(self, reason: str, field: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.field = field


_CODE = re.compile(rb"Code: (\d+)")


class ClickHouseError(Exception):
    """ClickHouse answered with an error: the status and its error code, never its message."""

    def __init__(self, peer: str, status: int, code: int | None, doing: str) -> None:
        super().__init__(f"ClickHouse at {peer} answered HTTP {status} (error code {code}) to {doing}")
        self.status = status
        self.code = code


class ColumnsRefused(ClickHouseError):
    """ClickHouse refused to create the table for its column names (:data:`CREATE_DATA_CODES`), the narrowest set
    of columns the records need included."""


def error_code(answer: PeerAnswer) -> int | None:
    m = _CODE.search(answer.body[:200])
    return int(m.group(1)) if m else None


class TableMismatch(SinkError):
    """The table's columns do not fit the records (names only in the message, never a value)."""


@dataclass(frozen=True)
class Column:
    """A table column as ``DESCRIBE TABLE`` shows it."""

    name: str
    type: str
    default_kind: str = ""  # DEFAULT, MATERIALIZED, ALIAS or ""

    @property
    def nullable(self) -> bool:
        return unwrap(self.type)[1]

    @property
    def kind(self) -> str:
        """``string``, ``time``, ``number`` or ``other``."""
        return kind_of(unwrap(self.type)[0])


def unwrap(ch_type: str) -> tuple[str, bool]:
    """The type inside ``Nullable(...)``/``LowCardinality(...)``, and whether it is Nullable."""
    t = ch_type.strip()
    nullable = False
    while True:
        m = re.fullmatch(r"(Nullable|LowCardinality)\((.*)\)", t)
        if m is None:
            return t, nullable
        nullable = nullable or m.group(1) == "Nullable"
        t = m.group(2).strip()


def to_datetime(text: str) -> Any:
    """``text`` as ClickHouse reads it into a DateTime: the AOL format (and any text that is no RFC 3339 time) as
    it is; an RFC 3339 time with ``Z`` or an offset as the unix seconds of that instant (the fraction dropped:
    DateTime counts seconds); one without as ``YYYY-MM-DD hh:mm:ss``, in the server's time zone as the AOL
    format is."""
    m = RFC3339.fullmatch(text)
    if m is None or DATETIME.fullmatch(text):
        return text
    day, clock, _, zone = m.groups()
    if zone is None:
        return f"{day} {clock}"
    try:
        moment = dt.datetime.fromisoformat(f"{day}T{clock}{'+00:00' if zone in 'Zz' else zone}")
    except ValueError:
        return text  # a day or an offset out of range: ClickHouse refuses it (the row is dead-lettered)
    return calendar.timegm(moment.utctimetuple())


def kind_of(base: str) -> str:
    name = base.split("(", 1)[0]
    if name in ("String", "FixedString", "UUID") or name.startswith("Enum"):
        return "string"
    if name in ("Date", "DateTime", "DateTime64"):
        return "time"
    if re.fullmatch(r"U?Int\d+|Float\d+|Decimal\d*", name):
        return "number"
    return "other"


def quote(name: str) -> str:
    """An identifier in backquotes (any column name a record may have)."""
    return "`" + name.replace("\\", "\\\\").replace("`", "\\`") + "`"


def _json_text(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


Converter = Callable[[Any], Any]


def converter(column: Column | None) -> Converter:
    """The function that turns a record value into the row value for ``column`` (None: the type is unknown)."""
    if column is None:
        return _generic
    kind, nullable, has_default = column.kind, column.nullable, bool(column.default_kind)
    datetime = unwrap(column.type)[0].split("(", 1)[0] == "DateTime"

    def empty() -> Any:
        if nullable:
            return None
        if has_default or kind == "string":
            return OMIT
        raise Reject("empty_value_for_typed_column")

    if kind == "string":

        def to_string(v: Any) -> Any:
            if v is MISSING or v is None:
                return empty()
            if isinstance(v, str):
                return v
            return _json_text(v)  # 1 -> "1", true -> "true", {"a": 1} -> '{"a":1}'

        return to_string
    if kind in ("time", "number"):

        def to_typed(v: Any) -> Any:
            if v is MISSING or v is None or (isinstance(v, str) and not v.strip()):
                return empty()
            if isinstance(v, bool):
                return int(v)
            if datetime and isinstance(v, str):
                return to_datetime(v)
            return v  # a number, or text that ClickHouse parses (or refuses: the row is dead-lettered)

        return to_typed

    if re.fullmatch(r"Array\((String|Nullable\(String\))\)", unwrap(column.type)[0].replace(" ", "")):

        def to_texts(v: Any) -> Any:
            if v is MISSING or v is None:
                return OMIT  # the column's default, else ClickHouse's: an empty list (no made-up value)
            if isinstance(v, list):  # an item that is no text as its JSON text, as into a String column
                return [x if x is None or isinstance(x, str) else _json_text(x) for x in v]
            return v  # not a list: ClickHouse refuses it (the row is dead-lettered)

        return to_texts

    def to_other(v: Any) -> Any:
        return empty() if v is MISSING or v is None else v

    return to_other


def _generic(v: Any) -> Any:
    """The table's types are not known yet (ClickHouse was unreachable): the value as it is."""
    return None if v is MISSING else v


def record_fields(event: Event, pairs: Sequence[tuple[str, str]]) -> dict[str, Any]:
    """The record's fields by name, with the (possibly changed) role values; ``pairs``: (role, field)."""
    record = event.record
    codec = event.codec
    columns = getattr(codec, "columns", None)
    text_columns = isinstance(record, list) and isinstance(columns, tuple)
    if isinstance(record, dict):
        out = dict(record)
    elif text_columns:
        out = dict(zip(columns, record))  # type: ignore[arg-type]  # a TSV record: its columns by name
    else:  # another format: the non-role fields its codec carries
        out = dict(codec.fields(event)) if codec is not None else {}
    for role, key in pairs:
        value = getattr(event, role)
        if value is None and text_columns:
            value = ""  # a TSV field is text: as the TSV encoder writes it
        if key in out or value is not None:
            out[key] = value
    return out


def retype(converters: Mapping[str, Converter], fields: Mapping[str, Any]) -> dict[str, Any]:
    """A row by column name converted to the table's types (``converters`` by column); :class:`Reject` for a key
    the table lacks. Columns the row lacks get NULL, their default, or a refusal (see :func:`converter`)."""
    row: dict[str, Any] = {}
    for key, raw in fields.items():
        conv = converters.get(key)
        if conv is None:
            raise Reject("field_not_in_table", key)
        value = conv(raw)
        if value is not OMIT:
            row[key] = value
    for column, conv in converters.items():
        if column not in fields:
            value = conv(MISSING)
            if value is not OMIT:
                row[column] = value
    return row


def typed_lines(
    converters: Mapping[str, Converter], lines: list[bytes], untyped: bytes, encode: Callable[[Any], str]
) -> tuple[list[bytes], list[tuple[str, str, str | None]]]:
    """``lines`` with each one that starts with ``untyped`` (a row written before the table's types were known)
    converted by :func:`retype`; those that cannot be come back apart as (reason, their JSON text, field)."""
    out: list[bytes] = []
    refused: list[tuple[str, str, str | None]] = []
    for line in lines:
        if line[:1] != untyped:
            out.append(line)
            continue
        text = line[len(untyped) :].decode("utf-8")
        try:
            out.append(encode(retype(converters, json.loads(text))).encode("utf-8"))
        except Reject as exc:
            refused.append((exc.reason, text, exc.field))
        except (TypeError, ValueError):  # a value JSON cannot carry
            refused.append(("unencodable_record", text, None))
    return out, refused


def role_pairs(roles: Mapping[str, str | None]) -> tuple[tuple[str, str], ...]:
    return tuple((role, key) for role, key in roles.items() if role in ROLES and key is not None)


def infer_type(role: str | None, values: Iterable[Any], time_type: str) -> str:
    """The column type ``create_table`` gives a field, from its role and the first batch's values."""
    values = list(values)
    present = [v for v in values if v is not MISSING and v is not None]
    nullable = len(present) < len(values) or not values
    if role == "time":
        filled = [v for v in present if not (isinstance(v, str) and not v.strip())]
        fits = bool(filled) and all(isinstance(v, str) and DATETIME.fullmatch(v) for v in filled)
        if time_type == "DateTime" or (time_type == "auto" and fits):
            base = "DateTime"
            nullable = nullable or len(filled) < len(present)  # an empty time becomes NULL
        else:
            base = "String"
    elif role is not None or not present:
        base = "String"
    elif all(isinstance(v, bool) for v in present):
        base = "UInt8"
    elif all(isinstance(v, int) and not isinstance(v, bool) for v in present):
        base = "Int64"
    elif all(isinstance(v, int | float) and not isinstance(v, bool) for v in present):
        base = "Float64"
    else:
        base = "String"
    return f"Nullable({base})" if nullable else base


def create_statement(
    table: str,
    columns: Sequence[tuple[str, str]],
    sample: Sequence[Mapping[str, Any]],
    roles: Mapping[str, str],
    time_type: str,
) -> str:
    """``CREATE TABLE IF NOT EXISTS`` for ``columns`` ((column, field)); ``roles``: field -> role."""
    defs = []
    for column, field in columns:
        ch_type = infer_type(roles.get(field), (row.get(field, MISSING) for row in sample), time_type)
        defs.append(f"{quote(column)} {ch_type}")
    return f"CREATE TABLE IF NOT EXISTS {table} ({', '.join(defs)}) ENGINE = MergeTree ORDER BY tuple()"


#: What a mismatch message suggests by default.
MAP_HINT = "Change the table, or map record fields to its columns with `columns: {column: field}`."


def check_columns(
    table: str,
    described: Mapping[str, Column],
    required: Sequence[str],
    filled: Sequence[str] | None = None,
    hint: str = MAP_HINT,
) -> None:
    """:class:`TableMismatch` when a column every record fills (``required``) is not in the table, or a table
    column that no record field fills (``filled``, default: ``required``) could only get a made-up value (not
    Nullable, no DEFAULT)."""
    missing = [c for c in required if c not in described]
    wanted = set(filled if filled is not None else required)
    unfilled = [c.name for c in described.values() if c.name not in wanted and not c.nullable and not c.default_kind]
    if not missing and not unfilled:
        return
    problems = []
    if missing:
        problems.append(f"the table has no column {', '.join(missing)}")
    if unfilled:
        problems.append(f"no record field fills column {', '.join(unfilled)} (not Nullable, no DEFAULT)")
    raise TableMismatch(
        f"ClickHouse table {table} does not match the records: {'; '.join(problems)}. The table has: "
        f"{', '.join(f'{c.name} {c.type}' for c in described.values())}. {hint}"
    )
