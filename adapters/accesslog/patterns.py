"""The regular expressions that split a line of a format into its variables, built once per codec.

Two patterns, as in any access-log reader: a fast one (each value up to the next literal's first character; a
quoted one up to its closing quote, Apache's ``\\"`` inside) and a slow one (each value as short as the line
allows) for the lines the fast one misses. Variable ``name`` is group ``g<i>``, ``i`` its index in
``Layout.names``.

The fast pattern also finds the search parameter of the usual line, so a line nobody changes is never split
further in Python (:class:`Finds`): inside a quoted ``request`` (``METHOD TARGET [PROTOCOL]``, no space in the
target) the value of the first occurrence of the parameter (group ``qv``: after ``?``, ``&`` or ``;`` and before
any ``#``, up to the next ``&``) and the path (``qp``, only for a ``search_path``), and the same in a quoted
``http_referer`` (``rv``, ``rp``). Each is an alternative tried before the variable's own pattern that matches a
subset of it, so the fast pattern matches the same lines and splits them at the same places. A request of another
shape (or, in Apache's escaping, a value with a backslash: its ``\\"`` is no closing quote) takes the plain
alternative and leaves the group unset: the codec then reads the value itself. The fast pattern is written with
possessive repeats wherever nothing is to be given back, the finds and each value up to its next literal (a value
cannot hold that literal's first character, so a shorter one never lets the line match): the regular expression
engine then keeps no backtracking state, and matching is most of what decoding a line costs.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from adapters.accesslog.formats import Layout

__all__ = ["REFERER", "REQUEST", "Finds", "line_patterns"]

REQUEST = "request"
REFERER = "http_referer"


@dataclass(frozen=True)
class Finds:
    """Group numbers of the parameter found in the fast pattern (None: not searched for in this format)."""

    #: the request's path and parameter value
    query_path: int | None = None
    query_value: int | None = None
    #: the referer's path (scheme and host included) and parameter value
    referer_path: int | None = None
    referer_value: int | None = None


def _but(chars: str) -> str:
    """The class of every character but ``chars``, written as the ranges between them: the regular expression
    engine tests a character against such a class with one table lookup, against ``[^...]`` of two or more
    characters one comparison at a time (a fifth less time matching a line). One character stays ``[^c]``."""
    if len(chars) == 1:
        return f"[^{re.escape(chars)}]"
    out, low = [], 0
    for code in [*sorted({ord(c) for c in chars}), 0x110000]:
        if code > low:
            out.append(f"\\U{low:08x}" if code - 1 == low else f"\\U{low:08x}-\\U{code - 1:08x}")
        low = code + 1
    return f"[{''.join(out)}]"


def _request_find(param: str, x: str, path: bool) -> str:
    """``METHOD SP PATH ? ... PARAM=VALUE ... [#...] [SP PROTOCOL]``, none of the characters ``x`` anywhere."""
    p = f"(?P<qp>{_but(' ?#' + x)}*+)" if path else f"{_but(' ?#' + x)}*+"
    value = f"(?P<qv>{_but(' #&' + x)}*+)"
    # after the value: the rest (value ended at & or #), else at most a protocol (no second space in the target)
    rest = rf"(?:[&#]{_but(x)}*+|(?: {_but(' ' + x)}*+)?+)"
    return rf"{_but(' ' + x)}*+ {p}\?(?:{_but(' #' + x)}*?[&;])??{re.escape(param)}={value}{rest}"


def _referer_find(param: str, x: str, path: bool) -> str:
    """``URL-UP-TO-? ... PARAM=VALUE ...``: the first ``?``, the parameter before any ``#``; none of ``x``."""
    p = f"(?P<rp>{_but('?' + x)}*+)" if path else f"{_but('?' + x)}*+"
    return rf"{p}\?(?:{_but('#' + x)}*?[&;])??{re.escape(param)}=(?P<rv>{_but('#&' + x)}*+){_but(x)}*+"


def line_patterns(
    layout: Layout,
    index: Mapping[str, int],
    query_var: str | None = None,
    params: tuple[str, ...] = (),
    search_path: bool = False,
) -> tuple[re.Pattern[str], re.Pattern[str], Finds]:
    """The fast and slow patterns of ``layout`` and the finds of the fast one. The parameter is searched for
    only when there is one name (several names are tried in their order, not the line's) and the variable is
    quoted; in the request only when it is the query variable (``query_var``); the paths only for a
    ``search_path``."""
    fast, slow = [re.escape(layout.literals[0])], [re.escape(layout.literals[0])]
    seen: set[str] = set()
    one = params[0] if len(params) == 1 and not {'"', "\\"} & set(params[0]) else None
    x = '"\\' if layout.dialect == "apache" else '"'
    for k, var in enumerate(layout.variables):
        before, after = layout.literals[k], layout.literals[k + 1]
        group = f"g{index[var]}"
        if var in seen:
            fast.append(f"(?P={group})")
            slow.append(f"(?P={group})")
        else:
            seen.add(var)
            quoted = before.endswith('"') and after.startswith('"')
            if not after:
                pattern = ".*"
            elif quoted:
                pattern = r'(?:[^"\\]|\\.)*+' if layout.dialect == "apache" else r'[^"]*+'
            else:
                pattern = f"[^{re.escape(after[0])}]*+"
            if one is not None and quoted and var == REQUEST and query_var == REQUEST:
                pattern = f"{_request_find(one, x, search_path)}|{pattern}"
            elif one is not None and quoted and var == REFERER:
                pattern = f"{_referer_find(one, x, search_path)}|{pattern}"
            fast.append(f"(?P<{group}>{pattern})")
            slow.append(f"(?P<{group}>.*?)")
        fast.append(re.escape(after))
        slow.append(re.escape(after))
    compiled = re.compile("".join(fast), re.DOTALL)
    found = compiled.groupindex
    finds = Finds(found.get("qp"), found.get("qv"), found.get("rp"), found.get("rv"))
    return compiled, re.compile("".join(slow), re.DOTALL), finds
