"""What an audit was run on: files (name, size, SHA-256), date, product version, config or parameters."""

from __future__ import annotations

import hashlib
import importlib.metadata
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

DIST = "querylog-sidecar"


class ParamsError(ValueError):
    """``--params`` is not a list of ``key=value`` pairs (the message names the item's position only)."""


def file_facts(path: str | Path) -> dict[str, Any]:
    """Name, resolved path, size in bytes and SHA-256 of a file."""
    p = Path(path)
    digest = hashlib.sha256()
    with p.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return {"name": p.name, "path": str(p.resolve()), "bytes": p.stat().st_size, "sha256": digest.hexdigest()}


def version() -> str:
    """The installed product version (``importlib.metadata``), or ``unknown`` outside an install."""
    try:
        return importlib.metadata.version(DIST)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def parse_params(text: str | None) -> dict[str, str]:
    """``method=mdav,k=3,seed=7`` -> ``{"method": "mdav", "k": "3", "seed": "7"}`` (the protection run's
    parameters as the operator states them; ``k`` must be an integer >= 2 when given)."""
    if not text:
        return {}
    out: dict[str, str] = {}
    for i, item in enumerate(text.split(","), 1):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ParamsError(f"--params item {i} is not key=value")
        out[key.strip()] = value.strip()
    if "k" in out and (not out["k"].isdigit() or int(out["k"]) < 2):
        raise ParamsError("--params k must be an integer of at least 2")
    return out


def provenance(
    original: str,
    protected: str,
    *,
    config_file: str | None = None,
    params: dict[str, str] | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Everything that identifies the audited run: both logs, the config (its text) or parameters, when, what."""
    out: dict[str, Any] = {
        "date": (now or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S UTC"),
        "product": DIST,
        "version": version(),
        "original": file_facts(original),
        "protected": file_facts(protected),
        "params": dict(params or {}),
    }
    if config_file is not None:
        out["config"] = file_facts(config_file) | {"text": Path(config_file).read_text(encoding="utf-8")}
    return out


HOLDS = {
    "category_buffer": "holds events in per-category buffers until k users fill one (paper 001 Algorithm 2)",
    "dp_replace": "suppresses a user's queries once their epsilon is spent; drops queries with no concept "
    "when no_concept: drop",
    "hipaa_scrub": "drops a record whose query scrubs to nothing when emptied: drop",
    "drop": "drops records matching its rules",
}


def chain_filters(config_text: str) -> list[str]:
    """The filter names of a config's chain, in order (read from its YAML; unknown layouts give [])."""
    import yaml

    try:
        data = yaml.safe_load(config_text)
    except yaml.YAMLError:
        return []
    items = data.get("filters") if isinstance(data, dict) else None
    names: list[str] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            names.extend(str(k) for k in item)
        elif isinstance(item, str):
            names.append(item)
    return names


def events_accounting(result: dict[str, Any]) -> dict[str, Any]:
    """Records missing from or added to the protected log, and what can explain them (from the counts and
    the chain's filters when a config was given; the logs alone cannot tell held from dropped)."""
    n_o, n_p = result["records_original"], result["records_protected"]
    prov = result.get("provenance", {})
    filters = chain_filters(prov["config"]["text"]) if "config" in prov else []
    reasons = [f"{name}: {HOLDS[name]}" for name in filters if name in HOLDS]
    if prov.get("params", {}).get("method") or result.get("microaggregation", {}).get("looks_microaggregated"):
        reasons.append(
            "microaggregation: every user gets their cluster's aggregated queries, whose number can differ from "
            "the user's own (paper 003 §3.2.3); no record is held"
        )
    return {
        "missing": max(0, n_o - n_p),
        "added": max(0, n_p - n_o),
        "users_missing": result.get("users_missing_in_protected", 0),
        "empty_queries_protected": result["empty_queries"]["protected"],
        "undecodable": result["undecodable_lines"],
        "filters": filters,
        "reasons": reasons,
    }
