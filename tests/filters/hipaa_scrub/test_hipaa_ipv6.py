"""hipaa_scrub's IPv6 check (``inet_pton``) accepts exactly what ``ipaddress.IPv6Address`` accepts."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from filters.hipaa_scrub.detectors.network import IpDetector, ipv6_ok


def reference(address: str) -> bool:
    """The check the detector made before: the standard library's parser."""
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return False
    return True


GROUP = st.text("0123456789abcdef", min_size=0, max_size=5)
OCTET = st.sampled_from(["0", "1", "9", "00", "01", "10", "99", "255", "256", "001", "999"])
TAIL = st.lists(OCTET, min_size=3, max_size=5).map(".".join)


@st.composite
def addresses(draw: st.DrawFn) -> str:
    """Colon-joined hex groups (empty groups make ``::``), sometimes an IPv4 tail: valid and invalid forms."""
    text = ":".join(draw(st.lists(GROUP, min_size=1, max_size=10)))
    if draw(st.booleans()):
        text += ":" + draw(TAIL)
    return text


@given(addresses())
def test_ipv6_check_agrees_with_ipaddress(address: str) -> None:
    assert ipv6_ok(address) == reference(address)


@given(st.from_regex(IpDetector.PATTERNS[1].regex, fullmatch=False))
def test_ipv6_check_agrees_on_what_the_pattern_finds(text: str) -> None:
    for m in IpDetector().compiled[1][1].finditer(text.lower()):
        candidate = m.group().split("%")[0]
        assert ipv6_ok(candidate) == reference(candidate)


@pytest.mark.parametrize(
    ("address", "ok"),
    [
        ("::1", True),
        ("2001:db8::8a2e:370:7334", True),
        ("1:2:3:4:5:6:7::", True),  # "::" for one group
        ("::ffff:192.0.2.1", True),
        ("1:2:3:4:5:6:7:8::", False),
        ("1::2::3", False),
        ("12345::1", False),
        ("::ffff:192.0.2.01", False),  # a leading zero in the IPv4 tail
        ("::ffff:256.0.0.1", False),
        (":1:2:3:4:5:6:7", False),
        ("", False),
        ("::\u0661.2.3.4", False),  # a non-ASCII digit
        ("1::\x00", False),
    ],
)
def test_ipv6_check_examples(address: str, ok: bool) -> None:
    assert ipv6_ok(address) is ok
    assert reference(address) is ok
