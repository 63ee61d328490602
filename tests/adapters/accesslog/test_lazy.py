"""Lazy access-log events: a line is split only when something reads it, and nothing shows the difference.

* a line nobody reads is written back by the short path (the search parameter found by the line's pattern, the
  referer rule applied there): the same lines, the same referer memory and counts as the general path that splits
  every line, for any mix of requests and referers (hypothesis);
* reading or setting a role, the record or a field splits the line into the values an eager reading gives, and the
  event is then a plain ``Event``;
* the parameter the pattern finds is the one the general reading finds (first valid occurrence, before ``#``, the
  search path, backslash escapes), and the fast decodings of a value equal the general decoder's;
* a batch of untouched lines written at once (``encode_many``, :mod:`adapters.accesslog.untouched`) gives the lines,
  referer memory and counts of each line written in order, and its values decoded together equal each decoded.
"""

from __future__ import annotations

import re
from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.accesslog.codec import AccessLogCodec
from adapters.accesslog.lazyevent import LazyEvent
from adapters.accesslog.patterns import _but
from adapters.accesslog.referer import ReleasedQueries
from adapters.accesslog.untouched import decode_all
from adapters.accesslog.urlparams import _decoded, decode_value
from sidecar.api import Event, SchemaConfig

NGINX = SchemaConfig(format="access_log")
SEARCH = SchemaConfig(format="access_log", search_path="/search")
APACHE = SchemaConfig(format="access_log", apache_format="combined")


def line(request: str, referer: str = "-", user: str = "10.0.0.1") -> str:
    return f'{user} - - [10/Oct/2000:13:55:36 -0700] "{request}" 200 512 "{referer}" "curl/8"'


VALUES = st.sampled_from(
    [
        "flu",
        "cheap+flights",
        "cheap%20flights",
        "a%2Bb",
        "caf%C3%A9",
        "caf\\xC3\\xA9",
        "x%2",
        "%",
        "",
        "a%20b+c",
        "中+é",
    ]
)
OTHER = st.sampled_from(["page=2", "aq=1", "q", "x=q=1", "qq=3", ""])
SEP = st.sampled_from(["&", ";"])
PATHS = st.sampled_from(["/search", "/other", "http://h/search", "https://shop.example/search", "/search/"])


@st.composite
def urls(draw: st.DrawFn) -> str:
    """A URL with the parameter q anywhere (or nowhere, or twice, or after a #) among others."""
    params = draw(st.lists(OTHER, max_size=3))
    for _ in range(draw(st.integers(0, 2))):
        params.insert(draw(st.integers(0, len(params))), f"q={draw(VALUES)}")
    query = draw(SEP).join(params)
    tail = draw(st.sampled_from(["", "#top", "#q=x", "#a&q=y"]))
    return f"{draw(PATHS)}{'?' if draw(st.booleans()) or query else ''}{query}{tail}"


@st.composite
def requests(draw: st.DrawFn) -> str:
    target = draw(st.one_of(urls(), st.sampled_from(["/static/app.css", "/a b?q=x", "/search?q=a b"])))
    return draw(st.sampled_from(["GET {}", "GET {} HTTP/1.1", "POST {} HTTP/2.0", "{}"])).format(target)


LINES = st.lists(
    st.builds(line, requests(), st.one_of(st.just("-"), urls()), st.sampled_from(["10.0.0.1", "10.0.0.2"])),
    min_size=1,
    max_size=25,
)
SCHEMAS = st.sampled_from([NGINX, SEARCH, APACHE])


def _apache(text: str) -> str:
    """A line as Apache would log it: a backslash escapes are doubled (``\\x`` is nginx's)."""
    return text.replace("\\x", "\\\\x")


