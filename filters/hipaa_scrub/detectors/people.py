"""Person names: first + last (with middle name or initial, suffix), ``last, first``, and a title
before a surname. Census name shares against word frequencies decide (see ``names.py``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable

from filters.hipaa_scrub.detectors import PRECHECKS, Detector, Pattern, Span
from filters.hipaa_scrub.names import NameData

# fmt: off
TITLES = frozenset([
    "dr", "mr", "mrs", "ms", "miss", "mister", "prof", "professor", "rev", "reverend", "fr", "father",
    "sister", "brother", "judge", "officer", "sgt", "sergeant", "capt", "captain", "lt", "det", "detective",
    "sheriff", "deputy", "coach", "pastor", "rabbi", "atty", "attorney", "senator", "sen", "rep", "gov",
    "mayor",
])
# fmt: on
CUES = frozenset(
    [
        "obituary",
        "obituaries",
        "obit",
        "obits",
        "funeral",
        "memorial",
        "arrested",
        "arrest",
        "mugshot",
        "mugshots",
        "myspace",
        "facebook",
        "friendster",
        "classmates",
        "genealogy",
        "whereabouts",
        "murdered",
        "murder",
        "killed",
        "missing",
        "married",
        "divorce",
        "divorced",
        "wedding",
        "lawsuit",
        "sued",
        "inmate",
        "sentenced",
        "convicted",
        "dds",
        "md",
        "esq",
        "realtor",
        "attorney",
        "lawyer",
        "dentist",
        "doctor",
        "physician",
        "nurse",
        "locate",
        "relatives",
        "ancestors",
        "ancestry",
        "reunion",
    ]
)
VENUES = frozenset(
    [
        "beach",
        "church",
        "park",
        "lake",
        "river",
        "bay",
        "hill",
        "hills",
        "valley",
        "springs",
        "falls",
        "creek",
        "island",
        "street",
        "road",
        "avenue",
        "county",
        "city",
        "hall",
        "hotel",
        "inn",
        "school",
        "college",
        "university",
        "hospital",
        "center",
        "mall",
        "house",
        "bank",
        "bowl",
        "garden",
        "gardens",
        "camp",
        "farm",
        "farms",
        "field",
        "fields",
        "wood",
        "woods",
        "forest",
        "point",
        "port",
        "village",
        "grove",
        "ranch",
        "station",
        "mountain",
        "plaza",
        "tower",
        "towers",
        "square",
        "lane",
        "court",
        "place",
        "heights",
        "club",
        "chapel",
    ]
)
SUFFIXES = frozenset({"jr", "sr", "ii", "iii", "iv"})
MIN_LAST = -0.5
"""Least surname score of a lone surname after a title, or of a third word after a middle name."""
PLACE_BEFORE = frozenset(
    ["st", "saint", "san", "santa", "fort", "ft", "mount", "mt", "lake", "port", "cape", "baby", "lady"]
)
"""A word before the pair that makes it a place or a product (``st thomas``, ``baby ruth``)."""
INSTITUTIONS = frozenset(
    [
        "university",
        "college",
        "school",
        "academy",
        "library",
        "hospital",
        "institute",
        "foundation",
        "elementary",
        "high",
        "middle",
        "center",
        "museum",
        "stadium",
        "arena",
        "bridge",
        "airport",
        "hall",
        "auditorium",
        "theater",
        "theatre",
        "prize",
        "award",
    ]
)
"""A word after the pair that makes it an institution named after someone (``george mason university``)."""


def phrases(block: str) -> frozenset[str]:
    return frozenset(p.strip() for p in block.replace("\n", "").split("|") if p.strip())


ALLOWED_PHRASES: frozenset[str] = phrases(
    """john deere|jack daniels|king james|brady bunch|monte carlo|baby ruth|jack russell|
    tom collins|bloody mary|sloppy joe|jack rabbit|tommy bahama|kelly blue|earl grey|penny stocks|ann taylor|bob evans|
    harley davidson|lane bryant|ralph lauren|calvin klein|
    tommy hilfiger|jimmy dean|eddie bauer|tony roma|ruby tuesday|marie callender|sherwin williams|
    mary kay|victoria secret|victoria secrets|dick smith|dean witter|charles schwab|
    morgan stanley|merrill lynch|wells fargo|edward jones|joe boxer|ben franklin|john hancock|sam adams|samuel adams|
    james bond|harry potter|santa claus|don quixote|robin hood|peter pan|barbie doll|
    betty crocker|betty boop|ronald mcdonald|ashley furniture|ross dress|walt disney|sears roebuck|jenny craig|
    martha stewart"""
)
"""Brands, products and fictional characters named like a person: never a person's name, whatever ``names``."""


