"""Options of ``category_buffer``.

Privacy consequences of the options that decide what leaves with what:

* ``user_roles`` / ``user_fields`` travel with the **user**: they stay with the
  sender in the output. Anything identifying the sender (an IP address, a
  session id, a cookie column) must be listed here, otherwise it travels with
  the query and links the query back to its true sender — which undoes the
  re-pairing. AOL default: only ``AnonID`` (role ``user``).
* Every other role and record field travels with the **query** (AOL: ``Query``,
  ``ItemRank``, ``ClickURL``). A clicked URL or rank stays with its query, which
  keeps the record internally consistent; it also means a URL that names its
  clicker identifies the *query's* sender, not the output user — scrub URLs
  (``truncate_url``/``hipaa_scrub``) before this filter.
* ``time``: ``release`` (default) writes the time value of the event whose
  arrival triggered the release, so output time order is release order and a
  record's time tells only when its category buffer filled. ``query`` keeps the
  query's original time: more utility for time analyses, but paper 001's
  de-anonymizers use time order, and an attacker who knows when someone was
  searching (sessions, time zones) can link a query to its true sender through
  it. ``user`` keeps the time of the user's own (different) query: it ties the
  output user's activity pattern to the record but reveals the sender's timing
  of another query.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from sidecar.api import ROLES, ConfigValueError, FilterConfig, option

MAX_K_FACTOR = 64
"""``max_k: null`` is this many times the bucket's base k: held events stay below 64 x k per bucket (5,440
events for the 17 level-1 buckets at k = 5, a few MB), while an archive's ordinary runs of one user in one
category stay below it and are not suppressed."""


@dataclass(frozen=True)
class CategoryBufferConfig(FilterConfig):
    """Options of ``category_buffer``."""

    k: int = option(5, "Base k: a category releases one event once it holds k (paper 001 default 5).", min=2)
    delta: float = option(
        1.2, "When no valid pair exists at k (one user only), k becomes ceil(k*delta) (paper 001: 1.2).", gt=1.0
    )
    max_k: int | None = option(
        None,
        "Largest value k grows to: ceil(k*delta) stops there; null: 64 x the bucket's base k. A bucket at max_k "
        "that still has no valid pair applies max_k_policy. Must be >= k, every k_per_category and min_users.",
        min=2,
    )
    max_k_policy: Literal["suppress", "hold"] = option(
        "suppress",
        "A bucket at max_k that cannot release: `suppress` drops the excess (the oldest events of the users "
        "holding the most in that bucket, until it holds max_k - 1; counted as suppressed_max_k), so held events "
        "stay below max_k per bucket; `hold` keeps holding them and tries again once the bucket grew by delta "
        "(each failed try counted as held_at_max_k; only max_held bounds memory). Neither releases anything early.",
    )
    k_per_category: Mapping[str, int] | None = option(
        None, "Base k per bucket name (e.g. {Health: 10}); other buckets use k."
    )
    min_users: int | None = option(
        None,
        "Distinct users a bucket must hold before it releases (l-diversity); null: the bucket's base k. "
        "2 is paper 001's rule (one user other than the arriving one), which lets a query's anonymity set "
        "shrink to two users when users arrive one after another.",
        min=2,
    )
    user_draw: Literal["user", "slot"] = option(
        "user",
        "How the user is drawn: uniformly among the distinct users held (default), or among the held user "
        "slots (paper 001's multiset: heavy users drawn more often, which attackers 2-4 exploit).",
    )
    decay: bool = option(
        True,
        "After each release, an inflated k steps back toward its base (k = max(base, min(k-1, ceil(k/delta)))). "
        "false: k only grows, as in paper 001.",
    )
    level: int = option(
        1, "Taxonomy level of the buckets: 1 = the 16 ODP top-level categories (paper 001).", min=1, max=5
    )
    unknown: Literal["bucket", "drop"] = option(
        "bucket",
        "Events without a category: `bucket` holds them in their own `unknown` bucket (re-paired among "
        "themselves); `drop` counts and drops them (paper 001 discarded them).",
    )
    category_field: str | None = option(
        None,
        "Record field (TSV column / JSON key) to read the category from when the event has no "
        "`category` annotation (logs categorised upstream). null: annotation only.",
    )
    user_roles: tuple[Literal["user", "rank", "url"], ...] = option(
        ("user",), "Roles that travel with the user; the others travel with the query. Must include user."
    )
    user_fields: tuple[str, ...] = option(
        (), "Non-role record fields (TSV columns / JSON keys) that travel with the user (e.g. an IP column)."
    )
    time: Literal["release", "query", "user"] = option(
        "release", "What the time role becomes: the release time, the query's time, or the user's time."
    )
    avoid_repeat_pairs: int = option(
        1_000_000,
        "Remember at least the last half of this many (user, query text) pairs (salted hashes, in memory "
        "only: about 50 bytes each) and never re-create one of them; 0: only pairs still buffered or in the "
        "current batch are avoided.",
        min=0,
    )
    max_hold: Literal["hold", "suppress", "merge"] = option(
        "hold",
        "A bucket below k: `hold` keeps it held (never released early); `suppress` drops events held longer "
        "than max_hold_seconds (counted); `merge` moves an overdue bucket into its parent bucket "
        "(level 1 -> one root bucket `*`).",
    )
    max_hold_seconds: float = option(86_400.0, "Age (wall clock) after which suppress/merge applies.", gt=0)
    max_held: int = option(
        1_000_000,
        "Safety valve on memory and disk: when more events are held, the oldest held event of the largest "
        "bucket is suppressed (counted as suppressed_overflow). Never releases early.",
        min=10,
    )

    def __post_init__(self) -> None:
        if "user" not in self.user_roles:
            raise ConfigValueError("user_roles", "must include user (the user id travels with the user)")
        for role in self.user_roles:
            if role not in ROLES:
                raise ConfigValueError("user_roles", f"unknown role {role!r}", ROLES)
        if self.k_per_category:
            for name, value in self.k_per_category.items():
                if isinstance(value, bool) or not isinstance(value, int) or value < 2:
                    raise ConfigValueError(f"k_per_category.{name}", f"must be an integer >= 2, got {value!r}")
        self._check_max_k()

    def max_k_of(self, base: int) -> int:
        """The largest k of a bucket whose base k is ``base``: ``max_k``, or 64 x ``base`` when null."""
        return self.max_k if self.max_k is not None else MAX_K_FACTOR * base

    def _check_max_k(self) -> None:
        """max_k is at least every base k, and at least min_users (else a bucket at max_k could never release)."""
        bases = [self.k, *(self.k_per_category or {}).values()]
        if self.max_k is not None and self.max_k < max(bases):
            raise ConfigValueError(
                "max_k", f"must be >= every base k (k, k_per_category): {max(bases)}, got {self.max_k}"
            )
        lowest = min(self.max_k_of(b) for b in bases)
        if self.min_users is not None and self.min_users > lowest:
            raise ConfigValueError(
                "min_users", f"must be <= max_k ({lowest}; null max_k is {MAX_K_FACTOR} x the base k)"
            )
