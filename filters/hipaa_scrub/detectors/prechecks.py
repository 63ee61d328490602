"""The word detectors' pre-checks and the cue scan, the detectors' hottest pure loops: set and dict look-ups over a
text's words, and ``re`` calls. A pure module on purpose (standard library only): it can be compiled with mypyc
into an extension module beside this file; the detectors use that build only when it was made from this very
source (:func:`sidecar.api.compiled.current`), else this file. The tests run both and compare.
"""

from __future__ import annotations

import re


def scan_from_starts(starts: re.Pattern[str], full: re.Pattern[str], text: str) -> list[re.Match[str]]:
    """``list(full.finditer(text))``, trying ``full`` only where ``starts`` matches.

    ``starts`` must match at every position where ``full`` can match (a cheap scan for the words a match begins
    with): then the matches are the same, without trying a long alternation everywhere.
    """
    found: list[re.Match[str]] = []
    pos = 0
    while True:
        s = starts.search(text, pos)
        if s is None:
            return found
        at = s.start()
        m = full.match(text, at)
        if m is None:
            pos = at + 1
        else:
            found.append(m)
            end = m.end()
            pos = end if end > at else at + 1


def tokens(rx: re.Pattern[str], text: str, strip: str) -> list[tuple[int, int, str]]:
    """``(start, end, token)`` of each match of ``rx`` in ``text``, the token without trailing ``strip``
    characters."""
    return [(m.start(), m.end(), m.group().rstrip(strip)) for m in rx.finditer(text)]


# every byte but a-z (resp. a-z and 0-9) becomes a space: the pieces ``split`` gives are the runs of those bytes
_KEEP_LETTERS = bytes(c if 97 <= c <= 122 else 32 for c in range(256))
_KEEP_ALNUM = bytes(c if 97 <= c <= 122 or 48 <= c <= 57 else 32 for c in range(256))


def _runs(kept: str) -> list[tuple[int, int, str]]:
    """``(start, end, run)`` of the space-separated runs of ``kept``: each found after the last, where no other
    character of a run can be (several times faster than ``finditer`` and its match objects)."""
    found: list[tuple[int, int, str]] = []
    pos = 0
    for run in kept.split():
        start = kept.find(run, pos)
        pos = start + len(run)
        found.append((start, pos, run))
    return found


def place_tokens(rx: re.Pattern[str], lower: str) -> list[tuple[int, int, str]]:
    """``tokens(rx, lower, "")`` for ``PlaceDetector``'s ``[a-z0-9]+(?:'[a-z]+)?``: on an ASCII text without an
    apostrophe the tokens are its runs of ``[a-z0-9]``."""
    if not lower.isascii() or "'" in lower:
        return tokens(rx, lower, "")
    return _runs(lower.encode().translate(_KEEP_ALNUM).decode())


def name_scan(rx: re.Pattern[str], words: re.Pattern[str], lower: str) -> tuple[list[str], list[tuple[int, int, str]]]:
    """``NameDetector``'s words (``words.findall(lower)``, ``words`` being ``[a-z]+``) and tokens
    (``tokens(rx, lower, ".")`` for its token pattern: a letter, then letters, apostrophes and inner hyphens, a final
    dot stripped): on a text of letters a-z and spaces only (most that reach it) both are its words."""
    if lower.isascii():
        raw = lower.encode()
        if raw.translate(_KEEP_LETTERS) == raw:
            return lower.split(), _runs(lower)
    return words.findall(lower), tokens(rx, lower, ".")


def cue_values(
    starts: re.Pattern[str], full: re.Pattern[str], lower: str, skip: re.Pattern[str]
) -> list[tuple[int, int, str]]:
    """``ContextNumberDetector``'s values, as ``(start, end, kind)``: its scan (:func:`scan_from_starts`) and its
    value checks (``ContextNumberDetector._take``, written out for the loop to run compiled)."""
    found: list[tuple[int, int, str]] = []
    for m in scan_from_starts(starts, full, lower):
        group = m.lastgroup
        if group is None:
            continue
        v = m.group(group)
        digits = 0
        for c in v:
            if c.isdigit():
                digits += 1
        if skip.match(v) is not None:
            continue  # a year, a small number
        if group == "vehicle_v":
            if digits < 2:
                continue  # plates may be short
        elif digits < 3 and not (len(v) >= 6 and not v.isdigit() and v.isalnum()):
            continue  # other numbers are not ("49cc"), unless a code mixing letters and digits
        if " " in v and digits < 7:
            continue  # digit groups make one number only when long enough ("123 456 789")
        found.append((m.start(group), m.end(group), group[:-2]))
    return found


