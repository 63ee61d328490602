"""hipaa_scrub pre-checks are necessary conditions: skipping them changes no detection.

The scrubber runs a detector only when a cheap pre-check passes (digit count and digit-run
lengths, cue words, a state word after a town's last word, a scored name pair...). A
pre-check that wrongly blocks a detector would silently lose recall, so texts built from
identifier-like pieces are scanned with every pre-check on and with every pre-check off.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filters.hipaa_scrub import HipaaScrubConfig, Scrubber
from filters.hipaa_scrub.detectors import scan_from_starts
from sidecar.tools.corpus.hipaa import Corpus

GATED = Scrubber()
UNGATED = Scrubber(prechecks=False)
STRICT = HipaaScrubConfig(city_keep_population=None, name_threshold=0.0, name_cue_threshold=-1.0)
GATED_STRICT = Scrubber(STRICT)
UNGATED_STRICT = Scrubber(STRICT, prechecks=False)
BARE = HipaaScrubConfig(bare_domains="scrub")
GATED_BARE = Scrubber(BARE)
UNGATED_BARE = Scrubber(BARE, prechecks=False)

PIECES = st.sampled_from(
    [
        "john",
        "smith",
        "mary",
        "ann",
        "q",
        "smith-jones",
        "o'neal",
        "dr",
        "mrs",
        "obituary",
        "heather",
        "plants",
        "chase",
        "bank",
        "deere",
        "harley",
        "davidson",
        "baby",
        "ruth",
        "university",
        "may",
        "rose",
        "jordan",
        ",",
        "hope",
        "ar",
        "in",
        "me",
        "new",
        "york",
        "springfield",
        "county",
        "orange",
        "plainfield",
        "nj",
        "st",
        "louis",
        "mo",
        "saint",
        "123",
        "4500",
        "12",
        "1",
        "07060",
        "90210-1234",
        "555-123-4567",
        "(555) 123 4567",
        "5551234567",
        "15551234567",
        "555-1234",
        "+44 20 7946 0958",
        "123-45-6788",
        "123 45 6788",
        "123456788",
        "4111 1111 1111 1111",
        "4111111111111111",
        "490154203237518",
        "1HGCM82633A004352",
        "x4dwjpdw9eww26942",
        "978-0-306-40615-7",
        "a1b2c3d4e5f6g7h8i9",
        "12345678901",
        "03/15/1980",
        "1980-03-15",
        "march",
        "15,",
        "1980",
        "15th",
        "of",
        "born",
        "dob",
        "3/15",
        "age",
        "93",
        "years",
        "old",
        "yo",
        "mrn",
        "member",
        "id",
        "a/c",
        "s/n",
        "vin",
        "plate",
        "ABC1234",
        "ssn",
        "fax",
        "zip",
        "main",
        "ave",
        "box",
        "po",
        "apt",
        "4b",
        "jane@aol.com",
        "192.168.1.1",
        "1.5.0.4",
        "2001:db8::1",
        "1a-fd-c9-b2-c4-54",
        "c797.ff08.a6cd",
        "myspace.com/jsmith",
        "jane.blogspot.com",
        "www.google.com",
        "2001:0db8:85a3:0000:0000:8a2e:0370:7334",
        "::ffff:192.0.2.1",
        "1:2:3:4:5:6:10.0.0.1",
        "25:7b:cf:5e:12:65",
        "social security",
        "soc sec #",
        "ss#",
        "555.123.4567",
        "1-800-555-1234",
        "(555)123-4567",
        "5551234",
        "12-25-1980",
        "1980/12/25",
        "7.4.2006",
        "3-15",
        "1EG4-TE5-MK73",
        "1eg4te5mk73",
        "020 7946 0958",
        "(030) 1234 5678",
        "612 345 678",
        "1-800-555-1234-5678",
        "123-45-6789-12345",
        "4111111111111111-12",
        "ab1234567",
        "member id 12345678x",
        "9876543210",
        "_",
    ]
)
TEXTS = st.lists(PIECES, min_size=1, max_size=8).map(" ".join)


def spans(s: Scrubber, text: str) -> list[tuple[int, int, str]]:
    return [(x.start, x.end, x.kind) for x in s.detect(text)]


def test_the_switch_turns_the_prechecks_off() -> None:
    """Scrubber(prechecks=False) reports the switch and its combined network pre-check passes any text (weather),
    which the default scrubber's rejects; the default keeps its pre-checks."""
    assert GATED.prechecks and not UNGATED.prechecks and not UNGATED_STRICT.prechecks
    assert GATED.netcheck.search("weather") is None
    assert UNGATED.netcheck.search("weather") is not None


