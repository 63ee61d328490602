"""hipaa_scrub's compiled parts find what their sources find, and an outdated build never runs.

The per-query loop (filters/hipaa_scrub/engine.py) and the word pre-checks with the cue scan
(filters/hipaa_scrub/detectors/prechecks.py) are pure modules that a build may compile with mypyc
(sidecar/api/compiled.py). The tests compare each module as imported with its source loaded apart: with a
compiled build beside the sources (a build of pyproject.toml's compiled list) that is compiled against interpreted;
without one both sides are interpreted, and the comparisons that need a build are skipped.
"""

from __future__ import annotations

import os
import pickle
import string
from pathlib import Path
from types import ModuleType

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from filters.hipaa_scrub import scrubber
from filters.hipaa_scrub.detectors import PRECHECKS
from filters.hipaa_scrub.detectors.context import ContextNumberDetector
from filters.hipaa_scrub.detectors.people import CUES, TITLES
from filters.hipaa_scrub.scrubber import ENGINE, Scrubber
from sidecar.api.compiled import EXTENSION_SUFFIX, current, is_compiled, source
from sidecar.tools.corpus import independent
from sidecar.tools.corpus.hipaa import Corpus

BUILT = Scrubber()
SOURCE = Scrubber()
SOURCE._build_engine(source(ENGINE).Engine)
PRE_SOURCE = source(PRECHECKS)

needs_engine_build = pytest.mark.skipif(not is_compiled(ENGINE), reason="engine.py has no compiled build here")
needs_prechecks_build = pytest.mark.skipif(
    not is_compiled(PRECHECKS), reason="detectors/prechecks.py has no compiled build here"
)

WORDS = [
    "john", "smith", "mary", "ann", "q", "smith-jones", "dr", "mrs", "obituary", "deere", "chase", "bank",
    "dallas", "tx", "springfield", "il", "in", "or", "me", "king", "county", "wa", "new", "york", "ny",
    "mrn", "acct", "a/c", "plate", "tag", "member", "id", "#", ":", "2012", "123", "4567", "123 456 789",
    "x9k2p7", "555-123-4567", "123-45-6788", "90210", "jane@aol.com", "192.168.1.1", "www.king-county-jobs.com",
    "4111111111111111", "1HGCM82633A004352", "main", "st", "apt", "4b", "march", "15", "1980", "age", "93",
    "cheap", "flights", "weather", "é", "Ω", "\t",
]  # fmt: skip
TEXTS = st.one_of(
    st.lists(st.sampled_from(WORDS), min_size=1, max_size=9).map(" ".join),
    st.text(alphabet="0123456789abcdemnrsxyz -./:()+@,#_'", max_size=40),
    st.text(alphabet=string.printable, max_size=60),
)


def spans(s: Scrubber, text: str) -> list[tuple[int, int, str, int, str | None, str, float]]:
    return [(x.start, x.end, x.kind, x.priority, x.general, x.residue, x.score) for x in s.detect(text)]


@needs_engine_build
@settings(max_examples=600, deadline=None)
@given(TEXTS)
def test_the_compiled_engine_finds_and_scrubs_what_its_source_does(text: str) -> None:
    assert spans(BUILT, text) == spans(SOURCE, text)
    assert BUILT.scrub(text) == SOURCE.scrub(text)


@needs_engine_build
@pytest.mark.parametrize("corpus", ["own", "independent"])
def test_the_compiled_engine_agrees_on_the_corpora(corpus: str) -> None:
    items = Corpus().items(3000, seed=11) if corpus == "own" else independent.read()
    texts = [q for q, _ in items]
    assert [spans(BUILT, q) for q in texts] == [spans(SOURCE, q) for q in texts]
    assert [BUILT.scrub(q) for q in texts] == [SOURCE.scrub(q) for q in texts]


def _pairs(module: ModuleType) -> tuple[object, object]:
    names = next(d for d in BUILT.alpha if type(d).__name__ == "NameDetector")
    places = next(d for d in BUILT.alpha if type(d).__name__ == "PlaceDetector")
    p = places.pairs  # type: ignore[attr-defined]  # PlaceDetector's
    return (
        module.NamePairs(names.first, names.last, TITLES, CUES, frozenset(names.allow), 1.5, 0.5),  # type: ignore[attr-defined]
        module.PlacePairs(p.state_first, p.wordlike, p.city_last, p.city_last_in, p.states, p.multi_first),
    )


