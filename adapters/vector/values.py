"""Vector values <-> Python values, without losing a type.

=======================  ==========================================================  =========================
``event.Value`` kind     Python value (``get_field``, role values)                   written back as
=======================  ==========================================================  =========================
``raw_bytes``            ``str`` when the bytes are UTF-8, else ``bytes``            ``raw_bytes`` (both)
``timestamp``            :class:`VectorTimestamp`: a ``str`` (RFC 3339, UTC) that     ``timestamp``, exact nanos
                         keeps the exact ``seconds`` and ``nanos``
``integer``              ``int``                                                     ``integer``
``float``                ``float``                                                   ``float``
``boolean``              ``bool``                                                    ``boolean``
``map``                  ``dict`` (keys in key order)                                ``map``
``array``                ``list``                                                    ``array``
``null`` (or no kind)    ``None``                                                    ``null``
=======================  ==========================================================  =========================

**Bytes vs string.** Vector has one text kind: every string is ``raw_bytes``. So the record keeps "this
was bytes" by construction: a ``str`` and a ``bytes`` are both written as ``raw_bytes``, and a ``str``
decoded from UTF-8 bytes encodes to the very same bytes. A value that is not UTF-8 stays ``bytes`` (no
filter reads text out of it). Values from other formats follow the same table (a JSON string becomes
``raw_bytes``; a ``datetime`` becomes a ``timestamp``).

**Timestamps** are ``str`` so filters and other formats (JSON lines, TSV) see the RFC 3339 text Vector's
own JSON encoding writes (``2024-05-01T12:00:00.123456789Z``; 0, 3, 6 or 9 fraction digits), while
:attr:`VectorTimestamp.seconds`/:attr:`~VectorTimestamp.nanos` keep the protobuf value exactly. A plain
``str`` written where a timestamp was (a role value restored from the state store, a filter's new time)
becomes a timestamp again when it parses as one (:meth:`VectorTimestamp.parse`).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping
from typing import Any

from adapters.vector.stubs.event_pb2 import NULL_VALUE, Value
from sidecar.api import BadRecord

__all__ = ["VectorTimestamp", "plain", "set_value", "to_python"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MIN_SECONDS = -62135596800  # 0001-01-01T00:00:00Z
_MAX_SECONDS = 253402300799  # 9999-12-31T23:59:59Z
_INT64 = (-(2**63), 2**63 - 1)
_RFC3339 = re.compile(
    r"(\d{4})-(\d\d)-(\d\d)[Tt ](\d\d):(\d\d):(\d\d)(?:\.(\d{1,9}))?(?:([Zz])|([+-])(\d\d):(\d\d))\Z", re.ASCII
)
#: the text of a timestamp outside years 1-9999 (or with nanos outside 0..999999999): ``<seconds>s<+nanos>ns``
_RAW = re.compile(r"(-?\d+)s([+-]\d+)ns\Z", re.ASCII)


def _format(seconds: int, nanos: int) -> str:
    if not (_MIN_SECONDS <= seconds <= _MAX_SECONDS and 0 <= nanos <= 999_999_999):
        return f"{seconds}s{nanos:+d}ns"
    text = (_EPOCH + dt.timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")
    if text[0] != "0" and len(text) < 19:  # strftime does not pad years below 1000 everywhere
        text = text.zfill(19)
    if nanos == 0:
        return text + "Z"
    if nanos % 1_000_000 == 0:
        return f"{text}.{nanos // 1_000_000:03d}Z"
    if nanos % 1000 == 0:
        return f"{text}.{nanos // 1000:06d}Z"
    return f"{text}.{nanos:09d}Z"


class VectorTimestamp(str):
    """A Vector ``timestamp``: its RFC 3339 text (UTC, ``Z``), keeping the exact ``seconds`` and ``nanos``."""

    seconds: int
    nanos: int

    def __new__(cls, seconds: int, nanos: int = 0) -> VectorTimestamp:
        obj = super().__new__(cls, _format(seconds, nanos))
        obj.seconds = seconds
        obj.nanos = nanos
        return obj

    def __reduce__(self) -> tuple[Any, ...]:
        return (VectorTimestamp, (self.seconds, self.nanos))

    @classmethod
    def parse(cls, text: str) -> VectorTimestamp | None:
        """The timestamp an RFC 3339 text names (any offset; up to 9 fraction digits), else None."""
        if isinstance(text, VectorTimestamp):
            return text
        m = _RFC3339.match(text)
        if m is None:
            raw = _RAW.match(text)
            return cls(int(raw[1]), int(raw[2])) if raw is not None else None
        year, month, day, hour, minute, second, frac, zulu, sign, oh, om = m.groups()
        try:
            moment = dt.datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=dt.UTC)
        except ValueError:
            return None
        seconds = (moment - _EPOCH) // dt.timedelta(seconds=1)
        if not zulu:
            offset = int(oh) * 3600 + int(om) * 60
            seconds -= offset if sign == "+" else -offset
        nanos = int(frac.ljust(9, "0")) if frac else 0
        return cls(seconds, nanos)

    @classmethod
    def from_datetime(cls, moment: dt.datetime) -> VectorTimestamp:
        """A ``datetime`` (naive: UTC) as a timestamp, to the microsecond."""
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=dt.UTC)
        delta = moment - _EPOCH
        return cls(delta.days * 86400 + delta.seconds, delta.microseconds * 1000)


def to_python(v: Value) -> Any:
    """The Python value of an ``event.Value`` (see the table above)."""
    kind = v.WhichOneof("kind")
    if kind == "raw_bytes":
        data = v.raw_bytes
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data
    if kind == "integer":
        return v.integer
    if kind == "timestamp":
        return VectorTimestamp(v.timestamp.seconds, v.timestamp.nanos)
    if kind == "float":
        return v.float
    if kind == "boolean":
        return v.boolean
    if kind == "map":
        fields = v.map.fields
        return {k: to_python(fields[k]) for k in sorted(fields)}
    if kind == "array":
        return [to_python(item) for item in v.array.items]
    return None  # null, or a Value with no kind


def plain(v: Value) -> Any:
    """The value for another format (JSON lines, TSV): text for bytes (invalid UTF-8 replaced) and timestamps."""
    kind = v.WhichOneof("kind")
    if kind == "raw_bytes":
        return v.raw_bytes.decode("utf-8", "replace")
    if kind == "timestamp":
        return str(VectorTimestamp(v.timestamp.seconds, v.timestamp.nanos))
    if kind == "map":
        fields = v.map.fields
        return {k: plain(fields[k]) for k in sorted(fields)}
    if kind == "array":
        return [plain(item) for item in v.array.items]
    return to_python(v)


def set_value(v: Value, x: Any, like: str | None = None) -> None:
    """Write Python value ``x`` into the (cleared) ``event.Value`` ``v``; ``like`` is the kind the field had.

    Raises :class:`BadRecord` (``lone_surrogate``, ``integer_out_of_range``, ``unsupported_value_type``) for a
    value Vector cannot carry.
    """
    t = type(x)
    if t is str:
        if like == "timestamp":
            ts = VectorTimestamp.parse(x)
            if ts is not None:
                _set_timestamp(v, ts)
                return
        try:
            v.raw_bytes = x.encode("utf-8")
        except UnicodeEncodeError:
            raise BadRecord("lone_surrogate") from None
    elif t is VectorTimestamp:
        _set_timestamp(v, x)
    elif t is bool:
        v.boolean = x
    elif t is int:
        if not _INT64[0] <= x <= _INT64[1]:
            raise BadRecord("integer_out_of_range")
        v.integer = x
    elif t is float:
        v.float = x
    elif x is None:
        v.null = NULL_VALUE
    elif isinstance(x, bytes | bytearray | memoryview):
        v.raw_bytes = bytes(x)
    elif isinstance(x, Mapping):
        v.map.SetInParent()
        fields = v.map.fields
        for key, item in x.items():
            set_value(fields[str(key)], item)
    elif isinstance(x, list | tuple):
        v.array.SetInParent()
        items = v.array.items
        for item in x:
            set_value(items.add(), item)
    elif isinstance(x, dt.datetime):
        _set_timestamp(v, VectorTimestamp.from_datetime(x))
    elif isinstance(x, str):  # another str subclass
        set_value(v, str(x), like)
    elif isinstance(x, int):  # IntEnum and the like (bool was handled above)
        set_value(v, int(x), like)
    elif isinstance(x, float):
        v.float = float(x)
    else:
        raise BadRecord("unsupported_value_type")


def _set_timestamp(v: Value, ts: VectorTimestamp) -> None:
    stamp = v.timestamp
    stamp.SetInParent()
    try:
        stamp.seconds = ts.seconds
        stamp.nanos = ts.nanos
    except ValueError:
        raise BadRecord("timestamp_out_of_range") from None
