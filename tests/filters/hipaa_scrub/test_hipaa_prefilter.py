"""hipaa_scrub's one-pass prefilter (filters/hipaa_scrub/prefilter.py) never changes a finding.

Every digit, e-mail and network detector declares ``TRIGGERS``: RE2 patterns of which one matches wherever the
detector finds anything. The scrubber matches them all in one pass and runs only the detectors with a trigger found
(without their pre-check calls). A trigger that is not a necessary condition would lose recall silently, so random
texts and both corpora are scanned with the prefilter, without it, and without any pre-check.
"""

from __future__ import annotations

import pickle
import string

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filters.hipaa_scrub import HipaaScrubConfig, Scrubber
from filters.hipaa_scrub.detectors import Detector, Span
from filters.hipaa_scrub.prefilter import Prefilter
from sidecar.tools.corpus import independent, vehicles
from sidecar.tools.corpus.hipaa import Corpus

FILTERED = Scrubber()
PLAIN = Scrubber(prefilter=False)
UNGATED = Scrubber(prechecks=False)
BARE = HipaaScrubConfig(bare_domains="scrub", url_paths="all")
FILTERED_BARE = Scrubber(BARE)
PLAIN_BARE = Scrubber(BARE, prefilter=False)

PIECES = st.sampled_from(  # one piece per word, as typed
    [
        "john",
        "smith",
        "mary",
        "dr",
        "obituary",
        "born",
        "dob",
        "died",
        "age",
        "aged",
        "93",
        "105",
        "090",
        "years",
        "yo",
        "y/o",
        "old",
        "ss",
        "ssn",
        "ss#",
        "soc",
        "sec",
        "social",
        "security",
        "#",
        ":",
        "=",
        "-",
        "/",
        ".",
        ",",
        "(",
        ")",
        "+",
        "@",
        "x",
        "ext",
        "fax",
        "mrn",
        "member",
        "id",
        "policy",
        "acct",
        "a/c",
        "card",
        "visa",
        "s/n",
        "serial",
        "vin",
        "plate",
        "tag",
        "main",
        "st",
        "ave",
        "box",
        "po",
        "pob",
        "rr",
        "apt",
        "4b",
        "march",
        "mar",
        "15th",
        "of",
        "1980",
        "2006",
        "12",
        "3",
        "31",
        "3/15",
        "03/15/1980",
        "1980-03-15",
        "7.4.2006",
        "555-123-4567",
        "(555)",
        "5551234567",
        "15551234567",
        "555-1234",
        "555.123.4567",
        "+44",
        "+1",
        "020",
        "7946",
        "0958",
        "(030)",
        "612",
        "345",
        "678",
        "123-45-6788",
        "123",
        "45",
        "6788",
        "123456788",
        "900-70-1234",
        "4111",
        "1111",
        "1111",
        "1111",
        "4111111111111111",
        "490154203237518",
        "1HGCM82633A004352",
        "x4dwjpdw9eww26942",
        "1EG4-TE5-MK73",
        "1eg4te5mk73",
        "a1b2c3d4e5f6g7h8i9",
        "978-0-306-40615-7",
        "12345678901",
        "9876543210",
        "90210",
        "90210-1234",
        "07060",
        "jane@aol.com",
        "mary_5@x.co",
        "192.168.1.1",
        "1.5.0.4",
        "2001:db8::1",
        "::ffff:192.0.2.1",
        "1a-fd-c9-b2-c4-54",
        "25:7b:cf:5e:12:65",
        "c797.ff08.a6cd",
        "myspace.com/jsmith",
        "jane.blogspot.com",
        "www.google.com",
        "http://x.org/~u?id=5",
        "ip",
        "host",
        "7abc123",
        "abc-1234",
        "ny",
        "zip",
        "code",
        "12345",
    ]
)
TEXTS = st.lists(PIECES, min_size=1, max_size=8).map(" ".join)
SOUP = st.text(alphabet="0123456789abcdefxy -./:()+@,#_%~?=&" + "\t\x0b", max_size=40)
PRINTABLE = st.text(alphabet=string.printable, max_size=60)


def spans(s: Scrubber, text: str) -> list[tuple[int, int, str]]:
    return [(x.start, x.end, x.kind) for x in s.detect(text)]


def test_the_prefilter_is_on_by_default_and_off_when_asked_or_without_prechecks() -> None:
    assert FILTERED.prefilter is not None
    assert PLAIN.prefilter is None and UNGATED.prefilter is None


@settings(max_examples=800, deadline=None)
@given(st.one_of(TEXTS, SOUP, PRINTABLE))
def test_the_prefilter_changes_no_finding(text: str) -> None:
    """Random texts: the same spans with the prefilter, without it and without any pre-check; the same scrubbed
    text too (the rescans go through the prefilter again)."""
    assert spans(FILTERED, text) == spans(PLAIN, text) == spans(UNGATED, text)
    assert FILTERED.scrub(text) == PLAIN.scrub(text)
    assert spans(FILTERED_BARE, text) == spans(PLAIN_BARE, text)


