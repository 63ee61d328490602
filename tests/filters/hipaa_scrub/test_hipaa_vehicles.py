"""Vehicle identifiers (issue 28 item 4): the plate detector's table (negatives beside positives) and the
independent vehicle corpus (tests/data/independent_vehicles.jsonl, written from 49 CFR 565 and the states'
plate formats by a generator that imports nothing of the scrubber)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from filters.hipaa_scrub import HipaaScrubConfig, Scrubber
from filters.hipaa_scrub.detectors.context import vin_check_ok
from sidecar.tools.corpus import vehicles
from sidecar.tools.evaluate.scrubber import evaluate


@pytest.fixture(scope="module")
def scrubber() -> Scrubber:
    return Scrubber(HipaaScrubConfig())


PLATES = [
    ("license plate 7abc123", "license plate"),
    ("who owns license plate ABC-1234", "who owns license plate"),
    ("ny tag abc 1234", "ny tag"),
    ("tag 105 uqy", "tag"),
    ("plate number ab 12345 illinois", "plate number illinois"),
    ("7abc123 plate owner", "plate owner"),
    ("d73-igu ny plate", "ny plate"),
    ("1ne1466 license plate", "license plate"),
    ("plates thv1088", "plates"),
    # negatives: cue words without a plate
    ("license plate frames", "license plate frames"),
    ("2006 license plates", "2006 license plates"),
    ("10 inch plate", "10 inch plate"),
    ("pack12 paper plates", "pack12 paper plates"),  # a word, not a state, before the cue
    ("tag sale 2006", "tag sale 2006"),
    ("plate 7 of 12", "plate 7 of 12"),
    ("tag heuer 2000 series", "tag heuer 2000 series"),
    ("abc 1234 songs", "abc 1234 songs"),  # a plate shape without a cue
]


@pytest.mark.parametrize(("query", "scrubbed"), PLATES, ids=[q for q, _ in PLATES])
def test_plates(scrubber: Scrubber, query: str, scrubbed: str) -> None:
    assert scrubber.scrub(query)[0] == scrubbed


def test_check_digit_follows_49_cfr_565() -> None:
    """The generator's check digit (its own table) agrees with the regulation's worked example and, on drawn
    VINs, with the detector's (two implementations of the same public rule)."""
    assert vehicles.check_digit("1M8GDM9A0KP042788") == "X"
    r = random.Random(3)
    for _ in range(500):
        vin = vehicles.draw_vin(r)
        assert vin_check_ok(vin)
        assert not vin_check_ok(vehicles.draw_vin(r, valid=False))


def test_frozen_file_is_what_the_generator_writes() -> None:
    assert vehicles.FROZEN.read_text(encoding="utf-8").splitlines() == vehicles.to_lines(vehicles.items())


def test_generator_imports_nothing_of_the_scrubber() -> None:
    source = Path(vehicles.__file__).read_text(encoding="utf-8")
    imports = [ln.strip() for ln in source.splitlines() if ln.strip().startswith(("import ", "from "))]
    assert not [ln for ln in imports if "hipaa" in ln or "filters" in ln]


def test_recall_on_the_independent_vehicle_corpus(scrubber: Scrubber) -> None:
    """Every kind (printed VINs, cued VINs with any check digit, plates) at recall >= 0.99; every word of the
    ordinary rows (cue words, no identifier) kept."""
    sc = evaluate(lambda q: [(s.start, s.end, s.kind) for s in scrubber.detect(q)], vehicles.read())
    assert all(sc.planted[k] == vehicles.ROWS_PER_KIND for k in vehicles.KINDS)
    assert min(sc.recall(k) for k in vehicles.KINDS) >= 0.99
    assert sc.kept >= 0.99


def test_prechecks_find_the_same_spans_on_the_vehicle_corpus(scrubber: Scrubber) -> None:
    ungated = Scrubber(HipaaScrubConfig(), prechecks=False)
    for query, _ in vehicles.read():
        assert scrubber.detect(query) == ungated.detect(query)