@settings(max_examples=300, deadline=None)
@given(lines=LINES, schema=SCHEMAS)
def test_the_short_path_writes_what_the_general_path_writes(lines: list[str], schema: SchemaConfig) -> None:
    if schema is APACHE:
        lines = [_apache(x) for x in lines]
    lazy, eager = AccessLogCodec(schema), AccessLogCodec(schema)
    bad: list[tuple[int, str]] = []
    untouched = lazy.decode_many(lines, "\n", bad)
    split = eager.decode_many(lines, "\n", bad)
    assert bad == [] and all(type(e) is LazyEvent for e in untouched)
    for ev in split:
        assert ev.user is not None  # reading a role splits the line
        assert type(ev) is Event
    assert [lazy.encode(e) for e in untouched] == [eager.encode(e) for e in split]
    assert all(type(e) is LazyEvent for e in untouched)  # writing an untouched line never splits it
    for memo in ("recent", "older", "followed", "emptied"):
        assert getattr(lazy.referer_memo, memo) == getattr(eager.referer_memo, memo), memo


@settings(max_examples=300, deadline=None)
@given(request=requests(), referer=urls(), schema=SCHEMAS)
def test_the_parameter_the_pattern_finds_is_the_general_readings(
    request: str, referer: str, schema: SchemaConfig
) -> None:
    text = line(request, referer)
    if schema is APACHE:
        text = _apache(text)
    codec, fresh = AccessLogCodec(schema), AccessLogCodec(schema)
    for memo in (codec.referer_memo, fresh.referer_memo):  # a referer to these is rewritten, to others emptied
        for released in ("flu", "cheap flights", "a+b", "café", "a b c"):
            memo.remember(released, released.upper())
    (ev,) = codec.decode_many([text], "\n", [])
    assert ev.query == codec._reader.query(ev.record[codec.names.index("request")])  # read: split by the pattern
    (again,) = fresh.decode_many([text], "\n", [])
    assert fresh.encode(again) == codec.encode(ev)  # the short path's referer is the general path's
    assert (fresh.referer_memo.followed, fresh.referer_memo.emptied) == (
        codec.referer_memo.followed,
        codec.referer_memo.emptied,
    )


def test_reading_setting_and_fields_split_the_line_once() -> None:
    codec = AccessLogCodec(NGINX)
    text = line("GET /search?q=cheap+flights&page=2 HTTP/1.1", "http://h/search?q=flu")
    evs = codec.decode_many([text, text, text, text], "\n", [])
    assert all(type(e) is LazyEvent for e in evs)
    read, written, field, marked = evs
    assert (read.user, read.query, read.time) == ("10.0.0.1", "cheap flights", "10/Oct/2000:13:55:36 -0700")
    assert type(read) is Event and read.record[codec.names.index("status")] == "200"
    written.query = "cheap trips"  # set before anything was read
    assert type(written) is Event and written.user == "10.0.0.1"
    assert "q=cheap+trips&page=2" in codec.encode(written)
    assert codec.get_field(field, "http_user_agent") == "curl/8" and type(field) is Event
    marked.mark_changed()  # raw gone: written from its values, the same line
    assert codec.encode(marked) == codec.encode(read) == text.replace("q=flu", "q=")


def test_a_line_with_a_carriage_return_is_lazy_and_comes_back_with_it() -> None:
    codec = AccessLogCodec(NGINX)
    text = line("GET /search?q=flu HTTP/1.1") + "\r"
    (ev,) = codec.decode_many([text], "\n", [])
    assert type(ev) is LazyEvent and codec.encode(ev) == text
    assert ev.query == "flu"


ESCAPED = st.lists(
    st.one_of(
        st.sampled_from(["%20", "+", "%2B", "%C3%A9", "%e2%82", "%", "%2", "%%20", "\\x22", "\\\\", "%2020"]),
        st.text(st.sampled_from("abc xyz019-_.~é"), max_size=3),
    ),
    max_size=8,
).map("".join)


@settings(max_examples=500, deadline=None)
@given(raw=ESCAPED, dialect=st.sampled_from(["nginx", "apache"]))
def test_the_fast_decodings_equal_the_general_decoder(raw: str, dialect: str) -> None:
    assert decode_value(raw, dialect) == _decoded.__wrapped__(raw, dialect)


