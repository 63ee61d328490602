"""The unchanged-line fast path: a JSON record the chain left as it came whose values all go into their columns as
text is sent as its own line (no decode, convert, re-encode)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from adapters.clickhouse.schema import DATETIME, Column
from sidecar.api import Event


@dataclass(frozen=True)
class FastPath:
    """What of a table the fast path needs: the columns a text value goes into unconverted (``text``; a ``typed``
    one only when not empty, a ``times`` one only in the AOL format) and those a record cannot leave out
    (``must_have``: not String, not Nullable, no DEFAULT)."""

    text: frozenset[str]
    typed: frozenset[str]
    times: frozenset[str]
    must_have: tuple[str, ...]

    @classmethod
    def of(cls, described: Mapping[str, Column]) -> FastPath:
        typed = frozenset(n for n, c in described.items() if c.kind in ("time", "number"))
        return cls(
            text=typed | {n for n, c in described.items() if c.kind == "string"},
            typed=typed,
            times=frozenset(n for n, c in described.items() if c.kind == "time"),
            must_have=tuple(
                n for n, c in described.items() if c.kind != "string" and not c.nullable and not c.default_kind
            ),
        )

    def line(self, ev: Event) -> bytes | None:
        """The event's own JSON line when it is its row as it stands: the record is unchanged (the identity rule),
        each key is a column, each value text that goes into its column unconverted (not empty for a typed one),
        and every column the record lacks may be left out. Else None (the row is built value by value)."""
        raw: str | None = ev.raw
        record, codec = ev.record, ev.codec
        if raw is None or type(record) is not dict:
            return None
        text_line: str = raw  # (mypy narrows ``raw`` to Any by the identity check below)
        if codec is None or codec.encode(ev) is not raw:
            return None
        text, typed, times = self.text, self.typed, self.times
        for key, value in record.items():
            if type(value) is not str or key not in text or (key in typed and not value.strip()):
                return None
            if key in times and DATETIME.fullmatch(value) is None:
                return None  # an RFC 3339 time, say: converted
        for column in self.must_have:
            if column not in record:
                return None
        return (text_line[:-1] if text_line.endswith("\r") else text_line).encode("utf-8")
