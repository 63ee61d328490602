"""The literal tests that skip a detector's pattern hold wherever the pattern matches: a PO box has ``box`` or
``pob``, a local phone number (``555-0198``) a dash or a dot. Else skipping the scan would lose a finding."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from filters.hipaa_scrub.detectors.numbers import PhoneDetector
from filters.hipaa_scrub.detectors.places import AddressDetector

BOX_TEXT = st.lists(
    st.sampled_from(["p.o. box", "po box", "pob", "pobox", "post office box", "rr 2 box", "hc 4", "box", "#", "12"]),
    max_size=4,
).map(" ".join) | st.text(alphabet="poxbrhc .#12", max_size=24)
PHONE_TEXT = st.text(alphabet="2345 -.()+x", max_size=24)


@given(BOX_TEXT)
def test_every_box_match_has_box_or_pob(text: str) -> None:
    d = AddressDetector()
    for box in (dict(d.compiled)["box"], dict(d.compiled_ascii)["box"]):
        for m in box.finditer(text.lower()):
            assert "box" in m.group() or "pob" in m.group()


@given(PHONE_TEXT)
def test_every_local_phone_match_has_a_dash_or_dot(text: str) -> None:
    local = dict(PhoneDetector().compiled)["local"]
    for m in local.finditer(text):
        assert "-" in m.group() or "." in m.group()


def test_the_gated_detectors_still_find_their_examples() -> None:
    out: list = []
    AddressDetector().detect("p.o. box 1234", "p.o. box 1234", out)
    PhoneDetector().detect("call 555-0198 now", "call 555-0198 now", out)
    assert [s.kind for s in out] == ["address", "phone"]