@settings(max_examples=600, deadline=None)
@given(TEXTS)
def test_prechecks_block_nothing(text: str) -> None:
    """On texts built from identifier-like pieces, scrubbers with pre-checks find the same spans as
    Scrubber(prechecks=False), under the default, the strict-name and the bare-domain configs."""
    assert spans(GATED, text) == spans(UNGATED, text)
    assert spans(GATED_STRICT, text) == spans(UNGATED_STRICT, text)
    assert spans(GATED_BARE, text) == spans(UNGATED_BARE, text)


@pytest.mark.parametrize("text", ["snowboards for sale", "snapchatter app", "snorkelgear cheap", "s/nowhere"])
def test_a_cue_that_starts_a_longer_word_is_no_cue_with_or_without_prechecks(text: str) -> None:
    """``sn`` at the start of a word is not a serial cue, so ``querylog scrub --explain`` (no pre-checks) and
    ``querylog scrub`` agree: both keep the text."""
    assert spans(UNGATED, text) == spans(GATED, text) == []


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet="0123456789abcdefx -./:()+@,#", max_size=40))
def test_prechecks_block_nothing_on_symbol_soup(text: str) -> None:
    """On short texts of digits, hex letters and punctuation the default scrubber finds the same spans as
    Scrubber(prechecks=False)."""
    assert spans(GATED, text) == spans(UNGATED, text)


@pytest.fixture(scope="module")
def corpus_texts() -> list[str]:
    return [q for q, _ in Corpus().items(1150, seed=5)]


def test_prechecks_block_nothing_on_the_corpus(corpus_texts: list[str]) -> None:
    """Same spans on a corpus sample with and without pre-checks."""
    assert [spans(GATED, q) for q in corpus_texts] == [spans(UNGATED, q) for q in corpus_texts]


CUE_TEXT = st.lists(
    st.sampled_from(
        [
            "mrn",
            "mrn:",
            "medical record",
            "medrec",
            "member id",
            "policy #",
            "account number",
            "acct",
            "a/c",
            "s/n",
            "sn",
            "serial no.",
            "license plate",
            "drivers license",
            "dl",
            "vin",
            "card",
            "cardno12345678",
            "4account",
            "x",
            "is",
            "=",
            "#",
            "00123456",
            "ab-1234",
            "1999",
            "12",
            "yrg07598386",
            "9957903289",
            "ABC1234",
        ]
    ),
    min_size=1,
    max_size=6,
).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(CUE_TEXT)
def test_cue_scan_finds_what_the_full_scan_finds(text: str) -> None:
    """ContextNumberDetector tries its pattern only where a cue starts: same matches as a full scan."""
    d = next(x for x in GATED.digit if type(x).__name__ == "ContextNumberDetector")
    lower = text.lower()
    assert [m.span() for m in d.matches(lower)] == [m.span() for m in d.combined.finditer(lower)]


DATE_TEXT = st.lists(
    st.sampled_from(
        [
            "born",
            "birth day",
            "birthdate",
            "dob",
            "d.o.b.",
            "died",
            "passed away",
            "admitted on",
            "discharge date",
            "march",
            "mar.",
            "sept",
            "september",
            "may",
            "june",
            "3",
            "15th",
            "31",
            "of",
            ",",
            "1980",
            "2006",
            "3/15",
            "x",
            "obituary",
            "bday",
        ]
    ),
    min_size=1,
    max_size=7,
).map(" ".join)


@settings(max_examples=400, deadline=None)
@given(DATE_TEXT)
def test_date_scans_find_what_the_full_scans_find(text: str) -> None:
    """Written dates and cued dates are tried only where a month or a cue starts: same matches."""
    d = next(x for x in GATED.digit if type(x).__name__ == "DateDetector")
    _, _, mdy, _, cue = (rx for _, rx in d.compiled)
    lower = text.lower()
    for starts, full in ((d._month_start, mdy), (d._cue_start, cue)):
        assert [m.span() for m in scan_from_starts(starts, full, lower)] == [m.span() for m in full.finditer(lower)]


@settings(max_examples=400, deadline=None)
@given(DATE_TEXT)
def test_date_gates_hold_wherever_a_pattern_matches(text: str) -> None:
    """DateDetector tries its written and cued patterns only when a cheaper search passes first."""
    d = next(x for x in GATED.digit if type(x).__name__ == "DateDetector")
    _, _, mdy, dmy, cue = (rx for _, rx in d.compiled)
    lower = text.lower()
    if mdy.search(lower):
        assert d._day_year.search(lower)
    if dmy.search(lower):
        assert d._day_month.search(lower)
    if cue.search(lower):
        assert d._cue_part.search(lower)


def test_a_text_without_trigger_words_skips_the_word_detectors() -> None:
    """One set test replaces the per-detector word checks; a name or a town still gets through."""
    assert GATED._alpha_words is not None
    assert GATED._alpha_words.isdisjoint(["cheap", "flights", "weather"])
    assert spans(GATED, "obituary john smith") == [(9, 19, "name")]
    assert spans(GATED, "cheap flights weather") == []


