"""``hipaa_scrub``: remove or generalize the HIPAA Safe Harbor identifiers in query text.

45 CFR 164.514(b)(2)(i) (A)-(R) as they apply to query text and other record
fields: names, street addresses, small towns and counties, ZIP codes, dates of a
person and ages over 89, phone and fax numbers, emails, SSNs, medical record,
health plan, account, card, certificate/license numbers, vehicle plates and VINs,
device serials (IMEI), MAC and IP addresses, personal URLs and other long
identifying numbers. (P) biometrics and (Q) photographs cannot occur in
text. Policies per type: remove (default), replace (``[PHONE]``),
generalize (ZIP -> 3 digits or 000, date -> year, age -> 90+, city -> state,
URL -> host), keep. The event gets ``scrub_counts`` (per-type counts, never
values). Scrubbing is idempotent.

**Emptied queries.** A query made only of identifiers is scrubbed to nothing
(``555-123-4567``, ``john smith``). ``emptied`` decides what becomes of an event
whose query is empty (nothing but spaces) after this filter, whether scrubbing
emptied it or it arrived empty (an empty query is a valid record: no codec
dead-letters it):

* ``keep`` (default): the event goes on with its empty query; the log keeps its
  size and every record, and no later filter or consumer may assume a query has
  a word (``classify`` gives it no category).
* ``drop``: the event is dropped. An empty query carries no content, but its
  user, time and query-side fields (rank, clicked URL) still do: released, it
  still tells who searched when.
* ``token``: the query becomes ``emptied_token`` (``[REMOVED]``), for consumers
  that cannot take an empty query field; the token is stable under scrubbing.

Counts: ``emptied_query`` (queries scrubbing emptied), ``empty_query`` (queries
that arrived empty), and by outcome ``dropped_emptied_query`` /
``replaced_emptied_query`` (either kind). ``querylog scrub`` is line for line and
ignores ``emptied``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from filters.hipaa_scrub.config import HipaaScrubConfig
from filters.hipaa_scrub.operators import KEYED, OperatorKeys
from filters.hipaa_scrub.scrubber import Scrubber
from sidecar.api import BuildContext, ConfigValueError, Event, Filter

NAME = "hipaa_scrub"
MEMO_SIZE = 400_000
"""Distinct texts whose scrubbed form the filter remembers (the text and, for the few it changes, the scrubbed
one: about 100 bytes each, 40 MB when full). Sized for a first pass and the replay of an archive of a few
hundred thousand distinct queries (a generated 20,000-user log has 150,000): cleared when full, so a smaller
memo would be emptied before the replay reached the texts the first pass scrubbed."""
_UNCHANGED: tuple[None, dict[str, int]] = (None, {})
"""The memo's entry for a text the scrubber leaves as it is (most texts): one shared tuple."""


class HipaaScrubFilter(Filter[HipaaScrubConfig]):
    """Remove or generalize HIPAA Safe Harbor identifiers in the configured fields."""

    NAME = NAME
    Config = HipaaScrubConfig
    SUMMARY = "remove/replace/generalize HIPAA Safe Harbor identifiers in query text and chosen fields"

    def __init__(self, config: HipaaScrubConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.scrubber = Scrubber(config, keys=operator_keys(config, ctx))
        #: scrubbed text and counts per distinct text (a log repeats its queries: the scrubber is
        #: deterministic, so a repeated text costs one dict look-up); cleared when it reaches MEMO_SIZE
        self._memo: dict[str, tuple[str | None, dict[str, int]]] = {}

    def _scrub(self, value: str) -> tuple[str | None, dict[str, int]]:
        """:meth:`Scrubber.scrub`, remembered: (None, {}) for a text left as it is (the counts dict is shared:
        read it, never change it)."""
        memo = self._memo
        hit = memo.get(value)
        if hit is None:
            new, counts = self.scrubber.scrub(value)
            hit = _UNCHANGED if new == value and not counts else (new, counts)
            if len(memo) >= MEMO_SIZE:
                memo.clear()
            memo[value] = hit
        return hit

    def process(self, batch: list[Event]) -> list[Event]:
        scrub = self._scrub
        fields = self.config.fields
        counts = self.counts
        emptied = self.config.emptied
        out: list[Event] = []
        for ev in batch:
            query = ev.query
            arrived_empty = _empty(query)
            found: dict[str, int] | None = None
            for role in fields:
                value = query if role == "query" else getattr(ev, role)
                if not isinstance(value, str) or not value:
                    continue
                new, c = scrub(value)
                if new is None:  # left as it is
                    continue
                if c:
                    if found is None:
                        found = dict(c)
                    else:
                        for kind, k in c.items():
                            found[kind] = found.get(kind, 0) + k
                if new != value:
                    setattr(ev, role, new)
                    counts[f"changed_{role}"] += 1
            if found:
                ev.annotate("scrub_counts", found)
                for kind, n in found.items():
                    counts[f"found_{kind}"] += n
            if arrived_empty or (found and _empty(ev.query)):
                counts["empty_query" if arrived_empty else "emptied_query"] += 1
                if emptied == "drop":
                    counts["dropped_emptied_query"] += 1
                    continue
                if emptied == "token":
                    ev.query = self.config.emptied_token
                    counts["replaced_emptied_query"] += 1
            out.append(ev)
        return out

    @classmethod
    def identifier_detector(cls) -> Callable[[str], Mapping[str, int]]:
        """The Safe Harbor detectors with the default options (every type), counting what a text holds by type:
        the live audit's scan of queries in and out (``live_audit.detector: hipaa_scrub``)."""
        detect = Scrubber(HipaaScrubConfig()).detect

        def count(text: str) -> Mapping[str, int]:
            found: dict[str, int] = {}
            for span in detect(text):
                found[span.kind] = found.get(span.kind, 0) + 1
            return found

        return count


def operator_keys(config: HipaaScrubConfig, ctx: BuildContext) -> OperatorKeys | None:
    """The keys of the hash and encrypt policies, from the configured secret; None when no policy needs them."""
    if not KEYED.intersection(config.policy_map().values()):
        return None
    if "encrypt" in config.policy_map().values():
        try:
            import cryptography.hazmat.primitives.ciphers.aead  # noqa: F401  # AES-SIV of the encrypt policy
        except ImportError:
            raise ConfigValueError("policies", "the encrypt policy needs the cryptography package") from None
    secret = ctx.secret(config.key_env, config.key_file, "hipaa_scrub secret")
    try:
        return OperatorKeys.derive(secret, config.operator_key_id())
    except ValueError as exc:
        raise ConfigValueError("key_env" if config.key_env else "key_file", str(exc)) from None


def _empty(query: object) -> bool:
    """True for a query with no content: None, or a string of nothing but spaces."""
    return query is None or (isinstance(query, str) and not query.strip())


__all__ = ["NAME", "HipaaScrubConfig", "HipaaScrubFilter", "Scrubber"]
