"""A batch of untouched access-log lines written at once: the passthrough's (and a non-reading chain's) writer.

:meth:`AccessLogCodec.encode <adapters.accesslog.codec.AccessLogCodec.encode>` writes one event; a sink writing a
batch whose every event is an untouched lazy event of one codec (:mod:`adapters.accesslog.lazyevent`) calls
:func:`write_untouched` through ``encode_many`` instead, which gives the same lines, the same referer memory and
the same counts as ``encode`` called on each event in order, with the work done a batch at a time:

- the request's and the referer's parameter values of every line decoded together (:func:`decode_all`: one string
  of the batch's values through the same decoders, split again; a batch they cannot take is decoded value by value);
- a referer is written as it is when its text was remembered released as it was before the batch or is the
  request query of an earlier (or its own) line of the batch (the memory is asked first: the few referers it does
  not show, usually to a search of their own batch, find the text's first line by a scan of the batch's texts,
  :class:`_FirstLines`); any other goes through the general referer rule
  (:meth:`QueryReader.referer_of_match`), in order, after the request queries of the lines before it are
  remembered (so it sees the memory ``encode`` would have shown it);
- the request queries are remembered a run of lines at a time, as released as they were (one ``dict.update``).

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

from adapters.accesslog.referer import NOT_REMEMBERED
from adapters.accesslog.urlparams import decode_value

if TYPE_CHECKING:
    from adapters.accesslog.lazyevent import LazyEvent
    from adapters.accesslog.queryreader import QueryReader

__all__ = ["decode_all", "write_untouched"]

_SCANS = 16
"""Texts whose first line :class:`_FirstLines` finds by scanning the batch's texts; past that it maps them all."""


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
    events: Sequence[LazyEvent],
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
    matches = [e.match for e in events]
    qs = list(map(itemgetter(groups[0]), matches))
    rs = list(map(itemgetter(groups[1]), matches))
    queries = decode_all([q or "" for q in qs], dialect)
    for i in compress(count(), map(is_, qs, repeat(None))):  # no parameter of the usual shape: the general reading
        queries[i] = reader.query(matches[i].group(reader.query_group))
    at = list(compress(count(), rs))  # the lines whose referer has the parameter (not empty)
    referers = decode_all(list(compress(rs, rs)), dialect)
    recent, older, missing = memo.recent, memo.older, NOT_REMEMBERED
    first: _FirstLines | None = None  # each text's first line of the batch, found when first asked
    general: list[int] = []  # lines whose referer takes the general rule
    for i, text in compress(zip(at, referers), referers):  # the lines with a referer's search text
        was = recent.get(text, missing)
        if was is None or (was is missing and older.get(text, missing) is None):  # remembered released as it was
            continue
        if first is None:
            first = _FirstLines(queries)
        line = first.line(text)
        if line is not None and line <= i:  # requested on this line or an earlier one of the batch: released as it was
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
    _remember(recent, queries[done:] if done else queries)
    if len(recent) >= memo.size:
        memo.turn()
    return out


def _remember(recent: dict[str, str | None], texts: list[str]) -> None:
    """``ReleasedQueries.remember(t, t)`` for each text, in order (the empty text is no search)."""
    recent.update(zip(texts, repeat(None)))  # None: released as it was
    recent.pop("", None)


class _FirstLines:
    """The first line of a batch's request texts, for the few referers that the memory does not show released
    (usually to a search of their own batch): each found by a scan of the batch's texts (``list.index``, in C), up
    to :data:`_SCANS` of them, then from a dictionary of every text's first line (a batch whose referers all ask,
    as after a restart, costs one pass more, never a scan a line)."""

    def __init__(self, queries: list[str]) -> None:
        self.queries = queries
        self.scans = 0
        self.first: dict[str, int] | None = None

    def line(self, text: str) -> int | None:
        """The first line of ``text`` in the batch (None: not one of its texts)."""
        if self.first is None:
            self.scans += 1
            if self.scans <= _SCANS:
                try:
                    return self.queries.index(text)
                except ValueError:
                    return None
            n = len(self.queries)
            self.first = dict(zip(reversed(self.queries), range(n - 1, -1, -1)))
        return self.first.get(text)
