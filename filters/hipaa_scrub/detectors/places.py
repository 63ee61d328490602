"""Geographic subdivisions smaller than a state: street addresses and PO boxes, cities and towns
named with their state, counties."""

from __future__ import annotations

import re
from collections.abc import Callable

from filters.hipaa_scrub.detectors import PRECHECKS, Detector, Pattern, Span
from filters.hipaa_scrub.geo import Geo, normalize_place

_DIR = r"(?:n|s|e|w|ne|nw|se|sw|north|south|east|west)\.?"
_SAFE_SUFFIX = (
    r"street|st|avenue|ave|av|road|rd|boulevard|blvd|highway|hwy|parkway|pkwy|pky|terrace|ter|turnpike|tpke|"
    r"expressway|expy|freeway|fwy|pike|alley|aly|crescent|cres"
)
_RISKY_SUFFIX = (
    r"drive|dr|way|court|ct|place|pl|circle|cir|lane|ln|trail|trl|square|sq|run|point|pt|row|walk|loop|path|"
    r"pass|plaza|plz|crossing|xing|cove|cv|bend|ridge|rdg|hollow|creek|landing|park|green|commons|heights|hts|"
    r"manor|glen|view|vista|estates|center|ctr|route|rte"
)
_UNIT = r"(?:\s*,?\s*(?:apt|apartment|suite|ste|unit|rm|room|fl|floor|bldg|lot|#)\.?\s*#?\s*[a-z0-9-]{1,6})?"
_NUMBER_WORDS = frozenset(
    [
        "wheel",
        "hard",
        "disk",
        "disc",
        "flash",
        "thumb",
        "usb",
        "test",
        "power",
        "speed",
        "way",
        "star",
        "step",
        "year",
        "day",
        "week",
        "hour",
        "minute",
        "month",
        "cd",
        "dvd",
        "door",
        "inch",
        "foot",
        "car",
        "piece",
        "player",
        "man",
        "men",
        "people",
        "time",
        "times",
        "point",
        "mile",
        "leaf",
        "ring",
        "bed",
        "bedroom",
        "bath",
        "story",
        "game",
        "pack",
        "minute",
        "second",
        "inning",
        "round",
        "yard",
        "gallon",
        "pound",
        "ton",
        "ball",
        "shot",
        "card",
        "page",
    ]
)


_FUNCTION_WORDS = frozenset(["the", "and", "of", "a", "to", "for", "in", "on", "my", "your", "is"])
_SAFE_SUFFIXES = frozenset(_SAFE_SUFFIX.split("|"))
# a directional right after the number, or a unit after the suffix: an address, even if the number could be a year
_DIR_OR_UNIT = re.compile(rf"^\s+{_DIR}\s|\s(?:apt|apartment|suite|ste|unit|#)\.?\s*#?\s*[a-z0-9-]{{1,6}}$")
_YEAR = re.compile(r"(?:19|20)\d\d$")


_TOWN_WORDS = re.compile(r"\s*(,?)\s*((?:[^\W\d_][\w'./-]*)(?:\s+[^\W\d_][\w'./-]*){0,5})")
_STATE_WORDS = re.compile(r"\s*,?\s*((?:[a-z]+)(?:\s+[a-z]+){0,2})")
_NOT_SPACE = re.compile(r"[^\s,]+")
_LETTERS = re.compile(r"[a-z]+")
_PLAIN = re.compile(r"[a-z]+(?: [a-z]+)*")  # already what ``normalize_place`` makes of it, unless abbreviated
_ABBREV_FIRST = frozenset({"st", "ste", "ft", "mt", "pt"})
_ZIP_AFTER = re.compile(r"\s*(?:,\s*)?\d{5}(?![\w])")
_ZIP_OR_END = re.compile(r"\s*(?:,\s*)?(?:\d{5}(?![\w])|$)")


