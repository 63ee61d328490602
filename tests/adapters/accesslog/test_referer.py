"""The referer's query follows its request's (docs/STACK.md, "The referer is the query too")."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.accesslog.codec import AccessLogCodec
from adapters.accesslog.referer import ReleasedQueries
from adapters.accesslog.urlparams import Style, encode_value
from sidecar.api import Event, SchemaConfig

SCHEMA = SchemaConfig(format="access_log", search_path="/search")


def line(request: str, referer: str = "-", user: str = "10.0.0.1") -> str:
    return f'{user} - - [10/Oct/2000:13:55:36 -0700] "GET {request} HTTP/1.1" 200 512 "{referer}" "curl/8"'


def decode(codec: AccessLogCodec, lines: list[str]) -> list[Event]:
    bad: list[tuple[int, str]] = []
    events = codec.decode_many(lines, "\n", bad)
    assert bad == []
    return events


def referer_of(out: str) -> str:
    return out.rsplit(' "', 2)[1][:-1]


def test_a_changed_query_is_changed_in_the_next_lines_referer() -> None:
    codec = AccessLogCodec(SCHEMA)
    first, second = decode(
        codec,
        [
            line("/search?q=john+smith+123-45-6789"),
            line("/search?q=flu&page=1", "https://shop.example/search?q=john+smith+123-45-6789&page=1"),
        ],
    )
    first.query = "john smith"
    codec.encode(first)
    assert referer_of(codec.encode(second)) == "https://shop.example/search?q=john+smith&page=1"


def test_a_dropped_or_held_or_unseen_query_leaves_the_referer_empty() -> None:
    codec = AccessLogCodec(SCHEMA)
    _held, after = decode(
        codec, [line("/search?q=rare+thing"), line("/search?q=flu", "http://h/search?q=rare%20thing&x=1")]
    )
    assert referer_of(codec.encode(after)) == "http://h/search?q=&x=1"
    assert codec.referer_memo.emptied == 1


def test_pagination_follows_the_lines_own_outcome_and_a_kept_query_stays_byte_for_byte() -> None:
    codec = AccessLogCodec(SCHEMA)
    page2, kept = decode(
        codec,
        [
            line("/search?q=my+ssn+123-45-6789&page=2", "/search?q=my+ssn+123-45-6789"),
            line("/search?q=weather", "/search?q=weather"),
        ],
    )
    page2.query = "my ssn"
    assert referer_of(codec.encode(page2)) == "/search?q=my+ssn"
    assert codec.encode(kept) == line("/search?q=weather", "/search?q=weather")


def test_only_the_search_path_when_one_is_set() -> None:
    codec = AccessLogCodec(SCHEMA)
    (ev,) = decode(codec, [line("/static/a.css", "https://www.example.org/results?q=secret")])
    assert codec.encode(ev) == line("/static/a.css", "https://www.example.org/results?q=secret")
    anywhere = AccessLogCodec(SchemaConfig(format="access_log"))
    (ev,) = decode(anywhere, [line("/static/a.css", "https://www.example.org/results?q=secret")])
    assert referer_of(anywhere.encode(ev)) == "https://www.example.org/results?q="


def test_carried_into_another_format_the_referer_follows_too() -> None:
    codec = AccessLogCodec(SCHEMA)
    (ev,) = decode(codec, [line("/search?q=a", "/search?q=never+released")])
    assert codec.fields(ev)["http_referer"] == "/search?q="


def test_the_memory_is_bounded() -> None:
    memo = ReleasedQueries(size=3)
    for text in "abcd":
        memo.remember(text, text.upper())
    assert len(memo) == 4 and memo.released("a") == "A" and memo.released("d") == "D"  # two generations
    memo.remember("b", "B2")  # requested again: in the newer generation
    memo.remember("e", "E")  # the newer generation is full: it becomes the older, a and c are forgotten
    assert memo.released("b") == "B2" and memo.released("c") == "" and memo.released("a") == ""
    assert len(memo) == 3 and memo.released("e") == "E"


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.sampled_from("abcdefghij"), max_size=60), size=st.integers(1, 5))
def test_the_memory_keeps_the_most_recent_texts_and_at_most_twice_its_size(texts: list[str], size: int) -> None:
    """Whatever the order: the ``size`` most recently remembered texts give their last release, at most
    ``2 * size`` texts are held, and a text is forgotten once ``2 * size`` other texts came after it."""
    memo = ReleasedQueries(size=size)
    for n, text in enumerate(texts):
        memo.remember(text, f"{text}{n}")
        assert len(memo) <= 2 * size
    last: dict[str, str] = {}
    for n, text in enumerate(texts):
        last.pop(text, None)
        last[text] = f"{text}{n}"
    for text in list(last)[-size:]:
        assert memo.get(text) == last[text]
    for text in list(last)[: -2 * size]:
        assert memo.get(text) is None


QUERIES = ["flu", "cheap flights", "john smith 123-45-6789", "mail a@b.example", "rare x"]


@settings(max_examples=200, deadline=None)
@given(
    queries=st.lists(st.sampled_from(QUERIES), min_size=1, max_size=30),
    seed=st.integers(0, 2**32),
    plus=st.booleans(),
)
def test_no_referer_shows_a_text_the_chain_did_not_release(queries: list[str], seed: int, plus: bool) -> None:
    """Random logs (referers to earlier, later or unseen searches), a chain that keeps, rewrites, drops or holds
    each event at random (the same text may meet different fates) and releases in a shuffled order: every query
    text in a released referer is a released request query (or empty)."""
    rng = random.Random(seed)
    style = Style(plus=plus)
    texts = [*queries, "never requested 987-65-4321"]
    lines = []
    for q in queries:
        ref = rng.choice(["-", f"https://shop.example/search?q={encode_value(rng.choice(texts), style, 'nginx')}&p=1"])
        lines.append(line(f"/search?q={encode_value(q, style, 'nginx')}", ref, user=f"10.0.0.{rng.randrange(3)}"))
    codec = AccessLogCodec(SCHEMA)
    events = decode(codec, lines)
    released: list[Event] = []
    held: list[Event] = []
    for ev in events:
        fate = rng.choice(["keep", "rewrite", "drop", "hold"])
        if fate == "rewrite":
            ev.query = ev.query.split(" ")[0]
        if fate == "hold":
            held.append(ev)
        elif fate != "drop":
            released.append(ev)
        if held and rng.random() < 0.3:
            released.append(held.pop(rng.randrange(len(held))))
    out = [codec.encode(ev) for ev in released]
    request_queries = {ev.query for ev in released}
    check = AccessLogCodec(SCHEMA)
    for text in out:
        decode(check, [text])  # every released line still parses
        ref = referer_of(text)
        if ref != "-":
            (as_request,) = decode(AccessLogCodec(SCHEMA), [line(ref.split("shop.example", 1)[1])])
            assert as_request.query in request_queries | {""}