def _ascii_pairs() -> list[tuple[re.Pattern[str], re.Pattern[str]]]:
    """Every case-insensitive pattern that detectors run on lowercased text, with its ASCII variant."""
    pairs = []
    for d in GATED.digit + GATED.net + GATED.at + GATED.alpha:
        pairs += [(rx, fast) for (_, rx), (_, fast) in zip(d.compiled, d.compiled_ascii, strict=True)]
        for name in ("ascii", "starts_ascii", "gates_ascii"):
            if hasattr(d, name):
                slow = {
                    "ascii": lambda d: (d.starts, d.combined),
                    "starts_ascii": lambda d: (d._month_start, d._cue_start),
                    "gates_ascii": lambda d: (d._day_year, d._day_month),
                }[name](d)
                pairs += list(zip(slow, getattr(d, name), strict=True))
        if hasattr(d, "mixed_ascii"):
            pairs.append((d.mixed, d.mixed_ascii))
        if hasattr(d, "RUN17_ASCII"):
            pairs.append((d.RUN17, d.RUN17_ASCII))
    return pairs


ASCII_PAIRS = _ascii_pairs()


@settings(max_examples=300, deadline=None)
@given(st.one_of(TEXTS, st.text(alphabet="0123456789abcdefxyzABCDEFXYZ -./:()+@,#'", max_size=40)))
def test_ascii_variants_match_like_the_case_insensitive_patterns(text: str) -> None:
    """On ASCII lowercased text the case-sensitive variants find exactly the same matches."""
    lower = text.lower()
    assert lower.isascii()
    for slow, fast in ASCII_PAIRS:
        assert [m.span() for m in fast.finditer(lower)] == [m.span() for m in slow.finditer(lower)], slow.pattern


def test_ascii_variant_keeps_patterns_with_capitals_and_drops_only_ignorecase() -> None:
    """ascii_variant returns a pattern with a capital letter, or one without IGNORECASE, unchanged and drops
    IGNORECASE from a lowercase one (named groups kept); at least one detector pattern gets such a faster variant."""
    from filters.hipaa_scrub.detectors import ascii_variant

    capital = re.compile(r"X\d", re.IGNORECASE)
    assert ascii_variant(capital) is capital
    plain = re.compile(r"x\d")
    assert ascii_variant(plain) is plain
    named = ascii_variant(re.compile(r"(?P<v>ab)\S", re.IGNORECASE))
    assert not named.flags & re.IGNORECASE
    assert any(not fast.flags & re.IGNORECASE for _, fast in ASCII_PAIRS)


SPAN = st.tuples(st.integers(0, 12), st.integers(0, 5), st.sampled_from([5, 20, 20, 90]))


@settings(max_examples=500, deadline=None)
@given(st.lists(SPAN, min_size=2, max_size=4))
def test_overlap_resolution_matches_the_greedy_rule(raw: list[tuple[int, int, int]]) -> None:
    """Two spans take a shortcut; any number resolve like the plain greedy rule: by rank (longer,
    then lower priority number, then earlier), keep what overlaps nothing kept, in text order."""
    from filters.hipaa_scrub.detectors import Span
    from filters.hipaa_scrub.scrubber import _rank, _resolve

    found = [Span(a, a + n, "id", p, general=str(i)) for i, (a, n, p) in enumerate(raw)]
    kept: list[Span] = []
    for s in sorted(found, key=_rank):
        if all(s.end <= k.start or s.start >= k.end for k in kept):
            kept.append(s)
    expected = [s.general for s in sorted(kept, key=lambda s: s.start)]
    assert [s.general for s in _resolve(list(found))] == expected


@settings(max_examples=400, deadline=None)
@given(st.one_of(TEXTS, DATE_TEXT, st.text(alphabet="0123456789abx -./:,#", max_size=30)))
def test_run_lengths_hold_wherever_a_detector_finds_something(text: str) -> None:
    """A detector that declares RUNS finds nothing in a text without a digit run of one of those lengths, one that
    declares RUNS_ALL nothing in a text that lacks a run of any of those lengths."""
    lower = text.lower()
    runs = {len(r) for r in re.findall(r"\d+", text)}
    for d in GATED.digit:
        if d.RUNS is None and d.RUNS_ALL is None:
            continue
        out: list = []
        d.detect(text, lower, out)
        if out:
            assert d.RUNS is None or not d.RUNS.isdisjoint(runs), (type(d).__name__, sorted(runs))
            assert d.RUNS_ALL is None or d.RUNS_ALL.issubset(runs), (type(d).__name__, sorted(runs))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789abz -._٣", max_size=20))
