"""The search query of a line, where the role says it is: a URL parameter of one variable, and the referer's.

:class:`QueryReader` reads the query text from the query variable's value (``request.q``: the ``q`` parameter of the
request's target when its path is ``schema.search_path``, or of any path when none is set; the first of several
names that the URL has), writes a new text in its place in the style of the old one, and gives the referer with its
search query as released (:mod:`adapters.accesslog.referer`). For a line the fast pattern matched, the parameter's
value is usually a group of the match already (:class:`~adapters.accesslog.patterns.Finds`): the ``*_of_match``
methods read it from there, and read the variable's value when it is not.
"""

from __future__ import annotations

import re

from adapters.accesslog.patterns import REQUEST, Finds
from adapters.accesslog.referer import ReleasedQueries
from adapters.accesslog.urlparams import decode_value, encode_value, find_param, path_of, query_span, style_of
from sidecar.api import BadRecord

__all__ = ["QueryReader"]

_QUERY_STRING_VARS = ("args", "query_string")


class QueryReader:
    """The query parameter ``params`` of variable ``query_var`` (group ``groups[0]`` of the fast pattern) and of
    the referer (group ``groups[1]``; None: the format has no referer)."""

    def __init__(
        self,
        query_var: str,
        params: tuple[str, ...],
        search_path: str | None,
        dialect: str,
        finds: Finds,
        groups: tuple[int, int | None],
    ) -> None:
        self.query_var, self.params, self.search_path, self.dialect = query_var, params, search_path, dialect
        self.finds = finds
        self.query_group, self.referer_group = groups
        self.keys = tuple(p + "=" for p in params)
        #: the one name as ``NAME=`` (None: several)
        self.key = self.keys[0] if len(self.keys) == 1 else None
        #: texts released for request queries, which the referers follow
        self.memo = ReleasedQueries()
        qv, rv = finds.query_value, finds.referer_value
        #: the groups of the request's and the referer's parameter when the fast pattern finds both and no search
        #: path is to be checked: the usual line, which :meth:`AccessLogCodec.encode` reads itself
        self.both = (qv, rv) if qv is not None and rv is not None and search_path is None else None

    # ---- the query variable -----------------------------------------------------------------------------------

    def query(self, value: str) -> str:
        """The query text of the query variable's value ("" when it is no search or has none of the parameters)."""
        if self.key not in value if self.key is not None else not any(k in value for k in self.keys):
            return ""
        span = self.span(value)
        if span is None:
            return ""
        p = find_param(value, span[1], span[2], self.params)
        return "" if p is None else decode_value(value[p[0] : p[1]], self.dialect)

    def span(self, value: str) -> tuple[int, int, int] | None:
        """The query string of the query variable's value when it is a search (``search_path``), else None."""
        if self.query_var in _QUERY_STRING_VARS:
            return 0, 1 if value[:1] == "?" else 0, len(value)
        span = query_span(value, self.query_var == REQUEST)
        if span is None or (self.search_path is not None and path_of(value, span[0], span[1]) != self.search_path):
            return None
        return span

    def query_of_match(self, m: re.Match[str]) -> str:
        """:meth:`query` of a line the fast pattern matched."""
        found = self.finds.query_value
        if found is not None:
            raw = m.group(found)
            if raw is not None:
                sp = self.search_path
                if sp is not None:
                    qp = self.finds.query_path
                    assert qp is not None  # found with the value when there is a search path
                    path = m.group(qp)
                    if path != sp and path_of(path, 0, len(path) + 1) != sp:
                        return ""
                return decode_value(raw, self.dialect)
        return self.query(m.group(self.query_group))

    def with_query(self, value: str, query: str) -> str:
        """The query variable's value with ``query`` written in its parameter, in the style of the old text;
        :class:`BadRecord` when the value has no parameter to write a nonempty text into."""
        span = self.span(value)
        p = find_param(value, span[1], span[2], self.params) if span is not None else None
        if p is None:
            if query == "":
                return value
            raise BadRecord("query_on_non_search_request")
        raw = value[p[0] : p[1]]
        return value[: p[0]] + encode_value(query, style_of(raw, self.dialect), self.dialect) + value[p[1] :]

    def untouched(self, m: re.Match[str], line: str) -> str | None:
        """For a line the chain neither read nor changed: its query remembered as released as it was, then its
        referer with its search query as released (None: unchanged). (The codec writes this out for the usual
        line, where the pattern finds both parameters: :attr:`both`.)"""
        original = self.query_of_match(m)
        self.memo.remember(original, original)
        return self.referer_of_match(m)

    # ---- the referer ------------------------------------------------------------------------------------------

    def referer(self, ref: str) -> str | None:
        """The referer with its search query as released (None: unchanged)."""
        if self.key not in ref if self.key is not None else not any(k in ref for k in self.keys):
            return None
        span = query_span(ref, False)
        if span is None or (self.search_path is not None and path_of(ref, span[0], span[1]) != self.search_path):
            return None
        p = find_param(ref, span[1], span[2], self.params)
        if p is None:
            return None
        return self._released_in(ref, p[0], p[1])

    def referer_of_match(self, m: re.Match[str]) -> str | None:
        """:meth:`referer` of a line the fast pattern matched (the format has a referer)."""
        group = self.referer_group
        assert group is not None
        found = self.finds.referer_value
        raw = m.group(found) if found is not None else None
        if raw is None or found is None:  # not found by the pattern: the general reading
            return self.referer(m.group(group))
        if raw == "":
            return None
        if self.search_path is not None:
            rp = self.finds.referer_path
            assert rp is not None  # found with the value when there is a search path
            path = m.group(rp)
            if path_of(path, 0, len(path) + 1) != self.search_path:
                return None
        at = m.start(group)
        return self._released_in(m.group(group), m.start(found) - at, m.end(found) - at)

    def _released_in(self, ref: str, start: int, end: int) -> str | None:
        raw = ref[start:end]
        text = decode_value(raw, self.dialect)
        if text == "":
            return None
        released = self.memo.released(text)
        if released == text:
            return None
        return ref[:start] + encode_value(released, style_of(raw, self.dialect), self.dialect) + ref[end:]
