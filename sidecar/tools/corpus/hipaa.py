"""A labelled corpus generator, deterministic by seed: realistic search queries with planted
identifiers of every type and their character spans, plus as many ordinary queries, including
name-like (``may``, ``rose garden``, ``jordan shoes``) and place-like (``paris hotels``) words.

Each item is ``(query, [(start, end, kind), ...])``; ordinary queries have no spans.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable, Iterator

from filters.hipaa_scrub.detectors import KINDS
from filters.hipaa_scrub.detectors.context import _TRANSLIT, _WEIGHTS
from filters.hipaa_scrub.geo import load_geo
from filters.hipaa_scrub.names import load_names
from sidecar.tools.corpus.hipaa_words import (
    DIRS,
    MAIL,
    MODIFIERS,
    MONTHS,
    NAME_LIKE_WORDS,
    ORDINARY,
    PERSON_CTX,
    STREET_NAMES,
    SUFFIXES,
    TOPICS,
    UNITS,
    Builder,
    Gold,
    cumulative,
)


class Corpus:
    """The generator (data loaded once). ``items(n, seed)`` yields ``n`` planted and ``n`` ordinary queries."""

    def __init__(self) -> None:
        names = load_names()
        geo = load_geo()
        self.first = sorted(names.first_share.items())
        self.last = sorted((k, v) for k, v in names.last_share.items() if len(k) > 1)
        self.first_w = cumulative([v for _, v in self.first])
        self.last_w = cumulative([v for _, v in self.last])
        self.towns = sorted((n, s) for (n, s), p in geo.cities.items() if 500 <= p <= 20000)
        self.bigcities = sorted((n, s) for (n, s), p in geo.cities.items() if p >= 200000)
        self.states = sorted(geo.state_names.items())
        self.counties = sorted(
            (name, sorted(states)[0]) for name, states in geo.counties.items() if sorted(states)[0] in geo.state_names
        )
        self.makers: dict[str, Callable[[random.Random], tuple[str, Gold]]] = {k: getattr(self, f"_{k}") for k in KINDS}

    # --- pieces ---------------------------------------------------------------------------
    def person(self, r: random.Random) -> str:
        f = r.choices(self.first, cum_weights=self.first_w)[0][0]
        last = r.choices(self.last, cum_weights=self.last_w)[0][0]
        style = r.random()
        if style < 0.12:
            name = f"{f} {r.choice(string.ascii_lowercase)} {last}"
        elif style < 0.17:
            name = f"{last}, {f}"
        elif style < 0.22:
            f2 = r.choices(self.first, cum_weights=self.first_w)[0][0]
            name = f"{f} {f2} {last}"
        else:
            name = f"{f} {last}"
        return name.title() if r.random() < 0.25 else name

    def state(self, r: random.Random, code: str | None = None) -> str:
        code = code or r.choice(self.states)[0]
        return code.lower() if r.random() < 0.6 else load_geo().state_names[code]

    def _bigcity(self, r: random.Random) -> str:
        n, s = r.choice(self.bigcities)
        return f"{n} {s.lower()}"

    def phone_number(self, r: random.Random) -> str:
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

    def zipcode(self, r: random.Random) -> str:
        while True:
            z = f"{r.randint(1001, 99950):05d}"
            if not z.endswith("000"):
                return z + (f"-{r.randint(1, 9999):04d}" if r.random() < 0.1 else "")

    # --- one maker per type ---------------------------------------------------------------
    def _name(self, r: random.Random) -> tuple[str, Gold]:
        ctx = r.choice(PERSON_CTX)
        pre, _, post = ctx.partition("{}")
        post = post.replace("{bigcity}", self._bigcity(r)).replace("{state}", self.state(r))
        return Builder().add(pre.strip()).add(self.person(r), "name").add(post.strip()).build()

    def _address(self, r: random.Random) -> tuple[str, Gold]:
        num = str(r.choice([r.randint(1, 99), r.randint(100, 9999), r.randint(10000, 99999)]))
        parts = [num]
        if r.random() < 0.2:
            parts.append(r.choice(DIRS))
        street = r.choice(STREET_NAMES) if r.random() < 0.7 else r.choices(self.last, cum_weights=self.last_w)[0][0]
        parts += [street, r.choice(SUFFIXES)]
        if r.random() < 0.15:
            parts.append(r.choice(UNITS))
        addr = " ".join(parts)
        b = Builder()
        if r.random() < 0.3:
            b.add(r.choice(["directions to", "house for sale", "who lives at", "map of", "apartments"]))
        b.add(addr, "address")
        if r.random() < 0.5:
            town, st = r.choice(self.bigcities)
            b.add(town).add(self.state(r, st))
            if r.random() < 0.5:
                b.add(self.zipcode(r), "zip")
        return b.build()

    def _city(self, r: random.Random) -> tuple[str, Gold]:
        town, st = r.choice(self.towns)
        b = Builder()
        if r.random() < 0.5:
            b.add(r.choice(TOPICS))
        if r.random() < 0.3:
            q, gold = b.add(town, "city").build()
            return f"{q}, {self.state(r, st)}", gold
        return b.add(town, "city").add(self.state(r, st)).build()

    def _card(self, r: random.Random) -> tuple[str, Gold]:
        from filters.hipaa_scrub.detectors import luhn_ok

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

    def _county(self, r: random.Random) -> tuple[str, Gold]:
        name, st = r.choice(self.counties)
        b = Builder().add(f"{name} county", "county")
        if r.random() < 0.5:
            b.add(self.state(r, st))
        return b.add(r.choice(TOPICS)).build()

    def _zip(self, r: random.Random) -> tuple[str, Gold]:
        ctx = r.choice(
            [
                "weather {}",
                "{} zip code",
                "pizza delivery {}",
                "homes for sale {}",
                "{}",
                "zip {}",
                "{bigcity} {}",
                "jobs in {}",
                "{} restaurants",
            ]
        )
        pre, _, post = ctx.partition("{}")
        pre = pre.replace("{bigcity}", self._bigcity(r))
        return Builder().add(pre.strip()).add(self.zipcode(r), "zip").add(post.strip()).build()

    def _date(self, r: random.Random) -> tuple[str, Gold]:
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

    def _age(self, r: random.Random) -> tuple[str, Gold]:
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

    def _phone(self, r: random.Random) -> tuple[str, Gold]:
        ctx = r.choice(["{}", "who called me {}", "reverse lookup {}", "{} phone number", "call {}", "{} owner"])
        pre, _, post = ctx.partition("{}")
        return Builder().add(pre.strip()).add(self.phone_number(r), "phone").add(post.strip()).build()

    def _fax(self, r: random.Random) -> tuple[str, Gold]:
        cue = r.choice(["fax", "fax number", "fax #", "fax no"])
        return Builder().add(cue).add(self.phone_number(r), "fax").build()

    def _email(self, r: random.Random) -> tuple[str, Gold]:
        f = r.choices(self.first, cum_weights=self.first_w)[0][0]
        last = r.choices(self.last, cum_weights=self.last_w)[0][0]
        user = r.choice([f"{f}{last}", f"{f}.{last}", f"{f[0]}{last}{r.randint(1, 99)}", f"{f}_{r.randint(1, 2006)}"])
        ctx = r.choice(["{}", "email {}", "{} myspace", "send mail to {}", "{} password"])
        pre, _, post = ctx.partition("{}")
        return Builder().add(pre.strip()).add(f"{user}@{r.choice(MAIL)}", "email").add(post.strip()).build()

    def _ssn(self, r: random.Random) -> tuple[str, Gold]:
        while True:
            a, g, s = r.randint(1, 899), r.randint(1, 99), r.randint(1, 9999)
            if a != 666:
                break
        fmt = r.choice(["{a:03d}-{g:02d}-{s:04d}", "{a:03d} {g:02d} {s:04d}", "{a:03d}{g:02d}{s:04d}"])
        cue = r.choice(["ssn", "social security number", "ss#", "social security", "ssn lookup"])
        return Builder().add(cue).add(fmt.format(a=a, g=g, s=s), "ssn").build()

    def _digits(self, r: random.Random, lo: int, hi: int) -> str:
        return "".join(r.choice(string.digits) for _ in range(r.randint(lo, hi)))

    def _alnum_id(self, r: random.Random) -> str:
        if r.random() < 0.5:
            return self._digits(r, 6, 10)
        return "".join(r.choice(string.ascii_uppercase) for _ in range(r.randint(1, 3))) + self._digits(r, 5, 9)

    def _cued(self, r: random.Random, cues: list[str], kind: str) -> tuple[str, Gold]:
        return Builder().add(r.choice(cues)).add(self._alnum_id(r), kind).build()

    def _mrn(self, r: random.Random) -> tuple[str, Gold]:
        return self._cued(r, ["mrn", "medical record number", "medical record #", "patient id", "mrn:"], "mrn")

    def _health_plan(self, r: random.Random) -> tuple[str, Gold]:
        cues = ["member id", "policy number", "medicare number", "medicaid id", "subscriber id", "group number"]
        return self._cued(r, cues, "health_plan")

    def _account(self, r: random.Random) -> tuple[str, Gold]:
        cues = ["account number", "acct #", "account", "routing number", "bank account", "acct no"]
        return self._cued(r, cues, "account")

    def _license(self, r: random.Random) -> tuple[str, Gold]:
        cues = ["drivers license", "driver's license number", "license number", "certificate number", "npi", "dl#"]
        return self._cued(r, cues, "license")

    def _vehicle(self, r: random.Random) -> tuple[str, Gold]:
        plate = f"{r.randint(1, 9)}{''.join(r.choice(string.ascii_uppercase) for _ in range(3))}{r.randint(100, 999)}"
        if r.random() < 0.5:
            plate = plate.lower()
        return (
            Builder()
            .add(r.choice(["license plate", "plate number", "plate", "tag number"]))
            .add(plate, "vehicle")
            .build()
        )

    def _vin(self, r: random.Random) -> tuple[str, Gold]:
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

    def _device(self, r: random.Random) -> tuple[str, Gold]:
        if r.random() < 0.5:
            body = [r.randint(0, 9) for _ in range(14)]
            for check in range(10):
                cand = "".join(map(str, [*body, check]))
                from filters.hipaa_scrub.detectors import luhn_ok

                if luhn_ok(cand) and not cand.startswith(("34", "37")):
                    b = Builder()
                    if r.random() < 0.6:
                        b.add(r.choice(["imei", "imei number", "stolen phone imei"]))
                    return b.add(cand, "device").build()
        return self._cued(r, ["serial number", "serial #", "s/n", "serial no"], "device")

    def _mac(self, r: random.Random) -> tuple[str, Gold]:
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

    def _ip(self, r: random.Random) -> tuple[str, Gold]:
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

    def _url(self, r: random.Random) -> tuple[str, Gold]:
        f = r.choices(self.first, cum_weights=self.first_w)[0][0]
        last = r.choices(self.last, cum_weights=self.last_w)[0][0]
        user = r.choice([f"{f}{last}", f"{f}-{last}", f"{f}{r.randint(1, 999)}"])
        url = r.choice(
            [
                f"myspace.com/{user}",
                f"www.myspace.com/{user}",
                f"http://www.facebook.com/profile.php?id={r.randint(10**6, 10**9)}",
                f"{user}.blogspot.com",
                f"hometown.aol.com/{user}/index.html",
                f"www.geocities.com/{user}",
                f"http://profile.myspace.com/index.cfm?fuseaction=user.viewprofile&friendid={r.randint(10**6, 10**9)}",
                f"members.aol.com/{user}",
                f"www.xanga.com/{user}",
                f"{user}.livejournal.com",
            ]
        )
        return Builder().add(url, "url").build()

    def _id(self, r: random.Random) -> tuple[str, Gold]:
        cue = r.choice(["tracking number", "ups tracking", "case", "order", "confirmation", "fedex"])
        return Builder().add(cue).add(self._digits(r, 10, 18), "id").build()

    # --- ordinary queries -----------------------------------------------------------------
    def ordinary(self, r: random.Random) -> str:
        style = r.random()
        if style < 0.35:
            return r.choice(ORDINARY)
        if style < 0.55:
            return f"{r.choice(MODIFIERS)} {r.choice(TOPICS)}".strip()
        if style < 0.75:
            n, s = r.choice(self.bigcities)
            return f"{r.choice(TOPICS)} {n}" + (f" {self.state(r, s)}" if r.random() < 0.5 else "")
        if style < 0.85:
            return f"{r.choice(TOPICS)} {r.choice(self.states)[1]}"
        if style < 0.93:
            word = r.choice(NAME_LIKE_WORDS)
            return f"{word} {r.choice(TOPICS)}"
        return f"{r.choice(MONTHS)} {r.randint(1990, 2007)} {r.choice(['calendar', 'events', 'news', 'concerts'])}"

    def items(self, n: int, seed: int = 1) -> Iterator[tuple[str, Gold]]:
        """``n`` planted queries (types in turn) and ``n`` ordinary ones, interleaved."""
        r = random.Random(seed)
        kinds = list(KINDS)
        for i in range(n):
            yield self.makers[kinds[i % len(kinds)]](r)
            yield self.ordinary(r), []