@needs_prechecks_build
@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=8))
def test_the_compiled_word_prechecks_answer_as_their_source(words: list[str]) -> None:
    lower = " ".join(words)
    split = lower.split()
    for built, interpreted in zip(_pairs(PRECHECKS), _pairs(PRE_SOURCE), strict=True):
        assert built.wants(lower, split) == interpreted.wants(lower, split)  # type: ignore[attr-defined]


@needs_prechecks_build
@settings(max_examples=800, deadline=None)
@given(TEXTS)
def test_the_compiled_scans_match_as_their_source(text: str) -> None:
    d = next(x for x in BUILT.digit if isinstance(x, ContextNumberDetector))
    lower = text.lower()
    starts, full = d.ascii
    assert PRECHECKS.cue_values(starts, full, lower, d.SKIP) == PRE_SOURCE.cue_values(starts, full, lower, d.SKIP)
    built = [m.span() for m in PRECHECKS.scan_from_starts(d.starts, d.combined, lower)]
    assert built == [m.span() for m in PRE_SOURCE.scan_from_starts(d.starts, d.combined, lower)]
    token = d.compiled[0][1]
    assert PRECHECKS.tokens(token, lower, ".") == PRE_SOURCE.tokens(token, lower, ".")


@settings(max_examples=300, deadline=None)
@given(TEXTS)
def test_cue_values_are_the_scan_and_value_checks(text: str) -> None:
    """The written-out loop (:func:`prechecks.cue_values`) keeps the values ``_take`` keeps from the same scan."""
    d = next(x for x in BUILT.digit if isinstance(x, ContextNumberDetector))
    lower = text.lower()
    taken: list = []
    for m in d.matches(lower):
        d._take(m, taken)
    expected = [(s.start, s.end, s.kind) for s in taken]
    assert PRE_SOURCE.cue_values(d.starts, d.combined, lower, d.SKIP) == expected


def test_a_build_older_than_its_source_runs_the_source(tmp_path: Path) -> None:
    """An extension module is imported in place of its ``.py``: one built before the source's last edit gives way
    to the source; one built after it (or from its digest) is used."""
    src = tmp_path / "fastloop.py"
    src.write_text("WHO = 'source'\n")
    build = tmp_path / ("fastloop" + EXTENSION_SUFFIX)
    build.write_bytes(b"not a real library")
    os.utime(build, (1_000_000, 1_000_000))  # older than the source
    fake = ModuleType("e28pkg.fastloop")
    fake.__file__ = str(build)
    chosen = current(fake)
    assert chosen is not fake and chosen.WHO == "source"
    assert chosen.__name__ == "e28pkg.fastloop_source"
    os.utime(build, None)
    os.utime(src, (1_000_000, 1_000_000))  # now the build is the newer
    assert current(fake) is fake


def test_the_interpreted_source_is_never_swapped() -> None:
    assert current(scrubber) is scrubber  # a .py module is itself
    assert current(ENGINE) is ENGINE and current(PRECHECKS) is PRECHECKS  # what the scrubber and detectors use


def test_a_pickled_scrubber_builds_its_engine_again() -> None:
    copy = pickle.loads(pickle.dumps(BUILT))
    assert type(copy.engine) is type(BUILT.engine)
    for text in ("call john smith at 555-123-4567", "mrn 00123456 dallas tx", "cheap flights"):
        assert spans(copy, text) == spans(BUILT, text)
        assert copy.scrub(text) == BUILT.scrub(text)
    assert scrubber.resolve is ENGINE.resolve


def test_the_bench_says_whether_the_loop_runs_compiled() -> None:
    from sidecar.tools.bench.scrub import engine_build

    said = engine_build()
    assert said.startswith("per-query loop " + ("compiled" if is_compiled(ENGINE) else "interpreted"))
    assert ("word pre-checks " + ("compiled" if is_compiled(PRECHECKS) else "interpreted")) in said
