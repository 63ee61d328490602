"""The passthrough's shortcuts give what the plain way gives.

* the fast pattern's possessive repeats (``*+``: nothing given back) match the lines the same pattern with greedy
  repeats matches, with the same groups, for the formats and for lines of any shape (hypothesis);
* a batch of untouched lines finds the first line of a request text a referer names by a scan of the batch's texts
  or, past a few scans, from a map of every text's first line: the same lines, referer memory and counts as each
  line written in order, whatever the number of scans allowed (hypothesis);
* a batch of LF and CRLF lines (a CRLF log's batch strips each ``\\r`` before matching) decodes each line as its
  text without the ``\\r`` decodes alone, and writes it back with it (hypothesis).
"""

from __future__ import annotations

import re
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.accesslog import untouched
from adapters.accesslog.codec import AccessLogCodec
from adapters.accesslog.lazyevent import LazyEvent, lazy_event
from sidecar.api import NO_META, SchemaConfig

FORMATS = [
    SchemaConfig(format="access_log"),
    SchemaConfig(format="access_log", search_path="/search"),
    SchemaConfig(format="access_log", apache_format="combined"),
    SchemaConfig(format="access_log", log_format='$remote_addr [$time_local] $status "$request" $body_bytes_sent'),
]
PIECES = st.sampled_from(
    ["10.0.0.1", " ", "-", '"', "\\", '\\"', "[", "]", "GET", "/search", "?q=", "flu+a", "&", "#", "%20", "HTTP/1.1"]
)


def line(request: str, referer: str, user: str = "10.0.0.1") -> str:
    return f'{user} - - [10/Oct/2000:13:55:36 -0700] "{request}" 200 512 "{referer}" "curl/8"'


#: a line of the usual shape with any pieces in its quoted values, or pieces alone
LINES = st.one_of(
    st.builds(
        line,
        st.lists(PIECES, max_size=8).map("".join),
        st.lists(PIECES, max_size=6).map("".join),
        st.sampled_from(["10.0.0.1", "a b", "-"]),
    ),
    st.lists(PIECES, max_size=20).map("".join),
)


def _greedy(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """The pattern with every possessive repeat made greedy."""
    return re.compile(pattern.pattern.replace("*+", "*").replace("?+", "?"), pattern.flags)


@settings(max_examples=500, deadline=None)
@given(text=LINES, schema=st.sampled_from(FORMATS))
def test_the_possessive_pattern_matches_what_the_greedy_one_matches(text: str, schema: SchemaConfig) -> None:
    fast = AccessLogCodec(schema)._fast
    assert "*+" in fast.pattern
    m, g = fast.fullmatch(text), _greedy(fast).fullmatch(text)
    assert (m is None) == (g is None)
    if m is not None and g is not None:
        assert m.regs == g.regs


TEXTS = st.sampled_from(["a", "b", "c", "d", "e", "f", "g", "h"])


@settings(max_examples=200, deadline=None)
@given(
    pairs=st.lists(st.tuples(TEXTS, TEXTS | st.none()), min_size=1, max_size=40),
    known=st.lists(TEXTS, max_size=3),
    scans=st.sampled_from([0, 1, 3, 16]),
)
def test_the_first_lines_found_by_scan_or_map_write_what_each_line_writes(
    pairs: list[tuple[str, str | None]], known: list[str], scans: int
) -> None:
    """Referers to texts of the batch (before, on or after their line; some released changed before the batch,
    so the memory does not show them released as they were)."""
    lines = [line(f"GET /search?q={q} HTTP/1.1", "-" if r is None else f"http://h/search?q={r}") for q, r in pairs]
    batched, each = AccessLogCodec(FORMATS[0]), AccessLogCodec(FORMATS[0])
    for memo in (batched.referer_memo, each.referer_memo):
        for text in known:
            memo.remember(text, text.upper())
    with mock.patch.object(untouched, "_SCANS", scans):
        written = batched.encode_many(batched.decode_many(lines, "\n", []))
    assert written == [each.encode(e) for e in each.decode_many(lines, "\n", [])]
    for memo in ("recent", "older", "followed", "emptied"):
        assert getattr(batched.referer_memo, memo) == getattr(each.referer_memo, memo), memo


def test_a_lazy_event_keeps_its_match_in_the_record_slot_until_split() -> None:
    codec = AccessLogCodec(FORMATS[0])
    text = line("GET /search?q=flu HTTP/1.1", "-")
    m = codec._fast.fullmatch(text)
    assert m is not None
    ev = lazy_event(text, m, codec, "")
    assert type(ev) is LazyEvent and ev.match is m and (ev.raw, ev.codec, ev.eol, ev.meta) == (text, codec, "", NO_META)
    assert ev.query == "flu" and type(ev) is not LazyEvent  # read: split, a plain event whose record is the values
    assert ev.record[0] == "10.0.0.1"


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.tuples(LINES, st.booleans()), max_size=12),
    schema=st.sampled_from(FORMATS),
)
def test_a_batch_decodes_as_its_lines_one_by_one_whatever_their_ends(
    lines: list[tuple[str, bool]], schema: SchemaConfig
) -> None:
    """LF and CRLF lines mixed (a batch whose first line ends in ``\\r`` strips each line's at once; the others try
    each line as it is first): each line gives what its text without the ``\\r`` gives alone, as an LF line (the
    same kind of event, split the same way, or the same dead letter), and comes back with its ``\\r``."""
    texts = [text + ("\r" if crlf else "") for text, crlf in lines]
    codec, alone = AccessLogCodec(schema), AccessLogCodec(schema)
    bad: list[tuple[int, str]] = []
    events = codec.decode_many(texts, "\n", bad)
    expected, expected_bad = [], []
    for i, (text, _) in enumerate(lines):
        one: list[tuple[int, str]] = []
        expected += alone.decode_many([text], "\n", one)
        expected_bad += [(i, reason) for _, reason in one]
    assert bad == expected_bad
    dead = {i for i, _ in bad}
    kept = [t for i, t in enumerate(texts) if i not in dead]
    ends = ["\r" if crlf else "" for i, (_, crlf) in enumerate(lines) if i not in dead]
    assert [(type(e), e.raw) for e in events] == [(type(e), t) for e, t in zip(expected, kept, strict=True)]
    written = [alone.encode(e) + end for e, end in zip(expected, ends, strict=True)]
    assert [codec.encode(e) for e in events] == written  # with its "\r"
    assert [e.record for e in events] == [e.record for e in expected]  # read: split the same way
