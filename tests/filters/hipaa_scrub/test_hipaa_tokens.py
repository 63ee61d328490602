"""hipaa_scrub's fast tokenizers (detectors/prechecks.py ``place_tokens``, ``name_scan``) give exactly the tokens
of the detectors' token patterns, compiled (when a build is here) and interpreted."""

from __future__ import annotations

from types import ModuleType

import pytest
from hypothesis import given
from hypothesis import strategies as st

from filters.hipaa_scrub.detectors import PRECHECKS
from filters.hipaa_scrub.detectors.people import NameDetector
from filters.hipaa_scrub.detectors.places import PlaceDetector
from filters.hipaa_scrub.geo import load_geo
from filters.hipaa_scrub.names import load_names
from sidecar.api.compiled import source

BUILDS = [PRECHECKS, source(PRECHECKS)]
PLACE_RX = PlaceDetector(load_geo()).compiled[0][1]
NAME_RX = NameDetector(load_names()).compiled[0][1]
NAME_WORDS = NameDetector(load_names()).words
# letters and spaces (the fast path), and the characters that change tokens: apostrophes, hyphens, dots, digits,
# the look-behind's characters, other whitespace, capitals and non-ASCII letters
TEXTS = st.one_of(
    st.text(alphabet="abcz ", max_size=30),
    st.text(alphabet="abz019 '-./@[_\t\x1cAZé", max_size=30),
)


@pytest.mark.parametrize("module", BUILDS, ids=["as-imported", "source"])
@given(text=TEXTS)
def test_place_tokens_are_the_pattern_tokens(module: ModuleType, text: str) -> None:
    expected = [(m.start(), m.end(), m.group()) for m in PLACE_RX.finditer(text)]
    assert module.place_tokens(PLACE_RX, text) == expected


@pytest.mark.parametrize("module", BUILDS, ids=["as-imported", "source"])
@given(text=TEXTS)
def test_name_words_and_tokens_are_the_patterns(module: ModuleType, text: str) -> None:
    expected = [(m.start(), m.end(), m.group().rstrip(".")) for m in NAME_RX.finditer(text)]
    assert module.name_scan(NAME_RX, NAME_WORDS, text) == (NAME_WORDS.findall(text), expected)


@pytest.mark.parametrize("module", BUILDS, ids=["as-imported", "source"])
def test_tokens_examples(module: ModuleType) -> None:
    assert module.place_tokens(PLACE_RX, "  hope,  ar 71801") == [(2, 6, "hope"), (9, 11, "ar"), (12, 17, "71801")]
    assert module.place_tokens(PLACE_RX, "o'fallon mo") == [(0, 8, "o'fallon"), (9, 11, "mo")]
    assert module.name_scan(NAME_RX, NAME_WORDS, "john  smith") == (
        ["john", "smith"],
        [(0, 4, "john"), (6, 11, "smith")],
    )
    words, toks = module.name_scan(NAME_RX, NAME_WORDS, "dr. mary-jo o'neil")
    assert words == ["dr", "mary", "jo", "o", "neil"]
    assert toks == [(0, 3, "dr"), (4, 11, "mary-jo"), (12, 18, "o'neil")]
