"""The identifiers ``querylog generate`` plants (:mod:`.synthetic`): a share of users, each with one person's name,
phone number, email, SSN, street address, ZIP code and date of birth, type a few of them in their queries.

Planting draws from its own random stream, so a log generated without identifiers has the same lines, line for
line, with the original queries in place of the planted ones.
"""

from __future__ import annotations

from random import Random

from sidecar.tools.generate.vocabulary import Vocabulary

IDENTIFIER_KINDS = ("name", "phone", "email", "ssn", "address", "zip", "dob")
PLANTING_USER_SHARE = 0.04  # share of users who type a planted identifier at least once


class Identity:
    """A person's identifiers, as one planting user would type them."""

    AREA_CODES = ("614", "713", "312", "602", "407", "404", "214", "619", "704", "303", "813", "313", "901", "502")

    def __init__(self, prng: Random, vocab: Vocabulary) -> None:
        first, last = vocab.first_names.pick(prng), vocab.last_names.pick(prng)
        self.city = prng.choice(vocab.cities)
        name = f"{first} {last}"
        self.name = name.title() if prng.random() < 0.2 else name
        area, exch, num = prng.choice(self.AREA_CODES), prng.randint(201, 989), prng.randint(0, 9999)
        self.phone = prng.choice(
            (
                f"{area}-{exch}-{num:04d}",
                f"({area}) {exch}-{num:04d}",
                f"{area}{exch}{num:04d}",
                f"{area} {exch} {num:04d}",
            )
        )
        year = prng.randint(1940, 1992)
        user_part = prng.choice((f"{first}{last}", f"{first[0]}{last}", f"{first}_{last}", f"{last}{first[0]}"))
        self.email = f"{user_part}{prng.choice(('', str(year % 100), str(prng.randint(1, 999))))}@" + str(
            vocab.email_domains.pick(prng)
        )
        ssn_area = prng.choice((prng.randint(1, 665), prng.randint(667, 899)))
        ssn = (ssn_area, prng.randint(1, 99), prng.randint(1, 9999))
        self.ssn = prng.choice(
            (
                f"{ssn[0]:03d}-{ssn[1]:02d}-{ssn[2]:04d}",
                f"{ssn[0]:03d}{ssn[1]:02d}{ssn[2]:04d}",
                f"{ssn[0]:03d} {ssn[1]:02d} {ssn[2]:04d}",
            )
        )
        self.address = f"{prng.randint(100, 19999)} {prng.choice(vocab.streets)} {prng.choice(vocab.street_types)}"
        self.zip = f"{prng.randint(1001, 99950):05d}"
        month, day = prng.randint(1, 12), prng.randint(1, 28)
        months = (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
        )
        self.dob = prng.choice(
            (
                f"{month:02d}/{day:02d}/{year}",
                f"{month}/{day}/{year}",
                f"{months[month - 1]} {day} {year}",
                f"{month}-{day}-{year % 100:02d}",
            )
        )

    def query(self, prng: Random, kind: str) -> tuple[str, str]:
        """A query carrying the identifier of ``kind``; returns (query, the identifier as typed)."""
        v: str = getattr(self, kind)
        templates = {
            "name": ("{v}", "{v} {city}", "{v} obituary", "{v} myspace", "{v} phone number", '"{v}"'),
            "phone": ("{v}", "{v} phone", "reverse lookup {v}", "who called me {v}"),
            "email": ("{v}", "email {v}", "{v} password"),
            "ssn": ("{v}", "ssn {v}", "social security number {v}"),
            "address": ("{v}", "{v} {city}", "{v} map"),
            "zip": ("{v}", "weather {v}", "{v} zip code"),
            "dob": ("born {v}", "dob {v}", "{v} birthday"),
        }[kind]
        return prng.choice(templates).format(v=v, city=self.city), v


def plan_plants(prng: Random | None, vocab: Vocabulary, n_queries: int) -> tuple[Identity | None, dict[int, str]]:
    """Whether this user plants identifiers (their identity, else None) and which of their ``n_queries`` query
    submissions carry one: submission number -> identifier kind."""
    plants: dict[int, str] = {}
    if prng is None or prng.random() >= PLANTING_USER_SHARE:
        return None, plants
    identity = Identity(prng, vocab)
    for _ in range(1 + int(prng.expovariate(0.9))):
        plants[prng.randrange(n_queries)] = prng.choice(IDENTIFIER_KINDS)
    return identity, plants
