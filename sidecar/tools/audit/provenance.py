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
    """Everything that identifies the audited run: both logs, the config (its text) or parameters, when, what;
    with a config, the ids of the keys its ``pseudonymize`` filters use (``pseudonymize_keys``; never a key)."""
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
        keys = pseudonymize_keys(out["config"]["text"])
        if keys:
            out["pseudonymize_keys"] = keys
    return out


def pseudonymize_keys(config_text: str) -> list[dict[str, Any]]:
    """Per ``pseudonymize`` filter of the chain: the id of the key in use (the last of ``keys``, else ``key_id``,
    else the variable's or file's name, as the filter says), every configured id and the rotation (``none``,
    ``daily``, ``weekly``: the period is the UTC day or ISO week of each event's time). Ids only: the config
    names variables and files, never a key."""
    out: list[dict[str, Any]] = []
    for name, options in chain_filters(config_text):
        if name != "pseudonymize":
            continue
        keys = options.get("keys")
        if isinstance(keys, list) and keys:
            ids = [str(k.get("id")) if isinstance(k, dict) else "?" for k in keys]
        else:
            single = options.get("key_id") or options.get("key_env") or Path(str(options.get("key_file") or "")).name
            ids = [str(single)]
        out.append({"key_id": ids[-1], "key_ids": ids, "rotate": str(options.get("rotate", "none"))})
    return out


def release_k(params: dict[str, str] | None, config_text: str | None, default: int = 5) -> tuple[int, str]:
    """The release's k and where it comes from: ``--params k=``, else the smallest base ``k`` of the config's
    ``category_buffer`` filters, else ``default`` (paper 001's k)."""
    if params and "k" in params:
        return int(params["k"]), "--params"
    ks = []
    for name, options in chain_filters(config_text) if config_text is not None else []:
        value = options.get("k", default) if name == "category_buffer" else None
        if isinstance(value, int) and not isinstance(value, bool) and value >= 2:
            ks.append(value)
    if ks:
        return min(ks), "the config's category_buffer k"
    return default, "the default"


def chain_filters(config_text: str) -> list[tuple[str, dict[str, Any]]]:
    """The filters of a config's chain, in order, with their options (read from its YAML; an unknown
    layout gives [])."""
    import yaml

    try:
        data = yaml.safe_load(config_text)
    except yaml.YAMLError:
        return []
    items = data.get("filters") if isinstance(data, dict) else None
    out: list[tuple[str, dict[str, Any]]] = []
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict):
            out.extend((str(k), v if isinstance(v, dict) else {}) for k, v in item.items())
        elif isinstance(item, str):
            out.append((item, {}))
    return out


def hold_or_drop(name: str, options: dict[str, Any]) -> str | None:
    """What a filter of the chain holds or drops, in words (from its options; defaults as documented)."""
    if name == "category_buffer":
        k, policy = options.get("k", 5), options.get("max_hold", "hold")
        return (
            f"category_buffer holds each event until its category's buffer has k = {k} events of more than one "
            f"user (paper 001 Algorithm 2); a category that stays below k is handled by max_hold: {policy}; "
            f"unknown: {options.get('unknown', 'bucket')}"
        )
    if name == "hipaa_scrub":
        emptied = options.get("emptied", "keep")
        what = {"drop": "drops it (dropped_emptied_query)", "token": "writes a token instead"}.get(
            emptied, "keeps it with an empty query"
        )
        return f"hipaa_scrub: a query scrubbed to nothing — emptied: {emptied} {what}"
    if name == "dp_replace":
        return (
            "dp_replace suppresses a user's queries once their epsilon is spent and handles a query with no "
            f"concept by no_concept: {options.get('no_concept', 'drop')} (counts in the budget ledger: --dp-state)"
        )
    if name == "drop":
        return "drop removes the records its rules match"
    return None


def events_accounting(result: dict[str, Any]) -> dict[str, Any]:
    """Records missing from or added to the protected log, and what can explain them (from the counts and
    the chain's filters when a config was given; the logs alone cannot tell held from dropped)."""
    n_o, n_p = result["records_original"], result["records_protected"]
    prov = result.get("provenance", {})
    chain = chain_filters(prov["config"]["text"]) if "config" in prov else []
    filters = [name for name, _ in chain]
    reasons = [text for name, options in chain if (text := hold_or_drop(name, options)) is not None]
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
