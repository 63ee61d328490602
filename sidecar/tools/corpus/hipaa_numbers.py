"""The number- and code-like identifiers of the HIPAA corpus (:mod:`.hipaa`): each drawn from the random stream
alone (no name or place list), planted in a query with its cue words (:data:`NUMBERS`); :func:`zipcode` serves
the corpus's address and ZIP queries too."""

from __future__ import annotations

import random
import string
from collections.abc import Callable

from filters.hipaa_scrub.detectors import luhn_ok
from filters.hipaa_scrub.detectors.context import _TRANSLIT, _WEIGHTS
from sidecar.tools.corpus.hipaa_words import MONTHS, Builder, Gold


def phone_number(r: random.Random) -> str:
    a, b, c = r.randint(201, 989), r.randint(200, 999), r.randint(0, 9999)
    fmt = r.choice(
        [
            "({a}) {b}-{c:04d}",
            "{a}-{b}-{c:04d}",
            "{a}.{b}.{c:04d}",
            "{a}{b}{c:04d}",
            "1-{a}-{b}-{c:04d}",
            "+1 {a} {b} {c:04d}",
            "{a} {b} {c:04d}",
            "{b}-{c:04d}",
        ]
    )
    return fmt.format(a=a, b=b, c=c)


def zipcode(r: random.Random) -> str:
    while True:
        z = f"{r.randint(1001, 99950):05d}"
        if not z.endswith("000"):
            return z + (f"-{r.randint(1, 9999):04d}" if r.random() < 0.1 else "")


def card(r: random.Random) -> tuple[str, Gold]:
    prefix, length = r.choice(
        [
            ("4", 16),
            ("51", 16),
            ("55", 16),
            ("2221", 16),
            ("34", 15),
            ("37", 15),
            ("6011", 16),
            ("65", 16),
            ("4", 13),
        ]
    )
    body = prefix + "".join(r.choice(string.digits) for _ in range(length - len(prefix) - 1))
    digits = next(body + str(c) for c in range(10) if luhn_ok(body + str(c)))
    style = r.random()
    if style < 0.4 and length == 16:
        text = " ".join(digits[i : i + 4] for i in range(0, 16, 4))
    elif style < 0.6 and length == 16:
        text = "-".join(digits[i : i + 4] for i in range(0, 16, 4))
    else:
        text = digits
    b = Builder()
    if r.random() < 0.6:
        b.add(r.choice(["credit card", "visa", "card number", "stolen card", "mastercard"]))
    return b.add(text, "card").build()


def date(r: random.Random) -> tuple[str, Gold]:
    y, m, d = r.randint(1900, 2006), r.randint(1, 12), r.randint(1, 28)
    fmt = r.choice(
        [
            "{m}/{d}/{y}",
            "{m:02d}/{d:02d}/{y}",
            "{m}/{d}/{yy:02d}",
            "{y}-{m:02d}-{d:02d}",
            "{M} {d}, {y}",
            "{M} {d} {y}",
            "{d} {M} {y}",
            "{M3} {d} {y}",
            "{M} {d}th {y}",
            "{m}-{d}-{y}",
        ]
    )
    text = fmt.format(m=m, d=d, y=y, yy=y % 100, M=MONTHS[m - 1], M3=MONTHS[m - 1][:3])
    ctx = r.choice(
        [
            "born {}",
            "dob {}",
            "died {}",
            "{}",
            "birthday {}",
            "obituary {}",
            "admitted {}",
            "{} birth certificate",
            "death {}",
        ]
    )
    pre, _, post = ctx.partition("{}")
    return Builder().add(pre.strip()).add(text, "date").add(post.strip()).build()


def age(r: random.Random) -> tuple[str, Gold]:
    a = str(r.randint(90, 106))
    form = r.choice(["age {}", "{} year old", "{} years old", "{} yo", "aged {}", "{}-year-old"])
    pre, _, post = form.partition("{}")
    b = Builder()
    if r.random() < 0.5:
        b.add(r.choice(["grandmother", "man", "woman", "grandfather", "patient", "my mother"]))
    if form == "{}-year-old":
        q, g = b.build()
        off = len(q) + (1 if q else 0)
        return (q + (" " if q else "") + a + "-year-old", [*g, (off, off + len(a), "age")])
    return b.add(pre.strip()).add(a, "age").add(post.strip()).add(r.choice(["", "health", "care", "dies"])).build()


def phone(r: random.Random) -> tuple[str, Gold]:
    ctx = r.choice(["{}", "who called me {}", "reverse lookup {}", "{} phone number", "call {}", "{} owner"])
    pre, _, post = ctx.partition("{}")
    return Builder().add(pre.strip()).add(phone_number(r), "phone").add(post.strip()).build()


def fax(r: random.Random) -> tuple[str, Gold]:
    cue = r.choice(["fax", "fax number", "fax #", "fax no"])
    return Builder().add(cue).add(phone_number(r), "fax").build()


def ssn(r: random.Random) -> tuple[str, Gold]:
    while True:
        a, g, s = r.randint(1, 899), r.randint(1, 99), r.randint(1, 9999)
        if a != 666:
            break
    fmt = r.choice(["{a:03d}-{g:02d}-{s:04d}", "{a:03d} {g:02d} {s:04d}", "{a:03d}{g:02d}{s:04d}"])
    cue = r.choice(["ssn", "social security number", "ss#", "social security", "ssn lookup"])
    return Builder().add(cue).add(fmt.format(a=a, g=g, s=s), "ssn").build()


