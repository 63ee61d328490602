"""The scrubber: builds the detectors the policies want and their plans (which detectors a text can need), and
hands them to the per-query loop (:mod:`.engine`: run the detectors that the one-pass prefilter or cheap pre-checks
allow, resolve overlaps, apply the per-type policies, repeat until the text is stable; scrubbing is idempotent)."""

from __future__ import annotations

import re
from collections.abc import Callable

from filters.hipaa_scrub import engine as _built_engine
from filters.hipaa_scrub.config import HipaaScrubConfig
from filters.hipaa_scrub.custom import CustomDetector
from filters.hipaa_scrub.detectors import KINDS, Detector, Span
from filters.hipaa_scrub.detectors.context import (
    ContextNumberDetector,
    CuedVinDetector,
    MbiDetector,
    SerialDetector,
    VinDetector,
)
from filters.hipaa_scrub.detectors.dates import AgeDetector, DateDetector
from filters.hipaa_scrub.detectors.network import EmailDetector, IpDetector, MacDetector, UrlDetector
from filters.hipaa_scrub.detectors.numbers import (
    CardDetector,
    LongNumberDetector,
    NationalPhoneDetector,
    PhoneDetector,
    SsnDetector,
    ZipDetector,
)
from filters.hipaa_scrub.detectors.people import NameDetector
from filters.hipaa_scrub.detectors.places import AddressDetector, PlaceDetector
from filters.hipaa_scrub.detectors.vehicles import PlateDetector
from filters.hipaa_scrub.engine import Engine, Plan
from filters.hipaa_scrub.explain import explain
from filters.hipaa_scrub.geo import load_geo
from filters.hipaa_scrub.hosts import outside_hosts
from filters.hipaa_scrub.names import common_words, load_names
from filters.hipaa_scrub.operators import KEYED, OperatorKeys, encrypt_token, hash_token, mask
from filters.hipaa_scrub.plans import (
    ANY_RUNS,
    DigitPlan,
    PreCheck,
    Run,
    RunsPlan,
    alpha_plans,
    any_text,
    any_words,
    digit_plans,
    plan_for,
)
from filters.hipaa_scrub.prefilter import Prefilter
from filters.hipaa_scrub.public import public_names
from sidecar.api.compiled import current

TOKENS = {k: "[" + k.upper() + "]" for k in KINDS}
"""Replacement tokens of the ``replace`` policy (``[PHONE]``, ``[NAME]``...)."""

_NO_RUNS: frozenset[int] = frozenset()
_PLAN_CACHE_SIZE = 4096

_RUNS = re.compile(r"\d+")
_WORDS = re.compile(r"[a-z]+")
# ASCII texts are tokenized by ``bytes.translate`` + ``split`` (several times faster than ``findall``):
# every byte but a-z (resp. 0-9) becomes a space, so the pieces are exactly the ``[a-z]+`` (``\d+``) runs
_KEEP_LETTERS = bytes(c if 97 <= c <= 122 else 32 for c in range(256))
_KEEP_DIGITS = bytes(c if 48 <= c <= 57 else 32 for c in range(256))


ENGINE = current(_built_engine)
"""The engine module in use: compiled when built from the current source, else interpreted."""
_Engine: type[Engine] = ENGINE.Engine
resolve = ENGINE.resolve
_rank, _word_or_dash, _resolve = ENGINE.rank, ENGINE.word_or_dash, resolve  # the names tests and earlier callers use


def _no_plan(hits: tuple[int, ...]) -> Plan:
    raise AssertionError("no prefilter: the engine matches no triggers")  # Engine only calls it with a prefilter


