"""Hypothesis properties of the access-log parser and the re-encoder.

* any line written from a format (values the server could log, escaped as it escapes) decodes, and an unchanged
  event is written back byte for byte;
* a value re-encoded in the style read from it is the same bytes (the style is recovered), and a new text is
  written in that style (``+`` or ``%20``, hex case) and decodes to itself;
* a changed query changes the query parameter only: every other parameter and every other variable is untouched.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.accesslog.codec import AccessLogCodec
from adapters.accesslog.escapes import escape, unescape
from adapters.accesslog.urlparams import Style, decode_value, encode_value, style_of
from sidecar.api import SchemaConfig

DIALECTS = st.sampled_from(["nginx", "apache"])
TEXTS = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
STYLES = st.builds(
    Style,
    plus=st.booleans(),
    lower=st.booleans(),
    raw_high=st.booleans(),
    safe=st.sets(st.sampled_from(b"!$'()*,/:;@[]{}|^`~\"\\<>")).map(
        lambda extra: frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~") | extra
    ),
)
#: what a logged variable may hold: any bytes, escaped by the server; outside quotes, no space or bracket (a value
#: with the next separator in it, as a status or a byte count never has, could be split two ways)
RAW_VALUES = st.binary(max_size=20)
UNQUOTED = RAW_VALUES.map(lambda b: b.replace(b" ", b"_").replace(b"]", b"_"))
QUOTED = ("request", "http_referer", "http_user_agent")
WORD = st.text(st.sampled_from("abcxyz019-_.~"), min_size=1, max_size=8)


@settings(deadline=None)  # a shared, noisy machine: no per-example time limit
@given(data=st.binary(max_size=40), dialect=DIALECTS)
def test_escape_round_trips_any_bytes(data: bytes, dialect: str) -> None:
    logged = escape(data, dialect)
    assert logged.isascii() and '"' not in logged.replace('\\"', "")
    assert "\n" not in logged and "\r" not in logged
    assert unescape(logged, dialect) == data


@settings(deadline=None)
@given(text=TEXTS, style=STYLES, dialect=DIALECTS)
def test_the_style_read_from_a_value_writes_it_again(text: str, style: Style, dialect: str) -> None:
    logged = encode_value(text, style, dialect)
    assert decode_value(logged, dialect) == text
    assert encode_value(text, style_of(logged, dialect), dialect) == logged


@settings(deadline=None)
@given(old=TEXTS, new=TEXTS, style=STYLES, dialect=DIALECTS)
def test_a_new_text_is_written_in_the_old_ones_style(old: str, new: str, style: Style, dialect: str) -> None:
    """The old text has a space and a byte written as hex with a letter (a line feed: %0A or %0a)."""
    logged_old = encode_value(old + " \n", style, dialect)
    logged_new = encode_value(new, style_of(logged_old, dialect), dialect)
    assert decode_value(logged_new, dialect) == new
    if " " in new:
        assert ("+" in logged_new) == style.plus and ("%20" in logged_new) == (not style.plus)
    hexes = [logged_new[i + 1 : i + 3] for i in range(len(logged_new) - 2) if logged_new[i] == "%"]
    letters = "".join(h for h in hexes if any(c.isalpha() for c in h))
    assert letters == (letters.lower() if style.lower else letters.upper())


def _line(codec: AccessLogCodec, values: dict[str, str]) -> str:
    lits = codec.format_layout.literals
    out = [lits[0]]
    for k, var in enumerate(codec.format_layout.variables):
        out += [values[var], lits[k + 1]]
    return "".join(out)


@st.composite
def logged_lines(draw: st.DrawFn, apache: bool) -> tuple[AccessLogCodec, str, dict[str, str]]:
    schema = SchemaConfig(format="access_log", apache_format="combined" if apache else None)
    codec = AccessLogCodec(schema)
    dialect = codec.dialect
    values = {name: escape(draw(RAW_VALUES if name in QUOTED else UNQUOTED), dialect) for name in codec.names}
    params = draw(st.lists(st.tuples(WORD, st.one_of(st.just(""), WORD)), max_size=3))
    query = encode_value(draw(TEXTS), draw(STYLES), dialect)
    at = draw(st.integers(0, len(params)))
    parts = [f"{k}={v}" for k, v in params]
    parts.insert(at, f"q={query}")
    values["request"] = f"GET /search?{'&'.join(parts)} HTTP/1.1"
    values["remote_addr"] = draw(st.text(st.sampled_from("0123456789.:abcdef"), min_size=1, max_size=39))
    values["time_local"] = "10/Oct/2000:13:55:36 -0700"
    return codec, _line(codec, values), values


@settings(max_examples=300, deadline=None)
@given(case=logged_lines(apache=False) | logged_lines(apache=True), crlf=st.booleans())
def test_any_logged_line_decodes_and_comes_back_byte_for_byte(
    case: tuple[AccessLogCodec, str, dict[str, str]], crlf: bool
) -> None:
    codec, line, values = case
    line += "\r" if crlf else ""
    bad: list[tuple[int, str]] = []
    (ev,) = codec.decode_many([line], "\n", bad)
    assert bad == []
    assert codec.encode(ev) == line
    for name in codec.names:  # each value found where it was written
        assert codec.get_field(ev, name) == unescape(values[name], codec.dialect).decode("utf-8", "replace")


@settings(max_examples=300, deadline=None)
@given(case=logged_lines(apache=False) | logged_lines(apache=True), new=TEXTS)
def test_a_changed_query_changes_only_its_parameter(case: tuple[AccessLogCodec, str, dict[str, str]], new: str) -> None:
    codec, line, values = case
    bad: list[tuple[int, str]] = []
    (ev,) = codec.decode_many([line], "\n", bad)
    ev.query = new
    out = codec.encode(ev)
    (again,) = AccessLogCodec(codec.schema).decode_many([out], "\n", bad)
    assert bad == [] and again.query == new
    before, after = ev.record, again.record
    for i, name in enumerate(codec.names):
        if name != "request":
            assert after[i] == before[i], name
    old_params = values["request"].split("?", 1)[1].rsplit(" ", 1)[0].split("&")
    new_params = after[codec.names.index("request")].split("?", 1)[1].rsplit(" ", 1)[0].split("&")
    assert len(old_params) == len(new_params)
    assert [p for p in old_params if not p.startswith("q=")] == [p for p in new_params if not p.startswith("q=")]
