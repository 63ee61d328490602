"""Access-log lines <-> events (``format: access_log``), from the server's own format string.

``schema.log_format`` (nginx ``log_format``, ``combined`` by default) or ``schema.apache_format`` (Apache
``LogFormat``, ``common``/``combined`` built in) says how a line is made (:mod:`adapters.accesslog.formats`).
Roles name variables: ``user: remote_addr`` (or ``cookie_sid``, ``remote_user``, ``http_x_user_id``...),
``time: time_local``, and the query is a URL parameter: ``query: request.q``, or several names,
``request.q|query|search_query``: the first name of the list that the URL has wins. A role left at its TSV default
(``AnonID``, ``Query``, ``QueryTime``, ``ItemRank``, ``ClickURL``: no access-log variable is called that) reads
``remote_addr``, ``request.q``, ``time_local`` (when the format has it), no rank, no url.

A line whose URL has none of the parameters (a static file, a product page), or whose path is not
``schema.search_path`` when that is set, is an event with the empty query; a filter that gives it a query makes it
a dead letter (``query_on_non_search_request``: there is no parameter to write it into).

The record is the sequence of the line's variable values as logged (escapes included), each name once, then the
decoded query. An unchanged event is written back as its line, byte for byte; a changed query is re-encoded in the
style it came in (:mod:`adapters.accesslog.urlparams`) in place, the rest of the URL untouched; a changed user or
time is escaped as the server escapes. The referer's query follows the request's (:mod:`adapters.accesslog.referer`).

Decoding is lazy (:mod:`adapters.accesslog.lazyevent`): a line is checked against the format when it is decoded
(a bad line is a dead letter there and then), and split into its values only when a role, the record or a field is
first read or set. A line nobody touched is written back as it came, its query (remembered for the referers) and
its referer's read from the parameters the line's pattern found (:mod:`adapters.accesslog.patterns`); a batch of
such lines is written at once by :meth:`AccessLogCodec.encode_many` (:mod:`adapters.accesslog.untouched`).

Bad records: ``line_does_not_match_format``. An event from another format cannot be written as an access-log
line (it has no request to put its query in): ``not_an_access_log_record``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, cast

from adapters.accesslog.escapes import escape, to_text
from adapters.accesslog.formats import FormatError, Layout, apache_layout, nginx_layout
from adapters.accesslog.lazyevent import LazyEvent, lazy_event
from adapters.accesslog.patterns import line_patterns
from adapters.accesslog.queryreader import QueryReader
from adapters.accesslog.referer import NOT_REMEMBERED
from adapters.accesslog.untouched import write_untouched
from adapters.accesslog.urlparams import decode_value
from sidecar.api import AOL_COLUMNS, NO_META, ROLES, BadRecord, Codec, ConfigValueError, Event, FieldError, SchemaConfig

__all__ = ["AccessLogCodec", "layout_of"]

REFERER = "http_referer"
_ACCESS_DEFAULTS = {"user": "remote_addr", "query": "request.q", "time": "time_local", "rank": None, "url": None}


def layout_of(schema: SchemaConfig) -> Layout:
    """The layout of the schema's format string; :class:`ConfigValueError` at its key when it is wrong."""
    if schema.apache_format is not None:
        if schema.log_format != "combined":
            raise ConfigValueError("apache_format", "set log_format (nginx) or apache_format, not both")
        key, text, parse = "apache_format", schema.apache_format, apache_layout
    else:
        key, text, parse = "log_format", schema.log_format, nginx_layout
    try:
        return parse(text)
    except FormatError as exc:
        raise ConfigValueError(key, str(exc)) from None