class NamePairs:
    """:meth:`~filters.hipaa_scrub.detectors.people.NameDetector.wants`: could adjacent words score as a name?"""

    def __init__(
        self,
        first: dict[str, float],
        last: dict[str, float],
        titles: frozenset[str],
        cues: frozenset[str],
        allow: frozenset[str],
        threshold: float,
        cue_threshold: float,
    ) -> None:
        self.first = first
        self.last = last
        self.titles = titles
        self.cues = cues
        self.allow = allow
        self.threshold = threshold
        self.cue_threshold = cue_threshold
        self.starters = frozenset(first) | titles | frozenset(last)  # words a name rule can start at
        # words a name rule can have second (a one-letter initial too): every rule of could_start needs one
        self.seconds = frozenset(first) | frozenset(last)

    def __reduce__(self) -> tuple[type[NamePairs], tuple[object, ...]]:
        """Pickled as its arguments (a compiled class pickles no other way)."""
        args = (self.first, self.last, self.titles, self.cues, self.allow, self.threshold, self.cue_threshold)
        return NamePairs, args

    def wants(self, lower: str, words: list[str]) -> bool:
        """Some adjacent words could score as a name (see ``NameDetector.wants``)."""
        if "-" in lower:
            return self.any_pair(words)
        need = self.cue_threshold if not self.cues.isdisjoint(words) else self.threshold
        starters, seconds, allow = self.starters, self.seconds, self.allow
        for i in range(len(words) - 1):
            a = words[i]
            if a not in starters:
                continue
            b = words[i + 1]
            if (b in seconds or len(b) == 1) and self.could_start(words, i, a, b, need) and a + " " + b not in allow:
                return True  # detect skips an allowed pair (``john deere``) before any rule
        return False

    def could_start(self, words: list[str], i: int, a: str, b: str, need: float) -> bool:
        """Could a rule start at ``words[i]``, ``b`` after it: first + last, first + initial or middle name + last,
        title + name, last + first, scored as ``NameDetector.detect`` scores them (``need``: the threshold)?"""
        first, last = self.first, self.last
        fa = first.get(a)
        if fa is not None:
            lb = last.get(b)
            if lb is not None and fa + lb >= need:
                return True
            if i + 2 < len(words) and (len(b) == 1 or b in first):
                lc = last.get(words[i + 2])
                if lc is not None and fa + lc + (2.0 if len(b) == 1 else 1.0) >= need:
                    return True
        if a in self.titles and (b in last or b in first):
            return True
        la = last.get(a)
        fb = first.get(b)
        return la is not None and fb is not None and la + fb + 0.5 >= need

    def any_pair(self, words: list[str]) -> bool:
        """The looser check of texts with a hyphen (``smith-jones`` scores as its best part)."""
        first, last, titles = self.first, self.last, self.titles
        for i in range(len(words) - 1):
            a, b = words[i], words[i + 1]
            if (a in first or a in titles) and (b in last or len(b) == 1):
                return True
            if a in last and b in first:
                return True
        return False


class PlacePairs:
    """:meth:`~filters.hipaa_scrub.detectors.places.PlaceDetector.wants`: ``county``, or a state word right after
    the last word of a town of that state small enough to be scrubbed?"""

    def __init__(
        self,
        state_first: frozenset[str],
        wordlike: frozenset[str],
        city_last: frozenset[str],
        city_last_in: frozenset[tuple[str, str]],
        states: dict[str, str],
        multi_first: frozenset[str],
    ) -> None:
        self.state_first = state_first
        self.wordlike = wordlike
        self.city_last = city_last
        self.city_last_in = city_last_in
        self.states = states
        self.multi_first = multi_first

    def __reduce__(self) -> tuple[type[PlacePairs], tuple[object, ...]]:
        """Pickled as its arguments (a compiled class pickles no other way)."""
        args = (self.state_first, self.wordlike, self.city_last, self.city_last_in, self.states, self.multi_first)
        return PlacePairs, args

    def wants(self, lower: str, words: list[str]) -> bool:
        """See ``PlaceDetector.wants``."""
        if "county" in words:
            return True
        hits = self.state_first.intersection(words)
        if not hits:
            return False
        # word-like codes ("in", "or", "me") count only at the end or before a number, so a query where they are
        # all mid-text words needs no tokenizing
        if hits <= self.wordlike and words[-1] not in hits:
            return False
        city_last, states, multi, city_last_in = self.city_last, self.states, self.multi_first, self.city_last_in
        for i in range(len(words) - 1):
            a, b = words[i], words[i + 1]
            if b in hits and a in city_last and (b in multi or (a, states[b]) in city_last_in):
                return True
        return False