class Scrubber:
    """Detect and scrub identifiers in short texts. Build once (loads name and place data).

    ``prechecks=False`` (keyword only) builds a scrubber without the pre-checks that decide which
    detectors to run: no digit count, digit-run lengths, cue words, trigger words, detector
    ``prefilter``/``wants`` or combined network check gates a detector. Only the text's character
    classes still do: a text of letters and spaces runs the word detectors alone, the e-mail
    detector needs an ``@`` and the network detectors a ``.``, ``:`` or ``-``. It finds exactly what
    the default scrubber finds (the pre-checks are necessary conditions; tests compare the two),
    only slower. The default path is not touched by the switch. ``prefilter=False`` keeps the pre-checks but not
    the one-pass trigger match (:mod:`.prefilter`) that replaces them on ASCII texts: the same findings again.
    """

    detect: Callable[[str], list[Span]]
    """Non-overlapping spans of a text, in text order (longer spans win; then the detector's priority)."""
    scrub: Callable[[str], tuple[str, dict[str, int]]]
    """The scrubbed text and the count of identifiers found per type (never the values)."""

    def __init__(
        self,
        config: HipaaScrubConfig | None = None,
        *,
        prechecks: bool = True,
        prefilter: bool = True,
        keys: OperatorKeys | None = None,
    ) -> None:
        cfg = config or HipaaScrubConfig()
        self.prechecks = prechecks
        self.policies = cfg.policy_map()
        if keys is None and KEYED.intersection(self.policies.values()):
            raise ValueError("the hash and encrypt policies need the operator keys")
        self.keys = keys
        #: least confidence per type (types without one keep every finding)
        self.thresholds = {k: v for k, v in (cfg.thresholds or {}).items() if v > 0.0}
        self._build_detectors(cfg)
        # bound methods and gates looked up once (:mod:`.plans`): the per-query loop does no attribute lookups
        self._digit_by_count: list[RunsPlan] = digit_plans(self.digit)
        # the fewest digits a last resort's span has (see _covered)
        self._token_digits = min((d.TOKEN_DIGITS or 0 for d in self.digit if d.TOKEN_DIGITS is not None), default=0)
        # those plans without the detectors whose RUNS a text lacks, by the lengths of the text's digit
        # runs: few distinct keys occur, so the filtering is done once per key (the cache is bounded)
        self._plan_cache: dict[tuple[int, ...], tuple[DigitPlan, frozenset[int]]] = {}
        self._net_plan: list[tuple[PreCheck, Run]] = [(d.prefilter, d.detect) for d in self.net]
        self._alpha_plan, self._alpha_words, self._alpha_gated = alpha_plans(self.alpha)
        # one combined pre-check: most queries have none of these
        self.netcheck = re.compile(r"[.:]\S|-[0-9a-f]{2}-", re.IGNORECASE)
        #: the digit, e-mail and network detectors' triggers in one set (None: no prefilter, the pre-checks decide)
        self.prefilter = Prefilter(self.digit, [*self.at, *self.net]) if prefilter and prechecks else None
        if not prechecks:
            self._drop_prechecks()
        self._build_engine()

    def _build_detectors(self, cfg: HipaaScrubConfig) -> None:
        """The detectors the policies want, by what a text needs for them: digits, an ``@``, network
        punctuation, letters."""
        geo = load_geo()
        big_places = [
            name
            for (name, _), pop in geo.cities.items()
            if cfg.city_keep_population is not None and pop > cfg.city_keep_population and " " in name
        ]
        digit: list[Detector] = [
            SsnDetector(),
            PhoneDetector(),
            NationalPhoneDetector(),
            CardDetector(),
            ZipDetector(),
            LongNumberDetector(),
            DateDetector(),
            AgeDetector(),
            ContextNumberDetector(),
            VinDetector(),
            CuedVinDetector(),
            MbiDetector(),
            PlateDetector(common_words(5.0)),
            AddressDetector(load_geo(), common_words()),
        ]
        self.digit = [d for d in digit if self._wanted(d)]
        self.at = [d for d in (EmailDetector(),) if self._wanted(d)]
        self.net = [
            d for d in (IpDetector(), MacDetector(), UrlDetector(cfg.bare_domains, cfg.url_paths)) if self._wanted(d)
        ]
        alpha: list[Detector] = [
            NameDetector(
                load_names(),
                cfg.name_threshold,
                cfg.name_cue_threshold,
                cfg.allow_names,
                big_places,
                not_last=geo.countries | {n for n in geo.state_names.values() if " " not in n},
                public=public_names() if cfg.names == "private" else frozenset(),
            ),
            PlaceDetector(geo, cfg.city_keep_population, common_words()),
            SerialDetector(),
        ]
        self.alpha = [d for d in alpha if self._wanted(d)] + [CustomDetector(r) for r in cfg.recognizers]

    def _drop_prechecks(self) -> None:
        """Replace the plans built above by ones that run every detector ungated (``prechecks=False``)."""
        everything: RunsPlan = ([], [], [(ANY_RUNS, d.detect) for d in self.digit], [])
        self._digit_by_count = [everything] * len(self._digit_by_count)
        self._plan_cache.clear()
        self._net_plan = [(any_text, d.detect) for d in self.net]
        self._alpha_plan = [(None, any_words, d.detect) for d in self.alpha]
        self._alpha_words = None
        self.netcheck = re.compile("")

    def _plan_for(self, lengths: tuple[int, ...]) -> tuple[DigitPlan, frozenset[int]]:
        """:func:`~filters.hipaa_scrub.plans.plan_for`, kept in the bounded cache."""
        planned = plan_for(self._digit_by_count, lengths)
        if len(self._plan_cache) < _PLAN_CACHE_SIZE:
            self._plan_cache[lengths] = planned
        return planned

    def _wanted(self, d: Detector) -> bool:
        return any(self.policies[k] != "keep" for k in d.KINDS) or all(k not in self.policies for k in d.KINDS)

    def _build_engine(self, engine: type[Engine] | None = None) -> None:
        """The per-query loop (:mod:`.engine`; ``engine``: another build of its class, for the tests) over the plans
        built above."""
        pre = self.prefilter
        self.engine = (engine or _Engine)(
            alpha_words=self._alpha_words,
            alpha_plan=self._alpha_plan,
            alpha_gated=self._alpha_gated,
            match=None if pre is None else pre.match,
            plans={} if pre is None else pre.plans,
            plan_for=_no_plan if pre is None else pre.plan_miss,
            general=self._general,
            token_digits=self._token_digits,
            thresholds=self.thresholds,
            policies=self.policies,
            replacement=self._replacement,
            screen_hosts=outside_hosts,
        )
        # the engine's own methods, called without a frame of this class in between
        self.detect = self.engine.detect
        self.scrub = self.engine.scrub

    def __getstate__(self) -> dict[str, object]:
        """Pickled without the engine (a compiled one does not pickle): :meth:`__setstate__` builds it again."""
        return {k: v for k, v in self.__dict__.items() if k not in ("engine", "detect", "scrub")}

    def __setstate__(self, state: dict[str, object]) -> None:
        self.__dict__.update(state)
        self._build_engine()

    def _general(self, text: str) -> list[Span]:
        """:meth:`detect` of what the engine's loop leaves to the pre-checks: non-ASCII texts, and ASCII texts of
        other characters than letters and spaces when there is no prefilter."""
        lower = text.lower()
        digit_runs: list[bytes] | list[str]
        ascii_text = text.isascii()
        if ascii_text:
            raw = lower.encode()
            letters = raw.translate(_KEEP_LETTERS)
            alpha = letters == raw  # letters and spaces only (one translate tests it and gives the words below)
            words = lower.split() if alpha else letters.decode().split()
        else:
            alpha = text.replace(" ", "").isalpha()
            words = _WORDS.findall(lower)
        engine = self.engine
        if alpha:
            # letters and spaces only: no digit, @ or network detector can match
            found: list[Span] = []
            engine.word_detectors(text, lower, words, found)
            if found and self.thresholds:
                found = engine.screen(lower, found)
            return found if len(found) <= 1 else resolve(found)
        digit_runs = raw.translate(_KEEP_DIGITS).split() if ascii_text else _RUNS.findall(text)
        found = []
        runs: frozenset[int] = _NO_RUNS
        last: list[tuple[PreCheck | None, Run]] = []
        if digit_runs:
            lens = tuple(map(len, digit_runs))
            cached = self._plan_cache.get(lens)
            if cached is None:
                cached = self._plan_for(lens)
            plan, runs = cached
            by_words, by_check, ungated, last = plan
            for cue_words, run in by_words:
                if not cue_words.isdisjoint(words):
                    run(text, lower, found)
            for prefilter, run in by_check:
                if prefilter(text, lower, words, runs):
                    run(text, lower, found)
            for run in ungated:
                run(text, lower, found)
        if "@" in text:
            for d in self.at:
                d.detect(text, lower, found)
        if ("." in text or ":" in text or "-" in text) and self.netcheck.search(text):
            for prefilter, run in self._net_plan:
                if prefilter(text, lower, words, runs):
                    run(text, lower, found)
        engine.word_detectors(text, lower, words, found)
        if last and not (found and ascii_text and engine.covered(lower, found, sum(lens))):
            for resort_check, run in last:
                if resort_check is None or resort_check(text, lower, words, runs):
                    run(text, lower, found)
        if found and ("." in lower or "<" in lower or self.thresholds):
            found = engine.screen(lower, found)
        return found if len(found) <= 1 else resolve(found)

    def screen(self, lower: str, found: list[Span]) -> list[Span]:
        """``found`` without findings inside a hostname or a token this filter wrote (:mod:`.hosts`) and without
        those below their type's confidence threshold."""
        return self.engine.screen(lower, found)

    def _covered(self, lower: str, found: list[Span], digits: int) -> bool:
        """:meth:`.engine.Engine.covered`: True when no last-resort detector can change the outcome."""
        return self.engine.covered(lower, found, digits)

    def apply(self, text: str, spans: list[Span], counts: dict[str, int], count_kept: bool = True) -> str:
        """Apply each span's policy (:mod:`.operators`); whitespace is tidied where something was removed."""
        return self.engine.apply(text, spans, counts, count_kept)

    def _replacement(self, text: str, s: Span) -> str | None:
        """What the span's policy writes in its place (None: keep the text)."""
        policy = self.policies[s.kind]
        if policy == "remove":
            return s.residue
        if policy == "keep":
            return None
        if policy == "generalize" and s.general is not None:
            return s.general
        if policy == "generalize":
            return s.residue
        if policy == "mask":
            return mask(text[s.start : s.end])
        if policy == "replace":
            token = TOKENS.get(s.kind) or "[" + s.kind.upper() + "]"
        else:
            assert self.keys is not None  # checked at build
            value = text[s.start : s.end]
            make = hash_token if policy == "hash" else encrypt_token
            token = make(self.keys, s.kind, value)
        return token + (" " + s.residue if s.residue else "")

    def explain(self, text: str) -> tuple[str, list[dict[str, object]]]:
        """:func:`.explain.explain`: the scrubbed text and one record per finding (never the values)."""
        return explain(self, text)