class AddressDetector(Detector):
    """Street addresses (house number, street name, suffix, unit) and PO / rural route boxes. The town
    named right after a street address (USPS form ``<number> <street> <suffix> <town> [<state> <zip>]``)
    is part of the address whatever its size; a town that is also a common word (``union``, ``hope``)
    counts only after a comma or before a state word or ZIP code."""

    # ``pob`` and ``pobox`` too: a box written without the space (``pob 1234``) was missed by this pre-check
    GATE_WORDS = frozenset(f"{_SAFE_SUFFIX}|{_RISKY_SUFFIX}|box|pob|pobox".split("|"))
    TRIGGERS = (r"\d",)  # a house or box number; the suffix and box words are checked apart (``GATE_WORDS``)

    KINDS = ("address",)
    MIN_DIGITS = 1
    RUNS = frozenset(range(1, 7))  # the house or box number is a bounded run of 1-6 digits
    PRIORITY = 8
    PATTERNS = (
        Pattern(
            "street",
            rf"(?<![\w$#.-])(?P<num>\d{{1,6}}[a-z]?(?:-\d{{1,4}})?)\s+(?:{_DIR}\s+)?"
            rf"(?P<name>(?:[a-z0-9][a-z0-9'.-]*\s+){{0,3}}?[a-z0-9][a-z0-9'.-]*)\s+"
            rf"(?P<suffix>{_SAFE_SUFFIX}|{_RISKY_SUFFIX})\.?(?:\s+{_DIR}(?![\w]))?{_UNIT}(?![\w])",
        ),
        Pattern(
            "box",
            r"(?<![\w])(?:p\.?\s*o\.?\s*box|post\s+office\s+box|pob|(?:rr|rural\s+route|hc|psc|cmr)\s*\d{1,4}\s*box)"
            r"\s*#?\s*\d{1,6}(?![\w])",
        ),
    )

    def __init__(self, geo: Geo | None = None, common: frozenset[str] = frozenset()) -> None:
        super().__init__()
        # every US place name, whatever its population: a town after a street address is an identifier
        self.towns = frozenset(name for name, _ in geo.cities) if geo is not None else frozenset()
        self.town_first = frozenset(name.split(" ")[0] for name in self.towns)
        self.states = frozenset(geo.states) if geo is not None else frozenset()
        self.common = common

    def town_end(self, lower: str, pos: int) -> int:
        """End of a town named at ``pos`` (right after a street address), or ``pos`` when none is."""
        m = _TOWN_WORDS.match(lower, pos)
        if m is None or not self.towns:
            return pos
        comma = bool(m.group(1))
        words = list(_NOT_SPACE.finditer(lower, m.start(2), m.end(2)))
        first = words[0].group()
        if first not in self.town_first and normalize_place(first).split(" ")[0] not in self.town_first:
            return pos  # no town starts with this word (the usual case: one set test)
        for width in range(len(words), 0, -1):
            end = words[width - 1].end()
            raw = lower[m.start(2) : end]
            name = raw if _PLAIN.fullmatch(raw) and first not in _ABBREV_FIRST else normalize_place(raw)
            if name not in self.towns or name in self.states:
                continue
            if (
                width == 1
                and name in self.common
                and not comma
                and _ZIP_AFTER.match(lower, end) is None
                and self.state_after(lower, end) is None
            ):
                continue  # "100 main st union": a common word needs a comma or a state/ZIP after it
            return end
        return pos

    def state_after(self, lower: str, pos: int) -> tuple[int, int] | None:
        """(start, end) of a state named right after ``pos`` (a town), or None. Codes that are words
        (``in``, ``or``) count only at the end of the text or before a ZIP code."""
        m = _STATE_WORDS.match(lower, pos)
        if m is None:
            return None
        words = list(_LETTERS.finditer(lower, m.start(1), m.end(1)))
        for width in range(len(words), 0, -1):
            end = words[width - 1].end()
            key = lower[m.start(1) : end]
            if key not in self.states:
                continue
            if key in _WORDLIKE_CODES and _ZIP_OR_END.match(lower, end) is None:
                return None
            return m.start(1), end
        return None

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        (_, street), (_, box) = self.compiled_ascii if lower.isascii() else self.compiled
        for m in street.finditer(lower):
            name = m.group("name")
            words = name.split()
            if words[-1] in _NUMBER_WORDS or words[0] in _NUMBER_WORDS or not _FUNCTION_WORDS.isdisjoint(words):
                continue
            if (
                _YEAR.match(m.group("num"))
                and m.group("suffix") not in _SAFE_SUFFIXES
                and not _DIR_OR_UNIT.search(m.group(), m.end("num") - m.start())
            ):
                continue  # "2006 cardv run": a year before a title, not a house number
            end = self.town_end(lower, m.end())
            state = self.state_after(lower, end) if end > m.end() else None
            if state is None:
                out.append(Span(m.start(), end, "address", self.PRIORITY))
            else:  # the span takes the state too (so it outranks "town, state" as a city) and leaves it
                out.append(Span(m.start(), state[1], "address", self.PRIORITY, residue=text[state[0] : state[1]]))
        if "box" not in lower and "pob" not in lower:
            return  # every box pattern's match has one of them (most addresses are streets)
        for m in box.finditer(lower):
            out.append(Span(m.start(), m.end(), "address", self.PRIORITY))


# State words that are ordinary English words: after a city they count only at the end of the
# query, before a ZIP code, or after a comma.
_WORDLIKE_CODES = frozenset(
    [
        "in",
        "or",
        "me",
        "hi",
        "ok",
        "oh",
        "de",
        "pa",
        "al",
        "ma",
        "co",
        "la",
        "id",
        "mi",
        "mo",
        "ms",
        "mt",
        "ne",
        "wa",
        "ga",
        "va",
        "nd",
        "sd",
        "ct",
        "ky",
    ]
)


