"""The identifier formats of the independent HIPAA corpus (:mod:`.independent`), from their public definitions.

Each function draws one value as a person would type it and returns it with the query templates it is planted
in (``{}``: the value, ``{w}``: an ordinary word); :class:`~.independent.IndependentCorpus` plants it. Like the
corpus, this module shares no code or word list with the scrubber or its own corpus generator.
"""

from __future__ import annotations

import ipaddress
import random
import string
from collections.abc import Callable

Planted = tuple[str, list[str]]
"""A drawn value and the templates it may be planted in."""

# --- public format definitions --------------------------------------------------------------
_MBI_LETTERS = "".join(c for c in string.ascii_uppercase if c not in "SLOIBZ")
_ITIN_GROUPS = [*range(50, 66), *range(70, 89), *range(90, 93), *range(94, 100)]
_VIN_CHARS = "".join(c for c in string.ascii_uppercase + string.digits if c not in "IOQ")
_HEX_LETTERS = "abcdef"


def _case(r: random.Random, value: str) -> str:
    x = r.random()
    return value.lower() if x < 0.35 else value.upper() if x < 0.7 else value


def mbi(r: random.Random) -> Planted:
    def alnum() -> str:
        return r.choice(_MBI_LETTERS + string.digits)

    c = [
        r.choice("123456789"),
        r.choice(_MBI_LETTERS),
        alnum(),
        r.choice(string.digits),
        r.choice(_MBI_LETTERS),
        alnum(),
        r.choice(string.digits),
        r.choice(_MBI_LETTERS),
        r.choice(_MBI_LETTERS),
        r.choice(string.digits),
        r.choice(string.digits),
    ]
    raw = "".join(c)
    value = f"{raw[:4]}-{raw[4:7]}-{raw[7:]}" if r.random() < 0.4 else raw
    templates = ["{}", "mbi {}", "medicare number {}", "{w} {}", "{} {w}", "new medicare card {}", "my mbi is {}"]
    return _case(r, value), templates


def itin(r: random.Random) -> Planted:
    area, group, serial = r.randint(0, 99), r.choice(_ITIN_GROUPS), r.randint(0, 9999)
    sep = r.choice(["-", "-", " ", ""])
    value = f"9{area:02d}{sep}{group}{sep}{serial:04d}"
    templates = ["itin {}", "{}", "{w} {}", "taxpayer id {}", "{} tax return", "itin number {} {w}"]
    return value, templates


def ssn_dotted(r: random.Random) -> Planted:
    area = r.choice([n for n in range(1, 900) if n != 666])
    value = f"{area:03d}.{r.randint(1, 99):02d}.{r.randint(1, 9999):04d}"
    return value, ["{}", "ssn {}", "{w} {}", "{} {w}", "social security {}"]


def mac(r: random.Random) -> Planted:
    if r.random() < 0.25:
        octets = ["".join(r.choice(_HEX_LETTERS) for _ in range(2)) for _ in range(6)]
    else:
        octets = [f"{r.randint(0, 255):02x}" for _ in range(6)]
    style = r.random()
    if style < 0.35:
        value = ":".join(octets)
    elif style < 0.7:
        value = "-".join(octets)
    else:
        h = "".join(octets)
        value = ".".join(h[i : i + 4] for i in range(0, 12, 4))
    templates = ["{}", "mac {}", "{w} {}", "{} {w}", "block device {}", "router {} {w}"]
    return value.upper() if r.random() < 0.4 else value, templates


def ipv6(r: random.Random) -> Planted:
    groups = [r.randint(0, 0xFFFF) for _ in range(8)]
    style = r.random()
    if style < 0.3:
        groups[0], groups[1] = 0x2001, 0x0DB8
        for i in range(r.randint(2, 5), r.randint(5, 7)):
            groups[i] = 0
    elif style < 0.5:
        groups[0], groups[1], groups[2], groups[3] = 0xFE80, 0, 0, 0
    elif style < 0.6:
        groups = [0] * 7 + [1]
    value = ipaddress.IPv6Address(sum(g << (16 * (7 - i)) for i, g in enumerate(groups))).compressed
    templates = ["{}", "ping {}", "{w} {}", "{}.", "{},", "({})", "{}?", "is {} {w}", "{}; {w}", "ip {}!"]
    return value, templates


def phone_nanp(r: random.Random) -> Planted:
    a, b, c = r.randint(200, 999), r.randint(200, 999), r.randint(0, 9999)
    form = r.choice(["({a}) {b}-{c:04d}", "{a}-{b}-{c:04d}", "{a}.{b}.{c:04d}", "1 ({a}) {b}-{c:04d}"])
    value = form.format(a=a, b=b, c=c)
    return value, ["{}", "call {}", "{w} {}", "{} {w}", "tel: {}"]


def phone_e164(r: random.Random) -> Planted:
    cc, length = r.choice([("1", 10), ("44", 10), ("49", 11), ("33", 9), ("91", 10), ("61", 9), ("81", 10)])
    digits = str(r.randint(2, 9)) + "".join(r.choice(string.digits) for _ in range(length - 1))
    value = f"+{cc}{digits}" if r.random() < 0.5 else f"+{cc} {digits[:3]} {digits[3:6]} {digits[6:]}"
    return value, ["{}", "whatsapp {}", "{w} {}", "{} {w}"]


