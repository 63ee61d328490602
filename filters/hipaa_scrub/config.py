"""Options of ``hipaa_scrub``: which fields are scrubbed and what happens to each identifier type."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from filters.hipaa_scrub.detectors import GENERALIZABLE, KINDS
from sidecar.api import ROLES, ConfigValueError, FilterConfig, option

Policy = Literal["remove", "replace", "generalize", "keep"]
POLICIES: tuple[str, ...] = ("remove", "replace", "generalize", "keep")


@dataclass(frozen=True)
class HipaaScrubConfig(FilterConfig):
    """Options of ``hipaa_scrub``."""

    fields: tuple[str, ...] = option(
        ("query",), "Roles scrubbed (query text by default; also e.g. url for click-URL paths)."
    )
    default_policy: Policy = option("remove", "Policy of every type not named in `policies`.")
    policies: Mapping[str, Policy] | None = option(
        None,
        "Per-type policy: remove | replace ([TYPE] token) | generalize (zip, date, age, city, county, url) | keep. "
        f"Types: {', '.join(KINDS)}.",
    )
    city_keep_population: int | None = option(
        20000, "Cities and towns with more people than this are not identifiers (null: scrub every city).", min=0
    )
    bare_domains: Literal["keep", "scrub"] = option(
        "keep", "A bare domain (`myspace.com`) is a navigational query: keep it, or scrub it as a URL."
    )
    url_paths: Literal["personal", "all"] = option(
        "personal", "URL paths scrubbed: those that look personal (profiles, user names, ids), or all."
    )
    name_threshold: float = option(
        1.5, "log10 odds (census name vs ordinary words) a first+last pair needs to count as a name."
    )
    name_cue_threshold: float = option(0.5, "Same, when the query has a person cue (obituary, funeral, mr...).")
    allow_names: tuple[str, ...] = option((), "Extra `first last` phrases never treated as names (brands).")
    names: Literal["private", "all"] = option(
        "private",
        "Person names scrubbed: `private` keeps the names of public figures and brands (the classifier's curated "
        "terms, WordNet's people shared by few, a built-in list), `all` scrubs every person name. Default private: "
        "a searcher's own name is the re-identification vector (AOL 2006), a film star's is a topic.",
    )
    emptied: Literal["keep", "drop", "token"] = option(
        "keep",
        "An event whose query is empty after scrubbing (the scrubber removed it all, or it came empty): "
        "keep it with its empty query (the log keeps its size), drop it (counted as dropped_emptied_query), "
        "or replace the query by `emptied_token`.",
    )
    emptied_token: str = option(
        "[REMOVED]", "The query written for an emptied one with `emptied: token` (not empty, no tab or line break)."
    )

    def __post_init__(self) -> None:
        token = self.emptied_token
        if not token.strip() or any(c in token for c in "\t\r\n"):
            raise ConfigValueError("emptied_token", "must hold a visible character and no tab or line break")
        for f in self.fields:
            if f not in ROLES:
                raise ConfigValueError("fields", f"unknown role {f!r}", ROLES)
        if not self.fields:
            raise ConfigValueError("fields", "must name at least one role", ROLES)
        for kind, policy in (self.policies or {}).items():
            if kind not in KINDS:
                raise ConfigValueError(f"policies.{kind}", "unknown identifier type", KINDS)
            if policy == "generalize" and kind not in GENERALIZABLE:
                raise ConfigValueError(
                    f"policies.{kind}", f"type {kind} has no generalize policy", ("remove", "replace", "keep")
                )
        if self.default_policy == "generalize":
            raise ConfigValueError(
                "default_policy",
                "generalize applies to some types only: name it per type in policies",
                ("remove", "replace", "keep"),
            )

    def policy_map(self) -> dict[str, str]:
        """The policy of every type."""
        out: dict[str, str] = dict.fromkeys(KINDS, self.default_policy)
        out.update(self.policies or {})
        return out
