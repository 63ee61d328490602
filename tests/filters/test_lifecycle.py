"""The lifecycle of every registered filter, the built-ins' registration, and events (repr, original line).

Each built-in filter's own behaviour is tested in its folder (tests/filters/<name>/)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import structlog
from helpers import GeneratedLog, default_filter_entries, find_leaks, leak_needles
from helpers.filters import build_filter, decode_tsv, make_event

from filters.pseudonymize import PseudonymizeFilter
from sidecar.api import FILTERS, Event
from sidecar.registry import plugins
from sidecar.state import StateStore

# --- lifecycle of every registered filter (STYLE.md item 5) ---------------------------------

ENTRIES, SKIPPED = default_filter_entries()


@pytest.mark.parametrize("entry", ENTRIES, ids=[next(iter(e)) for e in ENTRIES])
def test_lifecycle_build_process_flush_close_logs_no_values(
    entry: dict,
    generated_log: GeneratedLog,
    tmp_path: Path,
    hmac_key: str,
    debug_structlog: None,
) -> None:
    """build -> process (batches) -> flush -> flush(final) -> close; no more events out than in;
    counts and stats are plain numbers; no captured log event quotes a value."""
    ((name, options),) = entry.items()
    cls = plugins(FILTERS)[name]
    events = decode_tsv(generated_log.text)
    ids = {id(e) for e in events}
    state = StateStore(tmp_path / "state")
    out: list[Event] = []
    with structlog.testing.capture_logs() as logs:
        f = build_filter(cls, options, tmp_path, state)
        for i in range(0, len(events), 500):
            out += f.process(events[i : i + 500])
            out += f.flush(False)
        out += f.flush(True)
        held = f.held()
        stats = f.stats()
        counts = dict(f.counts)
        f.close()
    state.close()
    assert all(isinstance(e, Event) for e in out)
    if not cls.BUFFERING:  # a buffering filter may rebuild held events from the state store
        assert all(id(e) in ids for e in out), "a filter returns the events it was given"
        assert len({id(e) for e in out}) == len(out), "no event comes out twice"
    assert isinstance(held, int) and held >= 0
    assert len(out) + held <= len(events)
    json.dumps(stats)
    assert all(isinstance(k, str) and isinstance(v, int) for k, v in counts.items())
    needles = leak_needles(generated_log.text, generated_log.stats.planted_values)
    assert find_leaks(logs, needles) == []
    assert find_leaks([counts, stats], needles) == [], "counts and stats hold no values"


@pytest.mark.parametrize("entry", ENTRIES, ids=[next(iter(e)) for e in ENTRIES])
def test_every_filter_copes_with_empty_queries(entry: dict, tmp_path: Path, hmac_key: str) -> None:
    """An empty or blank query is a valid event (issue 11, defect 13): every registered filter, with its default
    options, takes batches in which most queries are empty or blank without failing, and invents no query for
    one: every query that comes out went in (the others are held or dropped)."""
    ((name, options),) = entry.items()
    cls = plugins(FILTERS)[name]
    texts = ["", "  ", "weather", "\u3000", "cheap flights", " "]
    lines = [f"{100 + i % 7}\t{texts[i % len(texts)]}\t2006-03-01 00:00:{i:02d}\t\t" for i in range(60)]
    events = decode_tsv("AnonID\tQuery\tQueryTime\tItemRank\tClickURL\n" + "\n".join(lines))
    state = StateStore(tmp_path / "state")
    f = build_filter(cls, options, tmp_path, state)
    out: list[Event] = []
    for i in range(0, len(events), 20):
        out += f.process(events[i : i + 20])
    out += f.flush(False)
    held = f.held()
    f.close()
    state.close()
    assert len(out) + held <= len(events)
    assert {e.query for e in out} <= set(texts)
    assert all(isinstance(v, int) for v in f.counts.values())


def test_built_in_filters_are_registered_and_default_buildable() -> None:
    """The three built-ins are registered through the entry-point group and enter the lifecycle test."""
    names = [next(iter(e)) for e in ENTRIES]
    assert {"pseudonymize", "truncate_url", "drop"} <= set(names), SKIPPED
    assert plugins(FILTERS)["pseudonymize"] is PseudonymizeFilter


def test_event_repr_hides_values() -> None:
    """Events end up in tracebacks: their repr names no value."""
    e = make_event("4417749", "john smith 123-45-6789", "http://a.com/x")
    assert all(v not in repr(e) for v in ("4417749", "john", "123-45", "a.com"))


def test_events_from_text_keep_their_line(generated_log: GeneratedLog) -> None:
    """Decoded events keep the original line so an unchanged event is written back byte for byte."""
    events = decode_tsv(generated_log.text, 50)
    codec = events[0].codec
    buf = io.StringIO()
    for e in events:
        buf.write(codec.encode(e) + "\n")
    assert generated_log.text.split("\n", 1)[1].startswith(buf.getvalue())
