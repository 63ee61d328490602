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
"""

from __future__ import annotations

from filters.hipaa_scrub.config import HipaaScrubConfig
from filters.hipaa_scrub.scrubber import Scrubber
from sidecar.api import BuildContext, Event, Filter

NAME = "hipaa_scrub"


class HipaaScrubFilter(Filter[HipaaScrubConfig]):
    """Remove or generalize HIPAA Safe Harbor identifiers in the configured fields."""

    NAME = NAME
    Config = HipaaScrubConfig
    SUMMARY = "remove/replace/generalize HIPAA Safe Harbor identifiers in query text and chosen fields"

    def __init__(self, config: HipaaScrubConfig, ctx: BuildContext) -> None:
        super().__init__(config, ctx)
        self.scrubber = Scrubber(config)

    def process(self, batch: list[Event]) -> list[Event]:
        scrub = self.scrubber.scrub
        fields = self.config.fields
        counts = self.counts
        out: list[Event] = []
        for ev in batch:
            found: dict[str, int] = {}
            for role in fields:
                value = getattr(ev, role)
                if not isinstance(value, str) or not value:
                    continue
                new, c = scrub(value)
                for kind, k in c.items():
                    found[kind] = found.get(kind, 0) + k
                if new != value:
                    setattr(ev, role, new)
                    counts[f"changed_{role}"] += 1
            if found:
                ev.annotate("scrub_counts", found)
                for kind, n in found.items():
                    counts[f"found_{kind}"] += n
            if self.config.drop_emptied and isinstance(ev.query, str) and not ev.query.strip():
                counts["dropped_emptied"] += 1
                continue
            out.append(ev)
        return out


__all__ = ["NAME", "HipaaScrubConfig", "HipaaScrubFilter", "Scrubber"]