def test_letter_touching_digit_gate_is_the_plain_alternation(text: str) -> None:
    """LongNumberDetector.mixed_gate finds a lowercase letter next to a digit exactly when the plain letter-digit or
    digit-letter regex does, non-ASCII digits included."""
    d = next(x for x in GATED.digit if type(x).__name__ == "LongNumberDetector")
    assert (d.mixed_gate.search(text) is None) == (re.search(r"[a-z]\d|\d[a-z]", text) is None)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789", max_size=20))
def test_luhn_matches_the_textbook_loop(digits: str) -> None:
    """luhn_ok agrees with the textbook Luhn loop (double every second digit from the right, subtract 9 above 9,
    total divisible by 10) on any digit string, the empty one included."""
    from filters.hipaa_scrub.detectors import luhn_ok

    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    assert luhn_ok(digits) == (total % 10 == 0)


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="0123456789ab (/.+-_", max_size=24))
def test_national_phone_gate_passes_wherever_the_single_scan_matches(text: str) -> None:
    """NationalPhoneDetector's two-scan pre-check passes every text its former single look-behind-first scan matched
    (the necessary condition it replaces), non-word characters before a bracket included."""
    d = next(x for x in GATED.digit if type(x).__name__ == "NationalPhoneDetector")
    former = re.compile(r"(?<![\w.+/-])\(?0[1-9]|(?<![\w.+-])[6-9]\d\d[ .-]\d\d")
    if former.search(text) is not None:
        assert d.prefilter(text, text, [], frozenset())


def _last_resort_case(text: str) -> tuple[list, list]:
    """(spans every detector but the last resorts finds in ``text``, spans the last resorts find)."""
    lower = text.lower()
    found: list = []
    extra: list = []
    for d in GATED.digit + GATED.at + GATED.net + GATED.alpha:
        d.detect(text, lower, extra if d.TOKEN_DIGITS is not None else found)
    return found, extra


@settings(max_examples=400, deadline=None)
@given(st.one_of(TEXTS, st.text(alphabet="0123456789abx -._#", max_size=30)))
def test_a_covered_text_gains_nothing_from_its_last_resorts(text: str) -> None:
    """When Scrubber._covered says the spans found settle an ASCII text, adding the spans of the last resorts
    (LongNumberDetector) changes no kept span."""
    from filters.hipaa_scrub.scrubber import _resolve

    found, extra = _last_resort_case(text)
    digits = sum(c.isdigit() for c in text)
    if found and GATED._covered(text.lower(), list(found), digits):
        key = [(s.start, s.end, s.kind) for s in _resolve(list(found))]
        assert [(s.start, s.end, s.kind) for s in _resolve(found + extra)] == key


def test_a_span_inside_a_longer_run_or_twice_found_covers_nothing() -> None:
    """A span that a run of word characters and dashes crosses does not cover the run (the last resort's longer
    span there would win), and two spans of equal rank do not count their digits twice."""
    from filters.hipaa_scrub.detectors import Span

    crossed = "ab 12345-6789012"
    assert not GATED._covered(crossed, [Span(3, 8, "zip", 40)], 12)
    assert GATED._covered("ab 12345 6789012", [Span(3, 8, "zip", 40), Span(9, 16, "phone", 20)], 12)
    _, extra = _last_resort_case(crossed)
    assert [(s.start, s.end) for s in extra] == [(3, 16)]  # what a wrong answer would have dropped
    twice = "123456789 abcd12345678"
    assert not GATED._covered(twice, [Span(0, 9, "ssn", 10), Span(0, 9, "ssn", 10)], 17)
    assert GATED._covered(twice, [Span(0, 9, "ssn", 10), Span(10, 22, "mrn", 35)], 17)
    eight = "zz 12345 ab12345678"  # 8 digits outside the span: the mixed form needs no more
    assert not GATED._covered(eight, [Span(3, 8, "zip", 40)], 13)
    assert [(s.start, s.end) for s in _last_resort_case(eight)[1]] == [(9, 19)]


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        CUE_TEXT,
        st.lists(
            st.sampled_from(["mrn", "plate", "acct", "2012", "2099", "1899", "20", "7", "123 456", "x9"]), max_size=5
        ).map(" ".join),
        st.text(alphabet="0123456789abcdmnrs -#:/'=", max_size=30),
    )
)
def test_cue_values_on_ascii_text_are_taken_like_the_general_path(text: str) -> None:
    """ContextNumberDetector's ASCII path (its scan and value checks written out) appends the spans its general
    path (``matches`` and ``_take``, the one non-ASCII text takes) appends."""
    d = next(x for x in GATED.digit if type(x).__name__ == "ContextNumberDetector")
    lower = text.lower()
    fast: list = []
    d.detect(text, lower, fast)
    general: list = []
    for m in d.matches(lower):
        d._take(m, general)
    assert [(s.start, s.end, s.kind) for s in fast] == [(s.start, s.end, s.kind) for s in general]
