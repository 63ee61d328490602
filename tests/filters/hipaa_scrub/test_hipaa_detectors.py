"""hipaa_scrub detectors: per-type tables, negatives beside positives.

Each row is (query, kinds expected to be found). An empty tuple means nothing may be found.
"""

from __future__ import annotations

import pytest

from filters.hipaa_scrub import HipaaScrubConfig, Scrubber
from filters.hipaa_scrub.detectors import luhn_ok
from filters.hipaa_scrub.detectors.context import vin_check_ok


@pytest.fixture(scope="module")
def scrubber() -> Scrubber:
    return Scrubber(HipaaScrubConfig())


def kinds(s: Scrubber, text: str) -> tuple[str, ...]:
    return tuple(sp.kind for sp in s.detect(text))


TABLES: dict[str, list[tuple[str, tuple[str, ...]]]] = {
    "ssn": [
        ("ssn 123-45-6788", ("ssn",)),
        ("my social security number 212 67 4432", ("ssn",)),
        ("ssn 212674432", ("ssn",)),
        ("ssn 000-12-3456", ()),  # area 000
        ("ssn 666-12-3456", ()),  # area 666
        ("ssn 912-12-3456", ()),  # area 9xx
        ("ssn 123-00-4567", ()),  # group 00
        ("ssn 123-45-0000", ()),  # serial 0000
        ("ssn 078-05-1120", ()),  # the Woolworth wallet card
        ("212674432", ("id",)),  # 9 bare digits without an SSN cue: some other number
    ],
    "phone": [
        ("call 555-123-4567", ("phone",)),
        ("(212) 555-0198 pizza", ("phone",)),
        ("212.555.0198", ("phone",)),
        ("1-800-555-0199 refund", ("phone",)),
        ("+1 212 555 0198", ("phone",)),
        ("who called 555-0198", ("phone",)),
        ("+44 20 7946 0958", ("phone",)),
        ("fax 212-555-0198", ("fax",)),
        ("fax number (212) 555 0198", ("fax",)),
        ("1-800 contacts", ()),
        ("7-11 hours", ()),
        ("call 911", ()),
        ("pi 3.14159", ()),
    ],
    "card": [
        ("visa 4111 1111 1111 1111", ("card",)),
        ("4111-1111-1111-1111", ("card",)),
        ("amex 378282246310005", ("card",)),
        ("5555555555554444", ("card",)),
        ("visa 4111 1111 1111 1112", ()),  # fails Luhn
        ("4111 1111 1111", ()),  # too short for a card
    ],
    "email": [
        ("john.smith77@aol.com", ("email",)),
        ("send to jane_doe@hotmail.com now", ("email",)),
        ("aol.com mail", ()),
        ("@home network", ()),
    ],
    "ip": [
        ("192.168.1.1 router", ("ip",)),
        ("ip 8.8.8.8", ("ip",)),
        ("whois 64.233.160.4", ("ip",)),
        ("fe80::1ff:fe23:4567:890a", ("ip",)),
        ("2001:db8::ff00:42:8329", ("ip",)),
        ("firefox 1.5.0.4", ()),  # version string
        ("version 10.2.0.45 download", ()),
        ("java 1.4.2.11", ()),
        ("999.1.1.1", ()),  # not an address
        ("1.2.3.4.5 sequence", ()),
        ("meeting at 10:30:00", ()),
    ],
    "mac": [
        ("mac address 00:1a:2b:3c:4d:5e", ("mac",)),
        ("00-1A-2B-3C-4D-5E", ("mac",)),
        ("cisco 001a.2b3c.4d5e", ("mac",)),
        ("mac os x 10.4", ()),
        ("aa:bb:cc", ()),
    ],
    "vin": [
        ("vin 1HGCM82633A004352", ("vin",)),
        ("1hgcm82633a004352 carfax", ("vin",)),  # valid check digit, no cue needed
        ("1HGCM82633A004353", ("id",)),  # wrong check digit, no cue: not a VIN, still an identifying code
        ("honda civic 2006 ex", ()),
    ],
    "date": [
        ("born 03/15/1980", ("date",)),
        ("dob 3/15/80", ("date",)),
        ("1980-03-15", ("date",)),
        ("died march 15, 1980", ("date",)),
        ("15 march 1980 obituary", ("date",)),
        ("birthday june 3", ("date",)),  # no year, but a birth cue
        ("1999 honda civic", ()),
        ("march 2006 calendar", ()),
        ("july 4th fireworks", ()),
        ("windows 3.1.1", ()),
        ("13/45/2001", ()),
    ],
    "age": [
        ("age 93", ("age",)),
        ("93 year old grandmother", ("age",)),
        ("95 yo", ("age",)),
        ("age 45", ()),
        ("89 years old", ()),
        ("95 years of marriage", ()),
        ("100 years war", ()),
        ("age 90+", ()),  # already generalized
    ],
    "zip": [
        ("weather 90210", ("zip",)),
        ("pizza 07060-1234", ("zip",)),
        ("zip code 10001", ("zip",)),
        ("$25000 loan", ()),
        ("10000 bc", ()),
        ("50000 miles", ()),
        ("model 12345", ()),
        ("california sec 12195", ()),
    ],
    "context numbers": [
        ("mrn 00123456", ("mrn",)),
        ("medical record number 4455667", ("mrn",)),
        ("member id XYZ123456789", ("health_plan",)),
        ("medicare number 1EG4TE5MK73", ("health_plan",)),
        ("account number 12345678", ("account",)),
        ("acct # 99887766", ("account",)),
        ("drivers license D1234567", ("license",)),
        ("certificate number 778899", ("license",)),
        ("license plate 7ABC123", ("vehicle",)),
        ("serial number SN48291034", ("device",)),
        ("imei 490154203237518", ("device",)),
        ("account login", ()),
        ("license plate frames", ()),
        ("policy 2006", ()),
        ("group 12", ()),
        ("2005 passport 49cc moped", ()),  # two digits: an engine size, not a passport number
    ],
    "url": [
        ("www.myspace.com/johnsmith", ("url",)),
        ("http://www.facebook.com/profile.php?id=123456", ("url",)),
        ("janedoe.blogspot.com", ("url",)),
        ("hometown.aol.com/jsmith/index.html", ("url",)),
        ("myspace.com", ()),  # a bare domain is navigational
        ("www.myspace.com", ()),
        ("google.com/maps", ()),  # a path that names no one
        ("www.blogspot.com", ()),
    ],
    "id": [
        ("tracking 1234567890123", ("id",)),
        ("isbn 9780306406157", ()),  # valid ISBN-13: a book
        ("12345678", ()),  # 8 digits: not flagged without a cue
    ],
    "address": [
        ("123 main st", ("address",)),
        ("4500 n oak avenue apt 5", ("address",)),
        ("directions to 1600 pennsylvania ave", ("address",)),
        ("po box 1234", ("address",)),
        ("rr 2 box 14", ("address",)),
        ("7 river ct", ("address",)),
        ("4 wheel drive", ()),
        ("3 way switch", ()),
        ("2006 ford ranger", ()),
        ("5 star drive in", ()),
        ("route 66", ()),
        ("2006 arrive and drive schedule", ()),  # a year and a title
        ("1863 the long walk", ()),
    ],
    "name": [
        ("john smith obituary", ("name",)),
        ("mary ann smith", ("name",)),
        ("john q adams", ("name",)),
        ("smith, john", ("name",)),
        ("dr patel", ("name",)),
        ("Robert Johnson Jr", ("name",)),
        ("april showers obituary", ("name",)),  # a weak pair with a person cue
        ("may flowers", ()),
        ("will power", ()),
        ("rose garden", ()),
        ("jordan shoes", ()),
        ("paris hotels", ()),
        ("virginia beach hotels", ()),  # a big city, not a person
        ("john deere tractors", ()),  # a brand
        ("christian music", ()),
        ("april showers", ()),
        ("father knows best", ()),  # a title before a word, not a surname
        ("miss you quotes", ()),
        ("mrs silk", ("name",)),
        ("peggy king loan officer", ("name",)),  # "loan" is no third name
    ],
    "places": [
        ("hope ar newspaper", ("city",)),
        ("no hope in sight", ()),
        ("bay minette, alabama", ("city",)),
        ("orange county jail", ("county",)),
        ("chicago il pizza", ()),  # over the population threshold
        ("hotels in paris", ()),
        ("credit union west virginia", ()),  # "union" is a common word
        ("plainfield nj", ()),  # 51,000 people
    ],
}

