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

Bad records: ``line_does_not_match_format``. An event from another format cannot be written as an access-log
line (it has no request to put its query in): ``not_an_access_log_record``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from adapters.accesslog.escapes import escape, to_text
from adapters.accesslog.formats import FormatError, Layout, apache_layout, nginx_layout
from adapters.accesslog.referer import ReleasedQueries
from adapters.accesslog.urlparams import decode_value, encode_value, find_param, path_of, query_span, style_of
from sidecar.api import AOL_COLUMNS, ROLES, BadRecord, Codec, ConfigValueError, Event, FieldError, SchemaConfig

__all__ = ["AccessLogCodec", "layout_of"]

_ACCESS_DEFAULTS = {"user": "remote_addr", "query": "request.q", "time": "time_local", "rank": None, "url": None}
_QUERY_STRING_VARS = ("args", "query_string")
REFERER = "http_referer"
_VALUE_END = re.compile(r"[^ &#]*")


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
        self._search_path = schema.search_path
        self._fast, self._slow = _regexes(layout, index)
        self._ref = index.get(REFERER)
        self._ref_keys = tuple(p + "=" for p in self._params)
        self._ref_key = self._ref_keys[0] if len(self._ref_keys) == 1 else None
        self._role_pairs = tuple((r, i) for r, i in self._role_idx.items() if i is not None)
        #: the one query parameter of the request line as ``NAME=`` (None: several, or another variable)
        self._request_key = self._ref_key if self._query_var == "request" else None
        self._amp_key = f"&{self._request_key}"
        self.referer_memo = ReleasedQueries()

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

    def _query(self, value: str) -> str:
        """The query text of the query variable's value ("" when it is no search or has none of the parameters)."""
        key = self._request_key
        if key is not None:  # one parameter of the request line, the usual line: str.find; else the general path
            if key not in value:
                return ""
            q = value.find("?")
            at = q + 1 if value.startswith(key, q + 1) else value.find(self._amp_key, q) + 1
            if q > 0 and at > 0:
                start = at + len(key)
                end = _VALUE_END.match(value, start).end()  # type: ignore[union-attr]  # matches the empty text
                if (
                    "#" not in value[q:start]
                    and " " not in value[q:start]
                    and (value[end : end + 1] != " " or value.find(" ", end + 1) < 0)  # no space in the target
                    and (self._search_path is None or value[value.find(" ") + 1 : q] == self._search_path)
                ):
                    return decode_value(value[start:end], self.dialect)
        if self._query_var == "request":  # METHOD TARGET PROTOCOL
            first = value.find(" ")
            q = value.find("?", first + 1) if first >= 0 else -1
            if q < 0:
                return ""
            end = value.rfind(" ")
            if end < q:
                end = len(value)
            span: tuple[int, int, int] | None = (first + 1, q + 1, end)
            h = value.find("#", q, end)
            if h >= 0:
                span = (first + 1, q + 1, h)
            if self._search_path is not None and value[first + 1 : q] != self._search_path:
                span = None if path_of(value, first + 1, q + 1) != self._search_path else span
        else:
            span = self._span(value)
        if span is None:
            return ""
        p = find_param(value, span[1], span[2], self._params)
        return "" if p is None else decode_value(value[p[0] : p[1]], self.dialect)

    def _span(self, value: str) -> tuple[int, int, int] | None:
        """The query string of the query variable's value when it is a search (``search_path``), else None."""
        if self._query_var in _QUERY_STRING_VARS:
            return 0, 1 if value[:1] == "?" else 0, len(value)
        span = query_span(value, self._query_var == "request")
        if span is None or (self._search_path is not None and path_of(value, span[0], span[1]) != self._search_path):
            return None
        return span

    def decode_many(self, lines: Sequence[str], eol: str, bad: list[tuple[int, str]]) -> list[Event]:
        out: list[Event] = []
        append = out.append
        fast, slow, qi, dialect = self._fast.fullmatch, self._slow.fullmatch, self._qi, self.dialect
        ui, ti, ri, li = (self._role_idx[r] for r in ("user", "time", "rank", "url"))
        query_of = self._query
        for i, line in enumerate(lines):
            body = line[:-1] if line[-1:] == "\r" else line
            m = fast(body) or slow(body)
            if m is None:
                bad.append((i, "line_does_not_match_format"))
                continue
            groups = m.groups()
            query = query_of(groups[qi])
            values = (*groups, query)
            user = values[ui] if ui is not None else None
            if user is not None and "\\" in user:
                user = to_text(user, dialect)
            append(
                Event(
                    user,
                    query,
                    values[ti] if ti is not None else None,
                    to_text(values[ri], dialect) if ri is not None else None,
                    to_text(values[li], dialect) if li is not None else None,
                    values,
                    line,
                    self,
                    eol,
                )
            )
        return out

    # ---- encoding ---------------------------------------------------------------------------------------------

    def encode(self, event: Event) -> str:
        if event.codec is not self:
            raise BadRecord("not_an_access_log_record")
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
            ref = values[self._ref]
            if self._ref_key in ref if self._ref_key is not None else any(k in ref for k in self._ref_keys):
                referer = self._referer(ref)
        raw = event.raw
        if same_query and same_roles and referer is None and raw is not None:
            return raw
        new = list(values[: self._n])
        if not same_query:
            new[self._qi] = self._with_query(new[self._qi], query)
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

    def _same(self, event: Event, role: str, i: int) -> bool:
        now, was = getattr(event, role), event.record[i]
        return bool(now is was or now == to_text(was, self.dialect))

    def _with_query(self, value: str, query: str) -> str:
        span = self._span(value)
        p = find_param(value, span[1], span[2], self._params) if span is not None else None
        if p is None:
            if query == "":
                return value
            raise BadRecord("query_on_non_search_request")
        raw = value[p[0] : p[1]]
        return value[: p[0]] + encode_value(query, style_of(raw, self.dialect), self.dialect) + value[p[1] :]

    def _referer(self, ref: str) -> str | None:
        """The referer with its search query as released (None: unchanged)."""
        if not any(k in ref for k in self._ref_keys):
            return None
        span = query_span(ref, False)
        if span is None or (self._search_path is not None and path_of(ref, span[0], span[1]) != self._search_path):
            return None
        p = find_param(ref, span[1], span[2], self._params)
        if p is None:
            return None
        raw = ref[p[0] : p[1]]
        text = decode_value(raw, self.dialect)
        if text == "":
            return None
        released = self.referer_memo.released(text)
        if released == text:
            return None
        return ref[: p[0]] + encode_value(released, style_of(raw, self.dialect), self.dialect) + ref[p[1] :]

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
            ref = self._referer(values[self._ref])
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


