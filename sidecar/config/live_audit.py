"""The ``live_audit:`` block: the running audit ``serve`` keeps of what it releases (:mod:`sidecar.liveaudit`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sidecar.api import option


@dataclass(frozen=True)
class LiveAuditConfig:
    """The running audit of ``serve``, exported on /metrics (docs/OPERATIONS.md, Live audit): re-created (user,
    query) pairs, identifiers in and out, a sampled linkage estimate. Memory and CPU are bounded by the sizes
    below; nothing it keeps is a text or an id (keyed hashes with a per-process random key)."""

    enabled: Literal["auto", "on", "off"] = option(
        "auto",
        "auto: on when metrics_listen is set (the audit's only output is /metrics; without it the audit would cost "
        "and tell nobody); on; off. Only `serve` runs it.",
    )
    cpu_share: float = option(
        0.02,
        "Share of the sidecar's CPU time (all its threads) the audit may spend: whole batches are audited (in and "
        "out) while the share lasts, the others pass unaudited. 1: every batch.",
        gt=0,
        max=1,
    )
    window_pairs: int = option(
        200_000, "Input (user, query) pairs remembered (8-byte keyed hashes) to find a released pair.", min=1
    )
    window_seconds: float = option(3600.0, "Seconds an input pair is remembered (and at most window_pairs).", gt=0)
    reservoir_users: int = option(
        1000, "Users in the linkage sample (Algorithm R over distinct users, CSPRNG).", min=1, max=100_000
    )
    queries_per_user: int = option(64, "Distinct queries remembered per sampled user (keyed hashes).", min=1, max=1024)
    candidates_per_user: int = option(
        16, "Released user ids tracked per sampled user (the least overlapping one is replaced).", min=2, max=256
    )
    min_overlap: int = option(
        3,
        "Distinct queries a sampled user must have released under one id for the linkage estimate to judge it; a "
        "user is linked when one released id holds more than half of them and more than any other id.",
        min=1,
    )
    refresh_seconds: float = option(30.0, "How often the linkage estimate is recomputed (at a scrape).", gt=0)
    seen_users_bits: int = option(
        1 << 23,
        "Bits of the filter that tells a new user from one seen (1 MiB; false positives skip a new user).",
        min=1024,
    )
    detector: str | None = option(
        "hipaa_scrub",
        "A filter offering an identifier detector, run on a sample of queries in and out (null: no scan).",
    )
    scan_per_second: float = option(
        100.0, "Queries the detector scans per second at most, each side (in, out), within cpu_share.", gt=0
    )
    k: int = option(
        5,
        "The k behind the linkage reference 1/k for a chain without category_buffer (with one: its smallest "
        "current k).",
        min=1,
    )