class AccessLogCodec(Codec):
    """nginx/Apache access-log lines; see the module documentation."""

    format = "access_log"

    def __init__(self, schema: SchemaConfig) -> None:
        self.schema = schema
        self.format_layout = layout = layout_of(schema)
        self.dialect = layout.dialect
        self.names = layout.names
        index = {name: i for i, name in enumerate(self.names)}
        self._slots = tuple(index[v] for v in layout.variables)
        self._n = len(self.names)
        roles = self._roles(schema, index)
        self._query_var, self._params = _query_role(roles["query"], index)
        self._qi = index[self._query_var]
        #: record index of each role but the query (None: the role has no variable)
        self._role_idx = {r: (index[v] if v is not None else None) for r, v in roles.items() if r != "query"}
        self._role_vars = {v: r for r, v in roles.items() if v is not None and r != "query"}
        self._role_vars[self._query_var] = "query"
        self._fast, self._slow, finds = line_patterns(
            layout, index, self._query_var, self._params, schema.search_path is not None
        )
        #: the fast pattern's group of each variable, in the order of ``names``
        self._groups = tuple(f"g{i}" for i in range(self._n))
        #: a line ending in "\r" cannot match the fast pattern (the format ends with a literal that is no "\r")
        self._cr_fails = layout.literals[-1][-1:] not in ("", "\r")
        self._ref = index.get(REFERER)
        ref_group = self._groups[self._ref] if self._ref is not None else None
        number = self._fast.groupindex
        self._reader = reader = QueryReader(
            self._query_var,
            self._params,
            schema.search_path,
            self.dialect,
            finds,
            (number[self._groups[self._qi]], number[ref_group] if ref_group is not None else None),
        )
        self._role_pairs = tuple((r, i) for r, i in self._role_idx.items() if i is not None)
        #: the query texts released, which referers follow (:mod:`adapters.accesslog.referer`)
        self.referer_memo = reader.memo
        #: the groups of the request's and the referer's parameter when the fast pattern finds both
        self._both = reader.both

    def _roles(self, schema: SchemaConfig, index: Mapping[str, int]) -> dict[str, str | None]:
        out: dict[str, str | None] = {}
        for role, aol in zip(ROLES, AOL_COLUMNS, strict=True):
            name = getattr(schema.roles, role)
            if name == aol:
                name = _ACCESS_DEFAULTS[role]
                if role == "time" and name not in index:
                    name = None
            var = name.partition(".")[0] if role == "query" and name is not None else name
            if var is not None and var not in index:
                raise ConfigValueError(f"roles.{role}", f"{var} is not a variable of the log format", self.names)
            out[role] = name
        return out

    # ---- decoding ---------------------------------------------------------------------------------------------

    def decode_many(self, lines: Sequence[str], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        """A lazy event for each line the fast pattern matches (split when first read); the others through
        :meth:`_decode_other`."""
        out: list[Event] = []
        append = out.append
        fast = self._fast.fullmatch
        if self._cr_fails and not (lines and lines[0][-1:] == "\r"):
            # the usual format and log: a line is tried as it is, its "\r" only stripped when it fails (a line
            # ending in "\r" cannot match; a log of them, CRLF, takes the loop at the end: stripped at once)
            lazy, no_meta = LazyEvent, NO_META
            matches = list(map(fast, lines))
            if all(matches):  # every line matched (the usual batch): lazy_event(line, m, self, eol) written out
                for line, found in zip(lines, cast("list[re.Match[str]]", matches)):
                    ev = lazy()
                    ev.raw = line
                    ev.match = found
                    ev.codec = self
                    ev.eol = eol
                    ev.meta = no_meta
                    append(ev)
                return out
            for i, (line, m) in enumerate(zip(lines, matches)):  # each line matched once
                if m is not None:  # lazy_event(line, m, self, eol) written out
                    ev = lazy()
                    ev.raw = line
                    ev.match = m
                    ev.codec = self
                    ev.eol = eol
                    ev.meta = no_meta
                    append(ev)
                else:
                    self._decode_other(i, line, eol, out, bad, line[-1:] == "\r")
            return out
        for i, line in enumerate(lines):
            m = fast(line[:-1] if line[-1:] == "\r" else line)
            if m is not None:
                append(lazy_event(line, m, self, eol))
            else:
                self._decode_other(i, line, eol, out, bad, False)
        return out

    def _decode_other(
        self, i: int, line: str, eol: str, out: list[Event], bad: list[tuple[int, str]], try_fast: bool
    ) -> None:
        """A line the fast pattern missed: matched without its "\r" (``try_fast``), or split by the slow
        pattern (an event split at once), or a dead letter."""
        body = line[:-1] if line[-1:] == "\r" else line
        m = self._fast.fullmatch(body) if try_fast else None
        if m is not None:
            out.append(lazy_event(line, m, self, eol))
            return
        m = self._slow.fullmatch(body)
        if m is None:
            bad.append((i, "line_does_not_match_format"))
            return
        groups = m.groups()
        ev = Event(None, None, raw=line, codec=self, eol=eol)
        self._fill(ev, (*groups, self._reader.query(groups[self._qi])))
        out.append(ev)

    def materialize(self, event: LazyEvent) -> None:
        """Split a lazy event's line into its values and roles; the event becomes a plain :class:`Event`."""
        m = event.match
        values = (*self._values(m), self._reader.query_of_match(m))
        event.__class__ = Event  # type: ignore[assignment]  # the same slots: LazyEvent adds none
        self._fill(event, values)

    def _values(self, m: re.Match[str]) -> tuple[str, ...]:
        """The variables' values (as logged) of a fast pattern's match."""
        return m.group(*self._groups) if self._n > 1 else (m.group(self._groups[0]),)

    def _fill(self, ev: Event, values: tuple[str, ...]) -> None:
        """Set the roles and the record of ``ev`` from the record's values."""
        ui, ti, ri, li = self._role_idx["user"], self._role_idx["time"], self._role_idx["rank"], self._role_idx["url"]
        user = values[ui] if ui is not None else None
        ev.user = to_text(user, self.dialect) if user is not None and "\\" in user else user
        ev.query = values[self._n]
        ev.time = values[ti] if ti is not None else None
        ev.rank = to_text(values[ri], self.dialect) if ri is not None else None
        ev.url = to_text(values[li], self.dialect) if li is not None else None
        ev.record = values

    # ---- encoding ---------------------------------------------------------------------------------------------

    def encode(self, event: Event) -> str:
        """The event's line; an untouched one (lazy, never read) is its own line unless its referer shows a search
        the chain did not release as it was. For the usual line (the pattern found both parameters) the query is
        remembered and the referer looked up right here, :meth:`QueryReader.untouched` written out: a passthrough
        spends its time in this method."""
        raw = event.raw
        if type(event) is not LazyEvent or raw is None or event.codec is not self:
            return self._encode_split(event)
        if self._ref is None:
            return raw
        m = event.match
        both = self._both
        if both is None:
            referer = self._reader.untouched(m, raw)
            return raw if referer is None else self._with_referer(m, referer, raw)
        q, r = m[both[0]], m[both[1]]
        if q is None:
            original = self._reader.query(m.group(self._reader.query_group))
        else:
            original = q.replace("+", " ") if "%" not in q and "\\" not in q else decode_value(q, self.dialect)
        memo = self.referer_memo
        recent = memo.recent
        if original and recent.get(original, NOT_REMEMBERED) is not None:  # memo.remember(original, original)
            recent[original] = None  # released as it was
            if len(recent) >= memo.size:
                memo.turn()
                recent = memo.recent
        if r is None:  # no parameter (in Apache's escaping, a backslash may hide one: the general reading)
            if self.dialect != "apache" or "\\" not in raw:
                return raw
        else:
            text = r.replace("+", " ") if "%" not in r and "\\" not in r else decode_value(r, self.dialect)
            if text == "":
                return raw
            was = recent.get(text, NOT_REMEMBERED)  # memo.get(text) == text: released as it was (not counted)
            if was is None or (was is NOT_REMEMBERED and memo.older.get(text, NOT_REMEMBERED) is None):
                return raw
        referer = self._reader.referer_of_match(m)
        return raw if referer is None else self._with_referer(m, referer, raw)

    def encode_many(self, events: Sequence[Event]) -> list[str] | None:
        """The lines of a batch whose every event is an untouched lazy event of this codec (what a passthrough
        writes): the lines, referer memory and counts :meth:`encode` gives them one by one, a batch at a time
        (:mod:`adapters.accesslog.untouched`). None for any other batch, or a format whose pattern does not find
        both parameters: the caller encodes each event."""
        lazy = LazyEvent
        lines = [e.raw for e in events if type(e) is lazy and e.codec is self and e.raw is not None]
        if len(lines) != len(events):
            return None
        if self._ref is None:
            return lines
        if self._both is None:
            return None
        lazies = cast("Sequence[LazyEvent]", events)  # each checked above
        return write_untouched(lines, lazies, self._both, self._reader, self._with_referer)

    def _encode_split(self, event: Event) -> str:
        """:meth:`encode` of an event that was read or changed (or is not this codec's)."""
        if event.codec is not self:
            raise BadRecord("not_an_access_log_record")
        if type(event) is LazyEvent:
            self.materialize(event)  # marked changed: written from its values
        values: Sequence[str] = event.record
        original = values[self._n]
        query = event.query
        if not isinstance(query, str):
            raise BadRecord("query_not_string")
        same_query = query is original or query == original
        same_roles = True
        for role, i in self._role_pairs:
            now = getattr(event, role)
            if now is not values[i] and not self._same(event, role, i):
                same_roles = False
                break
        referer = None
        if self._ref is not None:
            self.referer_memo.remember(original, query)
            referer = self._reader.referer(values[self._ref])
        raw = event.raw
        if same_query and same_roles and referer is None and raw is not None:
            return raw
        new = list(values[: self._n])
        if not same_query:
            new[self._qi] = self._reader.with_query(new[self._qi], query)
        if not same_roles:
            for role, i in self._role_pairs:
                if not self._same(event, role, i):
                    value = getattr(event, role)
                    new[i] = "-" if value is None else escape(str(value).encode("utf-8"), self.dialect)
        if referer is not None:
            assert self._ref is not None
            new[self._ref] = referer
        line = self._line(new)
        return line + "\r" if raw is not None and raw[-1:] == "\r" else line

    def _with_referer(self, m: re.Match[str], referer: str, raw: str) -> str:
        """The line of an untouched event (``m``: its match) with a new referer."""
        assert self._ref is not None
        values = list(self._values(m))
        values[self._ref] = referer
        line = self._line(values)
        return line + "\r" if raw[-1:] == "\r" else line

    def _same(self, event: Event, role: str, i: int) -> bool:
        now, was = getattr(event, role), event.record[i]
        return bool(now is was or now == to_text(was, self.dialect))

    def _line(self, values: Sequence[str]) -> str:
        lits = self.format_layout.literals
        parts = [lits[0]]
        for k, vi in enumerate(self._slots):
            parts.append(values[vi])
            parts.append(lits[k + 1])
        return "".join(parts)

    # ---- fields -----------------------------------------------------------------------------------------------

    def fields(self, event: Event) -> Mapping[str, Any]:
        """The variables that play no role, as text; the referer with its search query as released so far."""
        if event.codec is not self:
            return {}
        values = event.record
        out = {n: to_text(values[i], self.dialect) for i, n in enumerate(self.names) if n not in self._role_vars}
        if self._ref is not None and REFERER in out:
            ref = self._reader.referer(values[self._ref])
            if ref is not None:
                out[REFERER] = to_text(ref, self.dialect)
        return out

    def layout(self, event: Event) -> list[tuple[str, str | None]]:
        return [(n, self._role_vars.get(n)) for n in self.names] if event.codec is self else []

    def get_field(self, event: Event, name: str) -> Any:
        try:
            return to_text(event.record[self.names.index(name)], self.dialect)
        except (ValueError, IndexError, TypeError):
            raise FieldError("no_such_field") from None

    def set_field(self, event: Event, name: str, value: Any) -> None:
        """Set a variable (escaped as the server escapes); the line keeps its format."""
        if event.codec is not self:
            raise FieldError("unsupported_codec")
        if name not in self.names:
            raise FieldError("no_such_field")
        if name in self._role_vars:
            raise FieldError("field_is_role")
        values = list(event.record)
        values[self.names.index(name)] = "-" if value is None else escape(str(value).encode("utf-8"), self.dialect)
        event.record = values
        raw = event.raw
        if raw is not None:
            event.raw = self._line(values) + ("\r" if raw[-1:] == "\r" else "")

    def remove_field(self, event: Event, name: str) -> None:
        """A line keeps its format: the variable becomes ``-``, the placeholder servers write for no value."""
        self.set_field(event, name, "-")

    @staticmethod
    def recognises(line: str) -> bool:
        """Whether ``line`` is in the ``combined`` format (nginx's and Apache's), for ``format: auto``."""
        return _COMBINED.fullmatch(line.rstrip("\r")) is not None


def _query_role(spec: str | None, index: Mapping[str, int]) -> tuple[str, tuple[str, ...]]:
    var, dot, params = (spec or "").partition(".")
    names = tuple(p for p in params.split("|") if p)
    if not dot or not names or any(not re.fullmatch(r"[^&=#?\s]+", p) for p in names):
        raise ConfigValueError(
            "roles.query", "must be VARIABLE.PARAM or VARIABLE.PARAM|PARAM... (e.g. request.q)", sorted(index)
        )
    return var, names


_COMBINED_LAYOUT = nginx_layout("combined")
_COMBINED = line_patterns(_COMBINED_LAYOUT, {n: i for i, n in enumerate(_COMBINED_LAYOUT.names)})[0]
