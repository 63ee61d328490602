"""A batch of untouched access-log lines written at once: the passthrough's (and a non-reading chain's) writer.

:meth:`AccessLogCodec.encode <adapters.accesslog.codec.AccessLogCodec.encode>` writes one event; a sink writing a
batch whose every event is an untouched lazy event of one codec (:mod:`adapters.accesslog.lazyevent`) calls
:func:`write_untouched` through ``encode_many`` instead, which gives the same lines, the same referer memory and
the same counts as ``encode`` called on each event in order, with the work done a batch at a time:

- the request's and the referer's parameter values of every line decoded together (:func:`decode_all`: one string
  of the batch's values through the same decoders, split again; a batch they cannot take is decoded value by value);
- a referer is written as it is when its text is the request query of an earlier (or its own) line of the batch
  or was remembered released as it was before the batch; any other goes through the general referer rule
  (:meth:`QueryReader.referer_of_match`), in order, after the request queries of the lines before it are
  remembered (so it sees the memory ``encode`` would have shown it);
- the request queries are remembered a run of lines at a time, as released as they were (``dict.update`` of
  ``dict.fromkeys``).

One difference, on the safe side of the bound: the memory's generation turns (:class:`ReleasedQueries.turn`) only
at the end of a batch, so a generation may hold up to a batch of texts more than ``size``.
"""

from __future__ import annotations

import re
from codecs import escape_decode
from collections.abc import Callable, Sequence
from itertools import compress, count, repeat
from operator import is_, itemgetter
from typing import TYPE_CHECKING

from adapters.accesslog.lazyevent import get_match
from adapters.accesslog.referer import NOT_REMEMBERED
from adapters.accesslog.urlparams import decode_value

if TYPE_CHECKING:
    from adapters.accesslog.queryreader import QueryReader
    from sidecar.api import Event

__all__ = ["decode_all", "write_untouched"]

_LINES: list[int] = list(range(4096))
"""Line numbers, made once (``range`` makes an int object for each number past 256 each time)."""


def decode_all(values: Sequence[str], dialect: str) -> list[str]:
    """``[decode_value(v, dialect) for v in values]``, for a batch of logged parameter values: joined by ``\\n``
    (never in a logged value) and decoded in one pass when no value holds a log escape (a backslash), then split;
    value by value when the one pass fails (a ``%`` without two hex digits) or a decoded value holds a newline."""
    if not values:
        return []
    joined = "\n".join(values)
    if "\\" not in joined:
        if "%" not in joined:
            return joined.replace("+", " ").split("\n")
        try:
            data = joined.encode("utf-8").replace(b"+", b" ").replace(b"%", b"\\x")
            out = escape_decode(data)[0].decode("utf-8", "replace").split("\n")
        except (ValueError, UnicodeEncodeError):
            out = []
        if len(out) == len(values):
            return out
    return [decode_value(v, dialect) for v in values]


def write_untouched(
    lines: list[str],
    events: Sequence[Event],
    groups: tuple[int, int],
    reader: QueryReader,
    with_referer: Callable[[re.Match[str], str, str], str],
) -> list[str]:
    """The lines of ``events`` (each an untouched lazy event of one codec, ``lines`` their lines, whose fast
    pattern finds the request's and the referer's parameter in ``groups``; ``with_referer(match, referer, line)``
    writes a line with a new referer); see the module documentation. ``lines`` becomes the result."""
    memo = reader.memo
    dialect = reader.dialect
    out = lines
    matches = list(map(get_match, events))
    qs = list(map(itemgetter(groups[0]), matches))
    rs = list(map(itemgetter(groups[1]), matches))
    queries = decode_all([q or "" for q in qs], dialect)
    for i in compress(count(), map(is_, qs, repeat(None))):  # no parameter of the usual shape: the general reading
        queries[i] = reader.query(matches[i].group(reader.query_group))
    referers = decode_all([r or "" for r in rs], dialect)
    n = len(queries)
    if len(_LINES) < n:
        _LINES.extend(range(len(_LINES), n))
    first = dict(zip(reversed(queries), _LINES[n - 1 :: -1]))  # each text's first line
    recent, older, missing = memo.recent, memo.older, NOT_REMEMBERED
    general: list[int] = []  # lines whose referer takes the general rule
    for i, text in compress(enumerate(referers), referers):  # the lines with a referer's search text
        at = first.get(text)
        if at is not None and at <= i:  # requested on this line or an earlier one of the batch: released as it was
            continue
        was = recent.get(text, missing)
        if was is None or (was is missing and older.get(text, missing) is None):  # remembered released as it was
            continue
        general.append(i)
    if dialect == "apache":  # a backslash may hide the referer's parameter from the pattern: the general reading
        general += [i for i, r in enumerate(rs) if r is None and "\\" in out[i]]
        general.sort()
    done = 0
    for i in general:
        _remember(recent, queries[done : i + 1])
        done = i + 1
        m = matches[i]
        referer = reader.referer_of_match(m)
        if referer is not None:
            out[i] = with_referer(m, referer, out[i])
    _remember(recent, queries[done:])
    if len(recent) >= memo.size:
        memo.turn()
    return out


def _remember(recent: dict[str, str | None], texts: list[str]) -> None:
    """``ReleasedQueries.remember(t, t)`` for each text, in order (the empty text is no search)."""
    recent.update(dict.fromkeys(texts))  # None: released as it was
    recent.pop("", None)
