"""Real query texts (the AOL excerpt in ../shared/data), URL-encoded by urllib (not by our encoder) in both styles
into nginx combined lines whose referer is the user's previous search: every text comes back exactly, every line
comes back byte for byte, and a changed query is written in the line's style and read back. Skipped without the
data; counts only, never a line."""

from __future__ import annotations

import csv
from urllib.parse import quote, quote_plus

import pytest
from helpers import SHARED_DATA

from adapters.accesslog.codec import AccessLogCodec
from sidecar.api import SchemaConfig

SAMPLE = SHARED_DATA / "aol-sample.tsv"

pytestmark = pytest.mark.skipif(not SAMPLE.exists(), reason="../shared/data/aol-sample.tsv is absent")


def real_lines() -> tuple[list[str], list[str]]:
    """nginx lines for the sample's queries (one user per AnonID) and the query of each."""
    lines, texts = [], []
    previous: dict[str, str] = {}
    with SAMPLE.open(encoding="utf-8", newline="") as f:
        for i, row in enumerate(csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)):
            user, text = row["AnonID"], row["Query"]
            value = quote_plus(text) if i % 2 else quote(text, safe="")
            target = f"/search?q={value}&page=1"
            referer = f"https://shop.example{previous[user]}" if user in previous else "-"
            previous[user] = target
            addr = f"10.0.{int(user) >> 8 & 255}.{int(user) & 255}"
            lines.append(f'{addr} - - [01/Mar/2006:00:00:00 +0000] "GET {target} HTTP/1.1" 200 5 "{referer}" "-"')
            texts.append(text)
    return lines, texts


def test_real_queries_come_back_exactly() -> None:
    lines, texts = real_lines()
    codec = AccessLogCodec(SchemaConfig(format="access_log", search_path="/search"))
    bad: list[tuple[int, str]] = []
    events = codec.decode_many(lines, "\n", bad)
    assert bad == [] and len(events) == len(lines) > 30_000
    wrong = sum(e.query != t for e, t in zip(events, texts, strict=True))
    assert wrong == 0
    assert sum(codec.encode(e) != line for e, line in zip(events, lines, strict=True)) == 0
    changed = AccessLogCodec(codec.schema)
    events = changed.decode_many(lines, "\n", bad)
    for e in events:
        e.query = e.query.upper() + " x"
    out = [changed.encode(e) for e in events]
    again = AccessLogCodec(codec.schema).decode_many(out, "\n", bad)
    assert bad == [] and sum(a.query != t.upper() + " x" for a, t in zip(again, texts, strict=True)) == 0
    spaced = [i for i, t in enumerate(texts) if " " in t]  # a one-word query shows no style: + by default
    assert len(spaced) > 20_000
    assert all(("+x&" in out[i].split('"', 2)[1]) == (i % 2 == 1) for i in spaced)  # + where urllib wrote +