@settings(max_examples=300, deadline=None)
@given(values=st.lists(st.one_of(ESCAPED, st.sampled_from(["%0A", "a%0a", "\u00e9+", "%C3", "%FF%FE"])), max_size=6))
def test_values_decoded_together_equal_each_decoded(values: list[str]) -> None:
    for dialect in ("nginx", "apache"):
        assert decode_all(values, dialect) == [decode_value(v, dialect) for v in values]


KNOWN = ("flu", "cheap flights", "a b", "café", "x")


@settings(max_examples=300, deadline=None)
@given(lines=LINES, schema=SCHEMAS, cuts=st.lists(st.integers(0, 25), max_size=3), known=st.booleans())
def test_a_batch_written_at_once_is_written_as_each_line_would_be(
    lines: list[str], schema: SchemaConfig, cuts: list[int], known: bool
) -> None:
    """The same lines, referer memory and counts as ``encode`` in order, the batch cut anywhere; with texts
    released changed before (their referers rewritten by the general rule) or not."""
    if schema is APACHE:
        lines = [_apache(x) for x in lines]
    batched, each = AccessLogCodec(schema), AccessLogCodec(schema)
    for memo in (batched.referer_memo, each.referer_memo):
        for text in KNOWN if known else ():
            memo.remember(text, text.upper())
    events = batched.decode_many(lines, "\n", [])
    out: list[str] = []
    bounds = sorted({0, len(events), *(c for c in cuts if c < len(events))})
    for start, end in pairwise(bounds):
        written = batched.encode_many(events[start:end])
        if schema is SEARCH:  # the pattern does not find the parameters with a search path: each is encoded
            assert written is None
            written = [batched.encode(e) for e in events[start:end]]
        assert written is not None
        out += written
    assert all(type(e) is LazyEvent for e in events)
    assert out == [each.encode(e) for e in each.decode_many(lines, "\n", [])]
    for memo in ("recent", "older", "followed", "emptied"):
        assert getattr(batched.referer_memo, memo) == getattr(each.referer_memo, memo), memo


def test_a_batch_with_a_line_read_changed_or_of_another_codec_is_left_to_encode() -> None:
    codec, other = AccessLogCodec(NGINX), AccessLogCodec(NGINX)
    text = line("GET /search?q=flu HTTP/1.1")
    for spoil in ("read", "marked", "other"):
        evs = codec.decode_many([text, text], "\n", [])
        if spoil == "read":
            assert evs[1].query == "flu"
        elif spoil == "marked":
            evs[1].mark_changed()
        else:
            evs[1].codec = other
        assert codec.encode_many(evs) is None, spoil
    assert codec.encode_many([]) == []


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.sampled_from(["a", "b", "c", "d", "e"]), min_size=1, max_size=30), size=st.integers(1, 3))
def test_a_batch_keeps_a_referer_only_to_a_search_requested_before_it(texts: list[str], size: int) -> None:
    """With a small memory (its generations turn at the end of a batch, not inside it): every referer written as
    it came names a search of an earlier or the same line; the others are emptied."""
    codec = AccessLogCodec(NGINX)
    codec.referer_memo = codec._reader.memo = ReleasedQueries(size=size)
    lines = [
        line(f"GET /search?q={t} HTTP/1.1", f"http://h/search?q={texts[i - 1 if i else -1]}")
        for i, t in enumerate(texts)
    ]
    out: list[str] = []
    events = codec.decode_many(lines, "\n", [])
    for start in range(0, len(events), 4):
        written = codec.encode_many(events[start : start + 4])
        assert written is not None
        out += written
    for i, (was, now) in enumerate(zip(lines, out, strict=True)):
        assert now == was or now == was.replace(f"h/search?q={texts[i - 1 if i else -1]}", "h/search?q=")
        if now == was:
            assert texts[i - 1 if i else -1] in texts[: i + 1]


@settings(max_examples=300, deadline=None)
@given(chars=st.text(min_size=1, max_size=5), probe=st.characters())
def test_a_class_of_every_character_but_some_is_that_class(chars: str, probe: str) -> None:
    assert (re.fullmatch(_but(chars), probe) is not None) == (probe not in chars)
