"""The scrubber's per-query loop: which detectors run on a text, overlap resolution, the policies applied, the
rescans until the text is stable. :class:`~filters.hipaa_scrub.scrubber.Scrubber` builds the detectors and their
plans once and hands them to an :class:`Engine`; every query then runs here.

A pure module on purpose (standard library, the :class:`Span` type and callables it is given): it can be compiled
with mypyc into an extension module beside this file (with :mod:`.detectors.prechecks`, the scrubber runs about 1.3x
faster: README, "where the scrubber's time goes"). ``Scrubber`` uses that build only when it was made from this very
source (:func:`~sidecar.api.compiled.current`), else this file; the tests compare the two.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from filters.hipaa_scrub.detectors import Span, ascii_digits

Run = Callable[[str, str, list[Span]], None]
Wants = Callable[[str, list[str]], bool]
Plan = tuple[list[tuple[frozenset[str] | None, Run]], list[Run]]
"""The prefilter's plan (:mod:`.prefilter`): the detectors to run, each with the cue words of which one must be
among the text's words or None; the last resorts (see :meth:`Engine.covered`)."""
AlphaPlan = list[tuple[frozenset[str] | None, Wants, Run]]
GatedPlan = list[tuple[frozenset[str], Wants, Run]]

MAX_PASSES: Final = 64
# ASCII texts are tokenized by ``bytes.translate`` + ``split`` (several times faster than ``findall``): every byte
# but a-z (resp. 0-9) becomes a space, so the pieces are exactly the ``[a-z]+`` (``\d+``) runs
KEEP_LETTERS: Final = bytes(c if 97 <= c <= 122 else 32 for c in range(256))
DIGIT_BYTES: Final = b"0123456789"


def word_or_dash(char: str) -> bool:
    """``re.match(r"[\\w-]", char)``: a word character (alphanumeric or ``_``) or a dash."""
    return char.isalnum() or char in "_-"


def rank(s: Span) -> tuple[int, int, int]:
    """Overlap resolution order: longer spans first, then lower priority numbers, then text order."""
    return (s.start - s.end, s.priority, s.start)


def _start(s: Span) -> int:
    return s.start


def resolve(found: list[Span]) -> list[Span]:
    """The spans kept when overlaps are resolved by :func:`rank`, in text order."""
    if len(found) == 2:  # the usual case (a catch-all number under a specific one), without sorting
        a, b = found
        a_first = rank(a) <= rank(b)  # the order a stable sort by rank gives
        if a.end > b.start and a.start < b.end:
            return [a if a_first else b]  # overlap: the higher ranked one stays
        if a.start != b.start:
            a_first = a.start < b.start
        return [a, b] if a_first else [b, a]
    found.sort(key=rank)
    kept = [found[0]]
    for s in found[1:]:
        start, end = s.start, s.end
        overlaps = False
        for k in kept:
            if end > k.start and start < k.end:
                overlaps = True  # overlaps a span that ranks higher
                break
        if not overlaps:
            kept.append(s)
    if len(kept) > 1:
        kept.sort(key=_start)
    return kept