ROWS = [(group, text, want) for group, rows in TABLES.items() for text, want in rows]


@pytest.mark.parametrize(("group", "text", "want"), ROWS, ids=[f"{g}:{t}" for g, t, _ in ROWS])
def test_detector_table(scrubber: Scrubber, group: str, text: str, want: tuple[str, ...]) -> None:
    """Each positive is found with its type; each negative yields nothing."""
    assert kinds(scrubber, text) == want


def test_every_table_has_negatives() -> None:
    """Negatives sit beside positives in every table."""
    for group, rows in TABLES.items():
        assert any(not w for _, w in rows), group
        assert any(w for _, w in rows), group


@pytest.mark.parametrize(
    ("digits", "ok"), [("4111111111111111", True), ("4111111111111112", False), ("490154203237518", True)]
)
def test_luhn(digits: str, ok: bool) -> None:
    """luhn_ok accepts valid card numbers (16 and 15 digits) and rejects a 16-digit number whose last digit is wrong."""
    assert luhn_ok(digits) is ok


@pytest.mark.parametrize(
    ("vin", "ok"), [("1HGCM82633A004352", True), ("1HGCM82633A004353", False), ("11111111111111111", True)]
)
def test_vin_check_digit(vin: str, ok: bool) -> None:
    """vin_check_ok accepts VINs whose check digit (position 9) fits the rest and rejects one whose last character
    was changed."""
    assert vin_check_ok(vin) is ok