class PlaceDetector(Detector):
    """Cities and towns followed by their state (``plainfield nj``, ``hope, arkansas``), and counties.

    A city with more than ``city_keep_population`` people is not an identifier and is left alone
    (``chicago il``); smaller places are scrubbed. ``generalize`` turns ``city st`` into the state.
    """

    KINDS = ("city", "county")
    NEEDS = "alpha"
    PRIORITY = 45
    FLAGS = 0
    PATTERNS = (Pattern("token", r"[a-z0-9]+(?:'[a-z]+)?"),)

    def __init__(
        self, geo: Geo, city_keep_population: int | None = 20000, common: frozenset[str] = frozenset()
    ) -> None:
        super().__init__()
        self.geo = geo
        self.common = common  # one-word town names that are common words need a comma or the query start
        self.keep_pop = city_keep_population
        self.state_first = frozenset(k.split()[0] for k in geo.states)
        self.max_state_words = max(len(k.split()) for k in geo.states)
        self.multi_first = frozenset(k.split()[0] for k in geo.states if " " in k)  # new, north, rhode...
        # last words of the towns that can be scrubbed: one must come right before the state
        keep = self.keep_pop
        small = [(n.split()[-1], st) for (n, st), pop in geo.cities.items() if keep is None or pop <= keep]
        self.city_last = frozenset(w for w, _ in small)
        self.city_last_in = frozenset(small)  # (last word, state code)
        self.pairs = PRECHECKS.PlacePairs(
            self.state_first, _WORDLIKE_CODES, self.city_last, self.city_last_in, dict(geo.states), self.multi_first
        )

    def _state_at(self, toks: list[tuple[int, int, str]], i: int) -> tuple[int, str] | None:
        """Longest state name starting at token ``i``: (tokens used, code)."""
        if toks[i][2] not in self.multi_first:
            code = self.geo.states.get(toks[i][2])
            return None if code is None else (1, code)
        for width in range(min(self.max_state_words, len(toks) - i), 0, -1):
            key = " ".join(t[2] for t in toks[i : i + width])
            code = self.geo.states.get(key)
            if code is not None:
                return width, code
        return None

    def trigger_words(self) -> frozenset[str]:
        """``county`` or the first word of a state name or code."""
        return self.state_first | {"county"}

    def wants(self, lower: str, words: list[str]) -> bool:
        """A necessary condition of :meth:`detect`: ``county``, or a state word right after the last
        word of a town of that state small enough to be scrubbed (``dallas tx`` needs no tokenizing)."""
        return bool(self.pairs.wants(lower, words))

    def precheck(self) -> Callable[[str, list[str]], bool]:
        """:meth:`wants` without its own call: the pre-check object's (compiled when built)."""
        return self.pairs.wants  # type: ignore[no-any-return]  # from the module in use (PRECHECKS)

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        toks: list[tuple[int, int, str]] = PRECHECKS.place_tokens(self.compiled[0][1], lower)
        geo = self.geo
        n = len(toks)
        taken_until = -1
        for i in range(1, n):
            t = toks[i][2]
            if t == "county":
                self._county(toks, i, lower, out)
                continue
            if t not in self.state_first:
                continue
            hit = self._state_at(toks, i)
            if hit is None:
                continue
            width, code = hit
            end_tok = i + width - 1
            sep = lower[toks[i - 1][1] : toks[i][0]]
            if width == 1 and t in _WORDLIKE_CODES and "," not in sep:
                after = lower[toks[end_tok][1] :].strip()
                if after and not re.match(r"\d{5}", after):
                    continue
            best = None
            for k in range(max(0, i - geo.max_city_words, taken_until + 1), i):
                first_word = toks[k][2]
                if first_word not in geo.city_first_words and first_word != "st":
                    continue
                name = " ".join([x[2] for x in toks[k:i]])
                if name.split()[0] == "st":
                    name = "saint" + name[2:]
                pop = geo.cities.get((name, code))
                if pop is not None and k > 0 and name in self.common and "," not in sep:
                    continue
                if pop is not None:
                    best = (k, pop)
                    break
            if best is None:
                continue
            k, pop = best
            if self.keep_pop is not None and pop > self.keep_pop:
                continue
            state_text = text[toks[i][0] : toks[end_tok][1]]
            out.append(
                Span(
                    toks[k][0],
                    toks[end_tok][1],
                    "city",
                    self.PRIORITY,
                    general=geo.state_names[code],
                    residue=state_text,
                )
            )
            taken_until = end_tok

    def _county(self, toks: list[tuple[int, int, str]], i: int, lower: str, out: list[Span]) -> None:
        for k in range(max(0, i - 3), i):
            name = " ".join(x[2] for x in toks[k:i])
            states = self.geo.counties.get(name)
            if states is None:
                continue
            nxt = self._state_at(toks, i + 1) if i + 1 < len(toks) else None
            general = ""  # the state named next stays; a county name unique to one state becomes it
            if nxt is None and len(states) == 1:
                general = self.geo.state_names[next(iter(states))]
            out.append(Span(toks[k][0], toks[i][1], "county", self.PRIORITY, general=general))
            return