def _regexes(layout: Layout, index: Mapping[str, int]) -> tuple[re.Pattern[str], re.Pattern[str]]:
    """A fast pattern (each value up to the next literal's first character; a quoted one up to its closing quote,
    Apache's ``\\"`` inside) and a slow one (each value as short as the line allows) for lines the fast one misses."""
    fast, slow = [re.escape(layout.literals[0])], [re.escape(layout.literals[0])]
    seen: set[str] = set()
    for k, var in enumerate(layout.variables):
        before, after = layout.literals[k], layout.literals[k + 1]
        group = f"g{index[var]}"
        if var in seen:
            fast.append(f"(?P={group})")
            slow.append(f"(?P={group})")
        else:
            seen.add(var)
            if not after:
                pattern = ".*"
            elif before.endswith('"') and after.startswith('"'):
                pattern = r'(?:[^"\\]|\\.)*' if layout.dialect == "apache" else r'[^"]*'
            else:
                pattern = f"[^{re.escape(after[0])}]*"
            fast.append(f"(?P<{group}>{pattern})")
            slow.append(f"(?P<{group}>.*?)")
        fast.append(re.escape(after))
        slow.append(re.escape(after))
    return re.compile("".join(fast), re.DOTALL), re.compile("".join(slow), re.DOTALL)


_COMBINED = _regexes(nginx_layout("combined"), {n: i for i, n in enumerate(nginx_layout("combined").names)})[0]