@pytest.mark.parametrize(
    "items",
    [
        pytest.param(lambda: Corpus().items(4000, seed=7), id="own"),
        pytest.param(lambda: independent.read(), id="independent"),
        pytest.param(lambda: vehicles.read(), id="vehicles"),
    ],
)
def test_the_prefilter_changes_no_finding_on_the_corpora(items: object) -> None:
    """The own corpus and the independent ones: the same spans with and without the prefilter."""
    texts = [q for q, _ in items()]  # type: ignore[operator]  # a corpus reader
    assert [spans(FILTERED, q) for q in texts] == [spans(PLAIN, q) for q in texts]


@settings(max_examples=400, deadline=None)
@given(st.one_of(TEXTS, SOUP))
def test_each_detector_finds_nothing_without_one_of_its_triggers(text: str) -> None:
    """The property each declaration promises, detector by detector: a finding implies a trigger match."""
    pre = FILTERED.prefilter
    assert pre is not None
    lower = text.lower()
    hits = set(pre.hits(lower.encode()))
    for d in FILTERED.digit + FILTERED.at + FILTERED.net:
        out: list[Span] = []
        d.detect(text, lower, out)
        ids = pre.ids(d)
        if out and ids is not None:
            assert ids & hits, (type(d).__name__, text)


@pytest.mark.parametrize(
    ("text", "runs", "skipped"),
    [
        ("ssn 078-05-1121", "SsnDetector", "CardDetector"),
        ("call 555-123-4567", "PhoneDetector", "SsnDetector"),
        ("jane@aol.com", "EmailDetector", "PhoneDetector"),
        ("25:7b:cf:5e:12:65", "MacDetector", "UrlDetector"),
        ("vin 1HGCM82633A004352", "VinDetector", "MbiDetector"),
        ("ip 192.168.1.1", "IpDetector", "MacDetector"),
    ],
)
def test_the_plan_runs_the_detector_a_trigger_names_and_skips_the_others(text: str, runs: str, skipped: str) -> None:
    """Positives beside negatives: the plan for a text holds the detectors whose triggers occur, not the others."""
    pre = FILTERED.prefilter
    assert pre is not None
    ordered, last = pre.plan(text.lower().encode())
    names = {type(run.__self__).__name__ for _, run in ordered} | {type(run.__self__).__name__ for run in last}
    assert runs in names and skipped not in names


def test_a_text_without_triggers_runs_no_digit_or_network_detector() -> None:
    pre = FILTERED.prefilter
    assert pre is not None
    assert pre.hits(b"o'neal & sons, cheap flights") == ()
    assert pre.plan(b"o'neal & sons, cheap flights") == ([], [])


class _Untriggered(Detector):
    """A detector that declares no triggers."""

    KINDS = ("id",)

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        if "zz" in lower:
            out.append(Span(0, 2, "id"))


def test_a_detector_without_triggers_always_runs() -> None:
    """The safe default: no TRIGGERS, no skipping."""
    d = _Untriggered()
    pre = Prefilter([d], [])
    assert pre.ids(d) is None
    for raw in (b"", b"plain words", b"zz 12"):
        ordered, _ = pre.plan(raw)
        assert [run for _, run in ordered] == [d.detect]


SMALL = Prefilter(FILTERED.digit, [*FILTERED.at, *FILTERED.net], max_mem=96 << 10)
"""The set with about the least DFA budget it compiles with (64 KiB fails): 340 times less than the default."""


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(TEXTS, SOUP), min_size=10, max_size=30))
def test_a_set_short_of_memory_still_finds_every_trigger(texts: list[str]) -> None:
    """Fault injection: with almost no DFA budget RE2 keeps starting its state cache afresh; the triggers found are
    the same (a set that gave up would report none and skip detectors)."""
    small = SMALL
    pre = FILTERED.prefilter
    assert pre is not None and small.patterns == pre.patterns
    for text in texts:
        raw = (text * 8).lower().encode()  # longer texts: more states per text
        assert sorted(small.hits(raw)) == sorted(pre.hits(raw))


def test_a_scrubber_with_the_prefilter_pickles() -> None:
    """An RE2 set does not pickle; the prefilter is rebuilt from its detectors."""
    copy = pickle.loads(pickle.dumps(FILTERED))
    assert copy.prefilter is not None and copy.prefilter.patterns == FILTERED.prefilter.patterns  # type: ignore[union-attr]
    assert spans(copy, "call 555-123-4567 or jane@aol.com") == spans(PLAIN, "call 555-123-4567 or jane@aol.com")
