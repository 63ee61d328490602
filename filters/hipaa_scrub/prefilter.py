"""The one-pass prefilter: every digit, e-mail and network detector's ``TRIGGERS`` in one RE2 set, matched once
per text, and the plan of detectors to run for each set of triggers found.

``re2.Set`` (google-re2) runs all the trigger patterns in one DFA pass over the text and returns the indexes of
those that match somewhere. A detector none of whose triggers matched cannot find anything (triggers are necessary
conditions) and is skipped; the others run without their pre-check calls (a pre-check is a necessary condition too,
so running ``detect`` without it finds the same). Plans are cached by the indexes found (few combinations occur).

Only lowercased ASCII texts go through the set (``Scrubber.detect`` keeps the pre-checks for other texts: Python's
``\\d``, ``\\w`` and ``\\s`` match more there than RE2's, and lowercasing may change lengths).
"""

from __future__ import annotations

from collections.abc import Sequence

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from filters.hipaa_scrub.detectors import Detector
from filters.hipaa_scrub.engine import Plan
from filters.hipaa_scrub.plans import gates

MAX_MEM = 32 << 20
"""RE2's memory budget for the set. Its DFA is built lazily and grows with the variety of texts (12 MiB after
300,000 random strings of letters, digits and punctuation, far less on queries); at the budget RE2 starts its state
cache afresh, and still matches every text (tested with a budget 340 times smaller); too small a budget fails the
set's compilation, loudly."""
PLAN_CACHE_SIZE = 4096


class Prefilter:
    """The trigger patterns of ``digit`` and ``other`` detectors in one set; :meth:`plan` gives what to run."""

    def __init__(self, digit: Sequence[Detector], other: Sequence[Detector], max_mem: int = MAX_MEM) -> None:
        self._args = (tuple(digit), tuple(other), max_mem)
        options = re2.Options()
        options.max_mem = max_mem
        options.dot_nl = True  # ``.`` in a trigger is any character
        options.never_capture = True
        options.encoding = re2.Options.Encoding.LATIN1  # ASCII text only: a byte is a character
        self._set = re2.Set.SearchSet(options)
        self.patterns: list[str] = []
        # digit detectors in the order the digit plans run them (by cue words, by a pre-check, ungated), then the
        # others: every detector has its own priority, but the order is kept so that even ties resolve alike
        kinds = [gates(d) for d in digit]
        order = [d for d, (cue, _) in zip(digit, kinds, strict=True) if cue is not None]
        order += [d for d, (cue, pre) in zip(digit, kinds, strict=True) if cue is None and pre is not None]
        order += [d for d, (cue, pre) in zip(digit, kinds, strict=True) if cue is None and pre is None]
        self._ids = {id(d): self._add(d) for d in (*order, *other)}
        #: (trigger indexes or None: always runs, cue words or None, detect, last resort)
        self.table = [(self._ids[id(d)], gates(d)[0], d.detect, d.TOKEN_DIGITS is not None) for d in (*order, *other)]
        self._set.Compile()
        #: the trigger indexes found in a lowercased ASCII text (the compiled set itself: the wrapper's Match re-checks
        #: the type); the engine calls it, then looks the plan up in :attr:`plans`, else calls :meth:`plan_miss`
        self.match = self._set._set.Match
        #: plans by the trigger indexes found, in the order RE2 reports them (bounded)
        self.plans: dict[tuple[int, ...], Plan] = {}

    def __reduce__(self) -> tuple[type[Prefilter], tuple[tuple[Detector, ...], tuple[Detector, ...], int]]:
        """Pickled as its detectors (an RE2 set does not pickle): a scrubber still pickles whole."""
        return Prefilter, self._args

    def _add(self, d: Detector) -> frozenset[int] | None:
        triggers = d.trigger_patterns()
        if triggers is None:
            return None
        ids = []
        for pattern in triggers:  # a pattern two detectors share is matched once
            if pattern not in self.patterns:
                self._set.Add(pattern)
                self.patterns.append(pattern)
            ids.append(self.patterns.index(pattern))
        return frozenset(ids)

    def ids(self, d: Detector) -> frozenset[int] | None:
        """The indexes of ``d``'s trigger patterns (None: it has none and always runs)."""
        return self._ids.get(id(d))

    def hits(self, raw: bytes) -> tuple[int, ...]:
        """The indexes of the trigger patterns that match somewhere in ``raw`` (a lowercased ASCII text), in the
        order RE2 reports them."""
        return tuple(self.match(raw))

    def plan(self, raw: bytes) -> Plan:
        """The detectors to run on ``raw`` (a lowercased ASCII text): those with a trigger found or without
        triggers."""
        hits = tuple(self.match(raw))
        plan = self.plans.get(hits)
        return self.plan_miss(hits) if plan is None else plan

    def plan_miss(self, hits: tuple[int, ...]) -> Plan:
        """:meth:`plan_for` these trigger indexes (as :meth:`hits` gives them), kept in :attr:`plans` while the
        cache has room."""
        plan = self.plan_for(hits)
        if len(self.plans) < PLAN_CACHE_SIZE:
            self.plans[hits] = plan
        return plan

    def plan_for(self, hits: Sequence[int]) -> Plan:
        """The plan for these trigger indexes (any order)."""
        found = frozenset(hits)
        run = [(ids, cue, detect, last) for ids, cue, detect, last in self.table if ids is None or ids & found]
        return [(cue, detect) for _, cue, detect, last in run if not last], [d for *_, d, last in run if last]
