"""What travels with the user and what with the query, and the released event.

The released event is the query's own event (its record, so the output keeps
the input schema and every query-side field) carrying the drawn user's side:
the user role, the other ``user_roles``, the ``user_fields`` (non-role record
fields, read and written through the codec: ``get_field``/``set_field``) and,
with ``time: user``, the user's time. Its annotations are the query's (so
``profile`` counts the query's category for the new user, as paper 001's
profiler does).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from filters.category_buffer.buckets import Held
from filters.category_buffer.config import CategoryBufferConfig
from sidecar.api import ROLES, Codec, Event, FieldError


def read_field(ev: Event, name: str, codec: Codec | None) -> Any:
    """Record field ``name`` of ``ev`` read by ``codec``; None when there is no such field (or no codec)."""
    if codec is None:
        return None
    try:
        return codec.get_field(ev, name)
    except FieldError:
        return None


def reads_back(codec: Codec, ev: Event) -> bool:
    """True when ``codec`` can stand for the codec that decoded a restored ``ev``: it reads the same role values
    from its record. A JSON object names its keys, so any JSON codec does; a record of fields (TSV) is in the
    column order of the codec that read it, which another codec of the format may not share (a file read with a
    header of its own): that codec would write the roles into other columns."""
    if type(ev.record) is not list:
        return True
    line = ev.raw if isinstance(ev.raw, str) else "\t".join(str(f) for f in ev.record)
    bad: list[tuple[int, str]] = []
    try:
        back = codec.decode_many([line], ev.eol, bad)
    except Exception:  # a codec of another kind of record
        return False
    return len(back) == 1 and not bad and all(getattr(back[0], r) == getattr(ev, r) for r in ROLES)


class Sides:
    """Splits an event into its user side (:meth:`user_values`) and builds released events (:meth:`emit`).

    ``codecs`` is the filter's codec of each format seen in a batch, ``lookup`` the runtime's codec by format
    name (``BuildContext.codec_for``): an event restored from the state store without its codec is read and
    written with the first of them that knows its format, so it keeps its own format (keys, key order, fields)
    whichever source's batch releases it. ``counts`` gets ``user_field_not_set`` for a user field the output
    record cannot carry (the query's own value is then not replaced either).
    """

    def __init__(
        self,
        config: CategoryBufferConfig,
        codecs: Mapping[str | None, Codec],
        counts: Counter[str],
        lookup: Callable[[str | None], Codec | None] = lambda fmt: None,
    ) -> None:
        self.roles = tuple(r for r in config.user_roles if r != "user")
        self.fields = config.user_fields
        self.time = config.time
        #: only the user id travels with the user; time is the query's or the release time
        self.simple = not self.roles and not self.fields and self.time != "user"
        self.codecs = codecs
        self.lookup = lookup
        self.counts = counts

    def user_values(self, ev: Event, codec: Codec | None) -> tuple[Any, ...]:
        """The user role's value, the other user-side roles, the user fields (read by ``codec``), then
        the user's time when ``time: user``."""
        if self.simple:
            return (ev.user,)
        values = (ev.user, *(getattr(ev, r) for r in self.roles))
        if self.fields:
            values += tuple(read_field(ev, f, codec) for f in self.fields)
        if self.time == "user":
            values += (ev.time,)
        return values

    def restored_values(self, ev: Event) -> tuple[Any, ...] | None:
        """The user side of an event restored from the state store; None when it has user fields and no codec of
        its own: they are read when it is released, by the codec of its format (:meth:`codec_of`)."""
        if self.fields and ev.codec is None:
            return None
        return self.user_values(ev, ev.codec)

    def codec_of(self, h: Held) -> Codec | None:
        """The codec of a held event: its own, else the batch codec of its format, else the runtime's codec of
        its format (a format no source of this process has sent yet), each only when it reads the record back
        (:func:`reads_back`); None: the sink converts it from its roles."""
        codec = h.event.codec
        if codec is not None:
            return codec
        codec = self.codecs.get(h.fmt)
        if codec is not None and reads_back(codec, h.event):
            return codec
        codec = self.lookup(h.fmt) if h.fmt is not None else None
        return codec if codec is not None and reads_back(codec, h.event) else None

    def emit(self, q: Held, u: Held, stream_time: Any) -> Event:
        """The output: a copy of the query's event carrying the drawn user's side.

        ``stream_time`` is the time of the arrival that triggered the release
        (``time: release``; the query's own time when there is none).
        """
        src = q.event
        uv = u.uvalues if u.uvalues is not None else self.user_values(u.event, self.codec_of(u))
        time = self.time
        if time == "release" and stream_time is not None:
            t = stream_time
        elif time == "user":
            t = uv[-1]
        else:
            t = src.time
        codec = self.codec_of(q)
        ev = Event(uv[0], src.query, t, src.rank, src.url, src.record, src.raw, codec, src.eol)
        meta = src.meta
        if meta:
            ev.meta = meta.copy() if type(meta) is dict else dict(meta)
        if self.simple:
            return ev
        n = len(self.roles) + 1
        for role, value in zip(self.roles, uv[1:n]):
            setattr(ev, role, value)
        for name, value in zip(self.fields, uv[n : n + len(self.fields)]):
            self._set_field(ev, name, value)
        return ev

    def _set_field(self, ev: Event, name: str, value: Any) -> None:
        """Write a user field into the released record (a copy: the held event is never modified)."""
        if ev.codec is None:
            self.counts["user_field_not_set"] += 1
            return
        try:
            if value is None:  # the drawn user's record has no such field: neither does the output
                ev.codec.remove_field(ev, name)
            else:
                ev.codec.set_field(ev, name, value)
        except FieldError:
            self.counts["user_field_not_set"] += 1
