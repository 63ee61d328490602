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
        ("visa 4111 1111 1111 1112", ("card",)),  # fails Luhn, but next to a card word: a mistyped card number
        ("4111 1111 1111 1112", ()),  # fails Luhn, no card word
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

# Issue 16: formats the own corpus does not generate, written from their public definitions
TABLES["mbi"] = [  # CMS MBI: 11 characters by position, dashes after 4 and 7 or none, any case
    ("mbi 1EG4-TE5-MK73", ("health_plan",)),
    ("medicare card 1eg4te5mk73", ("health_plan",)),
    ("1EG4TE5MK73", ("health_plan",)),
    ("1SG4-TE5-MK73", ()),  # S is never an MBI letter
    ("0EG4TE5MK73", ()),  # position 1 is 1-9
]
TABLES["itin_dotted_ssn"] = [
    ("itin 912-70-1234", ("ssn",)),  # IRS ITIN: 9xx, group 70-88
    ("912 94 1234 tax return", ("ssn",)),
    ("itin 912-93-1234", ()),  # group 93 is neither an ITIN group nor a valid SSN area
    ("ssn 212.67.4432", ("ssn",)),
    ("version 1.2.3", ()),
    ("212.67.44321", ()),
]
TABLES["mac_ipv6"] = [
    ("mac ab-cd-ef-fe-dc-ba", ("mac",)),  # letters only
    ("router 00-1a-2b-3c-4d-5e", ("mac",)),
    ("aabb.ccdd.eeff", ("mac",)),  # Cisco dotted
    ("ab-cd-ef", ()),
    ("ping 2001:db8::1.", ("ip",)),  # IPv6, then a full stop
    ("is fe80::1:2:3:4, ok", ("ip",)),
    ("std::cout", ()),
]
TABLES["national_phones"] = [
    ("tel 020 7946 0958", ("phone",)),  # UK
    ("(01632) 960001", ("phone",)),  # UK, bracketed area code
    ("030 12345678", ("phone",)),  # Germany
    ("01 23 45 67 89", ("phone",)),  # France
    ("call 05.32.76.16.67", ("phone",)),
    ("098765 43210", ("phone",)),  # India
    ("912 345 678", ("phone",)),  # Spain (no trunk prefix)
    ("top 10 20 30 40", ()),
    ("007 movies", ()),
    ("ssn 078-05-1120", ()),  # SSN-shaped: never a national phone number
]
TABLES["cued_values"] = [
    ("vin 1HGCM82633A004353", ("vin",)),  # wrong check digit after a VIN cue
    ("vin: 1hgcm82633a004353 recall", ("vin",)),
    ("serial number xkcdqwpl", ("device",)),  # mostly letters
    ("s/n ab7cdefgh", ("device",)),
    ("serial number lookup", ()),  # a word
    ("serial killers documentary", ()),
    ("snowboards for sale", ()),  # "sn" starts a word: no cue
    ("serialkiller movies", ()),
    ("account number for my checking 4471-2233", ("account",)),  # a few words between cue and value
    ("member id on the card xk8842", ("health_plan",)),
    ("member id: 4hhk4ldmzsz", ("health_plan",)),
    ("drivers license 123 456 789", ("license",)),  # NY-style digit groups
    ("group of 100 people", ()),
    ("insurance for 2 cars", ()),
    ("credit card 1234567812345678", ("card",)),  # 16 digits next to a card word, Luhn or not
    ("4111 1111 1111 1112 mastercard", ("card",)),
]
TABLES["street_and_town"] = [  # the town right after a street address is part of it
    ("100 main st springfield", ("address",)),
    ("100 main st, union", ("address",)),
    ("12 oak ave hope ar", ("address",)),  # the state stays (span residue)
    ("100 main st hours", ("address",)),  # "hours" is no town: the span stops at the suffix
    ("main street springfield", ()),  # no house number
]

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


@pytest.mark.parametrize(
    ("text", "scrubbed"),
    [
        ("100 main st springfield", ""),
        ("12 oak ave hope ar", "ar"),
        ("who lives at 15 elm st plainfield nj 07060", "who lives at nj"),
        ("100 main st hours", "hours"),
        ("100 main st union", "union"),  # a town that is a common word needs a comma or a state after it
        ("ping 2001:db8::1.", "ping ."),
        ("account number for my checking 4471-2233", "account number for my checking"),
    ],
)
def test_scrubbed_text(scrubber: Scrubber, text: str, scrubbed: str) -> None:
    """What stays: the state after a town (never the town after a street), a common word that is no town, the
    punctuation after an IPv6 address, the words between a cue and its value."""
    assert scrubber.scrub(text)[0] == scrubbed