def phone_national(r: random.Random) -> Planted:
    def d(n: int) -> str:
        return "".join(r.choice(string.digits) for _ in range(n))

    country = r.choice(["uk", "de", "fr", "in", "au", "jp", "it", "nl", "es"])
    if country == "uk":
        value = r.choice(
            [f"020 {r.randint(7, 8)}{d(3)} {d(4)}", f"07{r.randint(4, 9)}{d(2)} {d(6)}", f"(01{d(3)}) {d(6)}"]
        )
    elif country == "de":
        value = r.choice([f"030 {d(8)}", f"0171 {d(7)}", f"089/{d(7)}", f"040-{d(7)}"])
    elif country == "fr":
        sep = r.choice([" ", "."])
        value = sep.join([f"0{r.randint(1, 9)}", d(2), d(2), d(2), d(2)])
    elif country == "in":
        value = r.choice(
            [f"0{r.randint(7, 9)}{d(4)} {d(5)}", f"0{r.randint(11, 99)} {d(8)}", f"0{r.randint(7, 9)}{d(9)}"]
        )
    elif country == "au":
        value = r.choice([f"(0{r.randint(2, 8)}) {d(4)} {d(4)}", f"04{d(2)} {d(3)} {d(3)}"])
    elif country == "jp":
        value = r.choice([f"03-{d(4)}-{d(4)}", f"090-{d(4)}-{d(4)}", f"06-{d(4)}-{d(4)}"])
    elif country == "it":
        value = r.choice([f"06 {d(4)} {d(4)}", f"02 {d(8)}", f"3{d(2)} {d(3)} {d(4)}"])
    elif country == "nl":
        value = r.choice([f"020-{d(7)}", f"06-{d(8)}", f"010 {d(3)} {d(4)}"])
    else:
        value = r.choice([f"9{d(2)} {d(3)} {d(3)}", f"6{d(2)} {d(2)} {d(2)} {d(2)}"])
    templates = ["{}", "tel {}", "{w} {}", "{} {w}", "phone {}", "call {} {w}"]
    return value, templates


def license(r: random.Random) -> Planted:
    def d(n: int) -> str:
        return "".join(r.choice(string.digits) for _ in range(n))

    def a(n: int) -> str:
        return "".join(r.choice(string.ascii_uppercase) for _ in range(n))

    value = r.choice(
        [
            f"{a(1)}{d(7)}",  # CA
            f"{a(1)}{d(3)}-{d(3)}-{d(2)}-{d(3)}-{d(1)}",  # FL
            f"{a(1)}{d(3)}-{d(4)}-{d(4)}",  # IL
            f"{d(3)} {d(3)} {d(3)}",  # NY
            d(8),  # TX
            f"{a(5)}{a(2)}{d(3)}{a(1)}{d(1)}",  # WA (pre-2018)
            f"{a(1)}{d(12)}",  # MI, MN
            f"{d(2)}-{d(3)}-{d(4)}",  # PA-like
        ]
    )
    if r.random() < 0.3:
        value = value.lower()
    templates = [
        "drivers license {}",
        "driver license number {}",
        "dl# {}",
        "license no: {}",
        "{w} drivers license {}",
        "drivers license {} {w}",
    ]
    return value, templates


def vin(r: random.Random) -> Planted:
    value = "".join(r.choice(_VIN_CHARS) for _ in range(17))
    if r.random() < 0.4:
        value = value.lower()
    templates = ["vin {}", "vin: {}", "vin number {}", "{w} vin {}", "vin# {} {w}", "vin lookup {}"]
    return value, templates


def card(r: random.Random) -> Planted:
    digits = r.choice("3456") + "".join(r.choice(string.digits) for _ in range(15))
    style = r.random()
    if style < 0.4:
        value = " ".join(digits[i : i + 4] for i in range(0, 16, 4))
    elif style < 0.6:
        value = "-".join(digits[i : i + 4] for i in range(0, 16, 4))
    else:
        value = digits
    templates = ["visa {}", "credit card {}", "{} visa", "mastercard {}", "card number {}", "my credit card {} {w}"]
    return value, templates


def cued_value(r: random.Random) -> Planted:
    def code() -> str:
        n = r.randint(6, 12)
        chars = [r.choice(string.ascii_uppercase + string.digits) for _ in range(n)]
        chars[r.randrange(n)] = r.choice(string.digits)
        chars[r.randrange(n)] = r.choice(string.digits)
        return "".join(chars)

    cue = r.choice(
        [
            "member id:",
            "account number:",
            "policy no.:",
            "patient id:",
            "medical record number:",
            "account number for my {w}",
            "member id on the card",
            "policy number of my {w}",
            "customer number is",
            "claim number for {w}",
        ]
    )
    value = code()
    return value.lower() if r.random() < 0.3 else value, [cue + " {}", cue + " {} {w}"]


def serial(r: random.Random) -> Planted:
    n = r.randint(8, 13)
    chars = [r.choice(string.ascii_uppercase) for _ in range(n)]
    for _ in range(r.randint(0, 2)):
        chars[r.randrange(n)] = r.choice(string.digits)
    value = "".join(chars)
    templates = [
        "serial number {}",
        "serial {}",
        "s/n {}",
        "serial no: {}",
        "{w} serial number {}",
        "serial # {} {w}",
    ]
    return value.lower() if r.random() < 0.3 else value, templates


FORMATS: dict[str, Callable[[random.Random], Planted]] = {
    "mbi": mbi,
    "itin": itin,
    "ssn_dotted": ssn_dotted,
    "mac": mac,
    "ipv6": ipv6,
    "phone_nanp": phone_nanp,
    "phone_e164": phone_e164,
    "phone_national": phone_national,
    "license": license,
    "vin": vin,
    "card": card,
    "cued_value": cued_value,
    "serial": serial,
}
"""The structured kinds' makers, in the corpus's planting order."""