def _digits(r: random.Random, lo: int, hi: int) -> str:
    return "".join(r.choice(string.digits) for _ in range(r.randint(lo, hi)))


def _alnum_id(r: random.Random) -> str:
    if r.random() < 0.5:
        return _digits(r, 6, 10)
    return "".join(r.choice(string.ascii_uppercase) for _ in range(r.randint(1, 3))) + _digits(r, 5, 9)


def _cued(r: random.Random, cues: list[str], kind: str) -> tuple[str, Gold]:
    return Builder().add(r.choice(cues)).add(_alnum_id(r), kind).build()


def mrn(r: random.Random) -> tuple[str, Gold]:
    return _cued(r, ["mrn", "medical record number", "medical record #", "patient id", "mrn:"], "mrn")


def health_plan(r: random.Random) -> tuple[str, Gold]:
    cues = ["member id", "policy number", "medicare number", "medicaid id", "subscriber id", "group number"]
    return _cued(r, cues, "health_plan")


def account(r: random.Random) -> tuple[str, Gold]:
    cues = ["account number", "acct #", "account", "routing number", "bank account", "acct no"]
    return _cued(r, cues, "account")


def license(r: random.Random) -> tuple[str, Gold]:
    cues = ["drivers license", "driver's license number", "license number", "certificate number", "npi", "dl#"]
    return _cued(r, cues, "license")


def vehicle(r: random.Random) -> tuple[str, Gold]:
    plate = f"{r.randint(1, 9)}{''.join(r.choice(string.ascii_uppercase) for _ in range(3))}{r.randint(100, 999)}"
    if r.random() < 0.5:
        plate = plate.lower()
    return (
        Builder().add(r.choice(["license plate", "plate number", "plate", "tag number"])).add(plate, "vehicle").build()
    )


def vin(r: random.Random) -> tuple[str, Gold]:
    alphabet = "ABCDEFGHJKLMNPRSTUVWXYZ0123456789"
    while True:
        v = [r.choice(alphabet) for _ in range(12)] + [r.choice("0123456789") for _ in range(5)]
        v[8] = "0"
        total = sum(_TRANSLIT[c] * w for c, w in zip(v, _WEIGHTS))
        v[8] = "X" if total % 11 == 10 else str(total % 11)
        vin = "".join(v)
        if any(c.isdigit() for c in vin) and any(c.isalpha() for c in vin):
            break
    vin = vin.lower() if r.random() < 0.4 else vin
    b = Builder()
    if r.random() < 0.5:
        b.add(r.choice(["vin", "vin number", "carfax", "vin check"]))
    return b.add(vin, "vin").build()


def device(r: random.Random) -> tuple[str, Gold]:
    if r.random() < 0.5:
        body = [r.randint(0, 9) for _ in range(14)]
        for check in range(10):
            cand = "".join(map(str, [*body, check]))
            if luhn_ok(cand) and not cand.startswith(("34", "37")):
                b = Builder()
                if r.random() < 0.6:
                    b.add(r.choice(["imei", "imei number", "stolen phone imei"]))
                return b.add(cand, "device").build()
    return _cued(r, ["serial number", "serial #", "s/n", "serial no"], "device")


def mac(r: random.Random) -> tuple[str, Gold]:
    octets = [f"{r.randint(0, 255):02x}" for _ in range(6)]
    style = r.random()
    if style < 0.45:
        mac = ":".join(octets)
    elif style < 0.85:
        mac = "-".join(octets)
    else:
        h = "".join(octets)
        mac = f"{h[:4]}.{h[4:8]}.{h[8:]}"
    mac = mac.upper() if r.random() < 0.3 else mac
    return Builder().add(r.choice(["", "mac address", "mac"])).add(mac, "mac").build()


def ip(r: random.Random) -> tuple[str, Gold]:
    style = r.random()
    if style < 0.3:
        ip = f"192.168.{r.randint(0, 255)}.{r.randint(1, 254)}"
    elif style < 0.4:
        ip = f"10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
    elif style < 0.8:
        ip = f"{r.randint(11, 223)}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"
    elif style < 0.9:
        groups = [f"{r.randint(0, 65535):x}" for _ in range(8)]
        ip = ":".join(groups)
    else:
        ip = f"2001:db8::{r.randint(1, 65535):x}:{r.randint(1, 65535):x}"
    ctx = r.choice(["{}", "ip {}", "whois {}", "{} ip address", "trace {}"])
    pre, _, post = ctx.partition("{}")
    return Builder().add(pre.strip()).add(ip, "ip").add(post.strip()).build()


def id_number(r: random.Random) -> tuple[str, Gold]:
    cue = r.choice(["tracking number", "ups tracking", "case", "order", "confirmation", "fedex"])
    return Builder().add(cue).add(_digits(r, 10, 18), "id").build()


NUMBERS: dict[str, Callable[[random.Random], tuple[str, Gold]]] = {
    "card": card,
    "date": date,
    "age": age,
    "phone": phone,
    "fax": fax,
    "ssn": ssn,
    "mrn": mrn,
    "health_plan": health_plan,
    "account": account,
    "license": license,
    "vehicle": vehicle,
    "vin": vin,
    "device": device,
    "mac": mac,
    "ip": ip,
    "id": id_number,
}
"""The makers of these kinds, by kind."""