class Engine:
    """The per-query loop over plans built once (see :class:`~filters.hipaa_scrub.scrubber.Scrubber`).

    ``match`` is the prefilter's one-pass trigger match (None: no prefilter), ``plans`` its plans by the triggers
    found and ``plan_for`` the plan of triggers not seen yet (it caches it in ``plans``). ``general`` detects what
    this loop does not: non-ASCII texts, and texts of other characters than letters and spaces when there is no
    prefilter (the pre-check plans). ``replacement`` writes what a policy other than ``remove`` puts in a span's
    place (None: keep)."""

    def __init__(
        self,
        *,
        alpha_words: frozenset[str] | None,
        alpha_plan: AlphaPlan,
        alpha_gated: GatedPlan,
        match: Callable[[bytes], Any] | None,
        plans: dict[tuple[int, ...], Plan],
        plan_for: Callable[[tuple[int, ...]], Plan],
        general: Callable[[str], list[Span]],
        token_digits: int,
        thresholds: dict[str, float],
        policies: dict[str, str],
        replacement: Callable[[str, Span], str | None],
        screen_hosts: Callable[[str, list[Span]], list[Span]],
    ) -> None:
        self.alpha_words = alpha_words
        self.alpha_plan = alpha_plan
        self.alpha_gated = alpha_gated
        self.match = match
        self.plans = plans
        self.plan_for = plan_for
        self.general = general
        self.token_digits = token_digits
        self.thresholds = thresholds
        self.policies = policies
        self.replacement = replacement
        self.screen_hosts = screen_hosts

    def detect(self, text: str) -> list[Span]:
        """Non-overlapping spans, in text order (longer spans win; then the detector's priority)."""
        if not text.isascii():
            return self.general(text)
        lower = text.lower()
        raw = lower.encode()
        letters = raw.translate(KEEP_LETTERS)
        found: list[Span] = []
        if letters == raw:
            # letters and spaces only (most queries, most rescans): no digit, @ or network detector can match, and
            # most such texts have no trigger word of a word-based detector either
            self.word_detectors(text, lower, lower.split(), found)
            if found and self.thresholds:
                found = self.screen(lower, found)
            return found if len(found) <= 1 else resolve(found)
        if self.match is None:
            return self.general(text)
        words = letters.decode().split()
        hits = tuple(self.match(raw))
        plan = self.plans.get(hits)
        if plan is None:
            plan = self.plan_for(hits)
        ordered, last = plan
        for cue_words, run in ordered:
            if cue_words is None or not cue_words.isdisjoint(words):
                run(text, lower, found)
        self.word_detectors(text, lower, words, found)
        if last and not (found and self.covered(lower, found, len(raw) - len(raw.translate(None, DIGIT_BYTES)))):
            for run in last:
                run(text, lower, found)
        if found and ("." in lower or "<" in lower or self.thresholds):
            found = self.screen(lower, found)
        return found if len(found) <= 1 else resolve(found)

    def word_detectors(self, text: str, lower: str, words: list[str], found: list[Span]) -> None:
        """Run the word-based detectors whose trigger words and pre-check the text passes."""
        alpha_words = self.alpha_words
        if alpha_words is None:
            for triggers, wants, run in self.alpha_plan:
                if (triggers is None or not triggers.isdisjoint(words)) and wants(lower, words):
                    run(text, lower, found)
            return
        # the text's trigger words, looked up once: each detector's test is against this small set (most texts have
        # none: ``isdisjoint`` tells without building one)
        if not alpha_words.isdisjoint(words):
            present = alpha_words.intersection(words)
            for cue_words, wants, run in self.alpha_gated:
                if not present.isdisjoint(cue_words) and wants(lower, words):
                    run(text, lower, found)

    def screen(self, lower: str, found: list[Span]) -> list[Span]:
        """``found`` without findings inside a hostname or a token this filter wrote (``screen_hosts``) and without
        those below their type's confidence threshold."""
        if "." in lower or "<" in lower:
            found = self.screen_hosts(lower, found)
        if self.thresholds:
            least = self.thresholds
            found = [s for s in found if s.score >= least.get(s.kind, 0.0)]
        return found

    def covered(self, lower: str, found: list[Span], digits: int) -> bool:
        """True when no last-resort detector (``Detector.TOKEN_DIGITS``) can change the outcome on this text of
        ``digits`` digits. A found span that every other found span overlapping it ranks below (:func:`rank`) is
        kept whatever else is found; if no word character or dash touches its edges, every run of word characters
        and dashes that meets it lies inside it, and a last resort's span there (one such run, no longer, the
        lowest priority) would be dropped. If fewer than ``TOKEN_DIGITS`` digits lie outside those spans, no run
        elsewhere has enough digits for a last resort to find anything either."""
        outside = digits
        end = len(lower)
        for s in found:
            a, b = s.start, s.end
            if (a and word_or_dash(lower[a - 1])) or (b < end and word_or_dash(lower[b])):
                continue
            first = rank(s)
            beaten = False
            for t in found:
                if t is not s and t.end > a and t.start < b and rank(t) <= first:
                    beaten = True  # may rank first (an equal rank too: the first found of two wins)
                    break
            if not beaten:
                outside -= ascii_digits(lower[a:b])
        return outside < self.token_digits

    def apply(self, text: str, spans: list[Span], counts: dict[str, int], count_kept: bool = True) -> str:
        """Apply each span's policy (``replacement``); whitespace is tidied where something was removed."""
        policies = self.policies
        if len(spans) == 1:  # the usual case, without the list building below
            s = spans[0]
            kind = s.kind
            policy = policies[kind]
            if count_kept or policy != "keep":
                counts[kind] = counts.get(kind, 0) + 1
            repl = s.residue if policy == "remove" else self.replacement(text, s)
            if repl is None:
                return text
            new = text[: s.start] + repl + text[s.end :]
            return new if repl else " ".join(new.split())
        out: list[str] = []
        pos = 0
        removed = False
        for s in spans:
            kind = s.kind
            policy = policies[kind]
            if count_kept or policy != "keep":
                counts[kind] = counts.get(kind, 0) + 1
            repl = s.residue if policy == "remove" else self.replacement(text, s)
            if repl is None:
                continue
            out.append(text[pos : s.start])
            out.append(repl)
            removed = removed or not repl
            pos = s.end
        out.append(text[pos:])
        new = "".join(out)
        return " ".join(new.split()) if removed else new

    def scrub(self, text: str) -> tuple[str, dict[str, int]]:
        """The scrubbed text and the count of identifiers found per type (never the values)."""
        spans = self.detect(text)
        if not spans:
            return text, {}
        counts: dict[str, int] = {}
        # each pass removes or rewrites at least one span, so a pass per word (bounded) reaches a fixpoint
        for n in range(min(MAX_PASSES, text.count(" ") + 2)):
            new = self.apply(text, spans, counts, n == 0)
            if new == text:
                return new, counts
            # detectors read context (cue words, the word before a name, a state after a town), so any change may
            # reveal or hide a neighbour: scan again until the text is stable
            text = new
            if not text or text.isspace():
                break  # nothing left to find
            spans = self.detect(text)
            if not spans:
                break
        return text, counts