class NameDetector(Detector):
    """Person names from census name lists, with word-frequency and context rules."""

    KINDS = ("name",)
    NEEDS = "alpha"
    PRIORITY = 60
    FLAGS = 0
    PATTERNS = (Pattern("token", r"(?<![\[\w@./])[a-z](?:[a-z']|-(?=[a-z]))*\.?"),)

    def __init__(
        self,
        names: NameData,
        threshold: float = 1.5,
        cue_threshold: float = 0.5,
        allow: Iterable[str] = (),
        places: Iterable[str] = (),
        not_last: Iterable[str] = (),
        public: frozenset[str] = frozenset(),
    ) -> None:
        super().__init__()
        self.first = names.first
        self.last = names.last
        self.threshold = threshold
        self.cue_threshold = cue_threshold
        self.allow = ALLOWED_PHRASES | {" ".join(a.lower().split()) for a in allow} | frozenset(places)
        self.triggers = frozenset(self.first) | TITLES
        self.pairs = PRECHECKS.NamePairs(
            self.first, self.last, TITLES, CUES, frozenset(self.allow), float(threshold), float(cue_threshold)
        )
        # country and state names that are rare surnames: "salvador brazil" is a place, "barbara jordan" a person
        self.not_last = frozenset(t for t in not_last if names.last_share.get(t, 0.0) < 1e-4)
        self.words = re.compile(r"[a-z]+")
        #: names kept as public figures' (``names: private``): keys of words joined by one space
        self.public = public

    def _last_score(self, tok: str) -> float | None:
        s = self.last.get(tok)
        if s is None and "-" in tok:
            parts = [self.last.get(p) for p in tok.split("-")]
            if all(p is not None for p in parts):
                return max(p for p in parts if p is not None)
        return s

    def trigger_words(self) -> frozenset[str]:
        """A first name or a title: every name rule starts with one or has one second."""
        return self.triggers

    def wants(self, lower: str, words: list[str]) -> bool:
        """Some adjacent words could score as a name: a necessary condition of :meth:`detect`.

        Pairs (first + last, last + first) and triples (first + initial or middle name + last) are
        scored like ``detect`` scores them, without the stricter rules (venues, places before), so
        ``heather plants``, ``chase bank`` or the allowed ``john deere`` need no tokenizing. Title +
        surname passes as is; a hyphen (``smith-jones`` scores as its best part) gets the looser check.
        Every rule needs a first name or a title (:meth:`trigger_words`), which the scrubber has checked.
        """
        return bool(self.pairs.wants(lower, words))

    def precheck(self) -> Callable[[str, list[str]], bool]:
        """:meth:`wants` without its own call: the pre-check object's (compiled when built)."""
        return self.pairs.wants  # type: ignore[no-any-return]  # from the module in use (PRECHECKS)

    def detect(self, text: str, lower: str, out: list[Span]) -> None:
        scan: tuple[list[str], list[tuple[int, int, str]]] = PRECHECKS.name_scan(self.compiled[0][1], self.words, lower)
        words, toks = scan
        n = len(toks)
        cue = not CUES.isdisjoint(words)
        threshold = self.cue_threshold if cue else self.threshold
        first, last = self.first, self.last
        i = 0
        while i < n:
            _, e0, t0 = toks[i]
            span = None
            if i + 1 < n and f"{t0} {toks[i + 1][2]}" in self.allow:
                i += 2
                continue
            if t0 in TITLES and i + 1 < n and self._gap_ok(lower, e0, toks[i + 1][0]):
                j = i + 1
                if toks[j][2] in first and j + 1 < n and self._gap_ok(lower, toks[j][1], toks[j + 1][0]):
                    span = self._first_last(toks, j, lower, -99.0)
                ls = self._last_score(toks[j][2])
                if span is None and ls is not None and ls >= MIN_LAST and toks[j][2] not in TITLES:
                    span = (j, j)  # "mrs silk", "dr patel"; not "father knows", "miss you"
            elif t0 in first and i + 1 < n and self._gap_ok(lower, e0, toks[i + 1][0]):
                span = self._first_last(toks, i, lower, threshold)
            elif t0 in last and i + 1 < n and lower[e0 : toks[i + 1][0]].strip() == ",":
                t1 = toks[i + 1][2]
                if t1 in first and last[t0] + first[t1] + 0.5 >= threshold:
                    span = (i, i + 1)
            if span is None:
                i += 1
                continue
            a, b = span
            while b + 1 < n and toks[b + 1][2] in SUFFIXES and self._gap_ok(lower, toks[b][1], toks[b + 1][0]):
                b += 1
            if (
                toks[b][2] in self.not_last
                or (a > 0 and toks[a - 1][2] in PLACE_BEFORE and not cue)
                or (b + 1 < n and toks[b + 1][2] in INSTITUTIONS)
            ):
                i = b + 1
                continue
            if not (self.public and " ".join(self.words.findall(lower, toks[a][0], toks[b][1])) in self.public):
                out.append(Span(toks[a][0], toks[b][1], "name", self.PRIORITY, score=self._confidence(toks, a, b)))
            i = b + 1

    def _confidence(self, toks: list[tuple[int, int, str]], a: int, b: int) -> float:
        """The census odds of a first + last name as a probability (log10 odds 1.5: 0.97); 1.0 for the rules
        that need no odds (a title before a surname, ``last, first``)."""
        while b > a and toks[b][2] in SUFFIXES:
            b -= 1
        first, last = self.first.get(toks[a][2]), self._last_score(toks[b][2])
        if first is None or last is None or b == a:
            return 1.0
        return round(1.0 / (1.0 + float(10.0 ** -(first + last))), 4)

    @staticmethod
    def _gap_ok(lower: str, end: int, start: int) -> bool:
        return start - end <= 2 and not lower[end:start].strip()

    def _first_last(
        self, toks: list[tuple[int, int, str]], i: int, lower: str, threshold: float
    ) -> tuple[int, int] | None:
        first = self.first
        t0 = toks[i][2]
        j = i + 1
        bonus = 0.0
        tj = toks[j][2]
        need = threshold
        if f"{t0} {tj}" in self.allow:
            return None
        if j + 1 < len(toks) and self._gap_ok(lower, toks[j][1], toks[j + 1][0]):
            t2 = toks[j + 1][2]
            nxt = self._last_score(t2)
            if (
                nxt is not None
                and (len(tj) == 1 or (tj in first and nxt >= MIN_LAST))
                and f"{tj} {t2}" not in self.allow
                and t2 not in self.not_last
            ):
                # middle initial or middle name: "john q smith", "mary ann smith"
                bonus3 = 2.0 if len(tj) == 1 else 1.0
                if first[t0] + nxt + bonus3 >= need + (1.5 if t2 in VENUES else 0.0):
                    return (i, j + 1)
        ls = self._last_score(tj)
        if ls is None:
            return None
        phrase = f"{t0} {tj}"
        if phrase in self.allow:
            return None
        need += 1.5 if tj in VENUES else 0.0
        return (i, j) if first[t0] + ls + bonus >= need else None
