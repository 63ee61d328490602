"""The scrubber's detector plans: which detectors a text can need, decided once per kind of text, not per detector.

Built once with the :class:`~filters.hipaa_scrub.scrubber.Scrubber`: bound methods and gates are looked up here,
so the per-query loop does no attribute lookups. Digit detectors are planned by the text's digit count and the
lengths of its digit runs; word-based detectors by their trigger words.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from filters.hipaa_scrub.detectors import Detector, Span

PreCheck = Callable[[str, str, list[str], frozenset[int]], bool]
Run = Callable[[str, str, list[Span]], None]
Wants = Callable[[str, list[str]], bool]
DigitPlan = tuple[
    list[tuple[frozenset[str], Run]], list[tuple[PreCheck, Run]], list[Run], list[tuple[PreCheck | None, Run]]
]
"""Digit detectors to try: (gated by cue words, gated by a pre-check, ungated, last resorts: see
:meth:`Scrubber._covered`)."""
Lens = tuple[frozenset[int] | None, frozenset[int] | None]
"""A detector's digit-run lengths: (``RUNS``, one of which must occur; ``RUNS_ALL``, all of which must)."""
ANY_RUNS: Lens = (None, None)
RunsPlan = tuple[
    list[tuple[Lens, frozenset[str], Run]],
    list[tuple[Lens, PreCheck, Run]],
    list[tuple[Lens, Run]],
    list[tuple[Lens, PreCheck | None, Run]],
]
"""A :data:`DigitPlan` whose detectors still carry their digit-run lengths (``Detector.RUNS``)."""
AlphaPlan = list[tuple[frozenset[str] | None, Wants, Run]]
"""Word-based detectors with their trigger words (None: none), ``wants`` pre-check and ``detect``."""
GatedPlan = list[tuple[frozenset[str], Wants, Run]]
"""An :data:`AlphaPlan` whose detectors all have trigger words."""


def fits(lens: Lens, runs: frozenset[int]) -> bool:
    """True when a text with digit runs of these lengths meets a detector's ``RUNS`` and ``RUNS_ALL``."""
    one_of, all_of = lens
    return (one_of is None or not one_of.isdisjoint(runs)) and (all_of is None or all_of <= runs)


def any_text(text: str, lower: str, words: list[str], runs: frozenset[int]) -> bool:
    """A ``Detector.prefilter`` that always passes (``Scrubber(prechecks=False)``)."""
    return True


def any_words(lower: str, words: list[str]) -> bool:
    """A ``Detector.wants`` that always passes (``Scrubber(prechecks=False)``)."""
    return True


def gates(d: Detector) -> tuple[frozenset[str] | None, PreCheck | None]:
    """(GATE_WORDS when they are the whole pre-check, else None; the pre-check method, None if none)."""
    if not d.has_prefilter():
        return None, None
    if type(d).prefilter is Detector.prefilter and d.gate is None and d.GATE_WORDS is not None:
        return d.GATE_WORDS, None
    return None, d.prefilter


def digit_plans(digit: Sequence[Detector]) -> list[RunsPlan]:
    """The digit detectors a text with ``n`` digits can need, by ``n`` (capped at the largest ``MIN_DIGITS``): no
    per-detector count check at run time.

    Each plan is split four ways (no per-detector branching at run time): detectors gated by cue words (a
    detector whose pre-check is only its GATE_WORDS is gated without a method call), by a pre-check method,
    ungated ones, and last resorts (run after all others, unless what those found settles it: see
    ``Scrubber._covered``), each with its digit-run lengths (RUNS). The order detectors run in does not matter:
    every detector has its own priority, so overlaps resolve the same way."""
    # (least digits, digit-run lengths, cue words of which one must occur, other pre-check, detect, last resort)
    table = [(d.MIN_DIGITS, (d.RUNS, d.RUNS_ALL), *gates(d), d.detect, d.TOKEN_DIGITS is not None) for d in digit]
    top = max((d.MIN_DIGITS for d in digit), default=0)
    by_count: list[RunsPlan] = []
    for n in range(top + 1):
        plan = [(lens, cue, pre, run) for need, lens, cue, pre, run, last in table if n >= need and not last]
        by_count.append(
            (
                [(lens, cue, run) for lens, cue, _, run in plan if cue is not None],
                [(lens, pre, run) for lens, cue, pre, run in plan if cue is None and pre is not None],
                [(lens, run) for lens, cue, pre, run in plan if cue is None and pre is None],
                [(lens, pre, run) for need, lens, _, pre, run, last in table if n >= need and last],
            )
        )
    return by_count


def plan_for(by_count: list[RunsPlan], lengths: tuple[int, ...]) -> tuple[DigitPlan, frozenset[int]]:
    """The digit plan for a text whose digit runs have these lengths (in text order): the plan for its digit count
    without the detectors whose RUNS / RUNS_ALL the lengths miss; and the set of lengths."""
    runs = frozenset(lengths)
    by_words, by_check, ungated, last = by_count[min(sum(lengths), len(by_count) - 1)]
    plan: DigitPlan = (
        [(cue, run) for lens, cue, run in by_words if fits(lens, runs)],
        [(pre, run) for lens, pre, run in by_check if fits(lens, runs)],
        [run for lens, run in ungated if fits(lens, runs)],
        [(pre, run) for lens, pre, run in last if fits(lens, runs)],
    )
    return plan, runs


def alpha_plans(
    alpha: Sequence[Detector],
) -> tuple[AlphaPlan, frozenset[str] | None, list[tuple[frozenset[str], Wants, Run]]]:
    """The word-based detectors' plan (each with its trigger words: a set test in C before the Python ``wants``
    call); the union of their trigger words when every one has some (most texts have none of them: one set test
    skips them all), else None; and the plan without the Nones, for when that union is set."""
    plan: AlphaPlan = [(d.trigger_words(), d.precheck(), d.detect) for d in alpha]
    triggers = [t for t in (d.trigger_words() for d in alpha) if t is not None]
    words: frozenset[str] | None = frozenset().union(*triggers) if len(triggers) == len(alpha) else None
    gated: GatedPlan = [(t, wants, run) for t, wants, run in plan if t is not None]
    return plan, words, gated
