"""Behaviour tests as data: each ``tests/behavior/*.yaml`` is a chain, input records and the records that must
come out, run through the runtime (:class:`~sidecar.pipeline.Pipeline`) the way every source feeds it
(``Runtime.receive`` of a :class:`~sidecar.api.RecordBatch`), with no sink: what came out is each delivered
event encoded with its own codec. A final ``flush(final=True)`` (committed) follows, as at shutdown, for the
chains that buffer.

A case file holds (unknown keys are an error):

``description``
    What behaviour the case pins, and why the expected records are what the product should write (from the
    filters' documentation, not from a run).
``config``
    The name of a ready config in ``config/`` (``k-anonymity``), or an inline config mapping. Its ``sources`` and
    ``sinks`` are left out; ``state_dir`` is a temporary folder; a filter with a ``kb_path`` option gets the test
    session's knowledge base.
``overrides``
    Optional, applied on top: top-level keys replace the config's, except ``filters``, a mapping
    ``{filter name: {option: value}}`` merged into that filter's options.
``seed``
    The runtime's seed (default 7): a random filter then draws the same way every run.
``env``
    Environment variables for the run (an HMAC key).
``format``
    ``tsv`` (the first input line is the header) or ``jsonl``.
``batch_size``
    Records per ``receive`` call (default: all in one batch).
``input``, ``output``
    The records in, and the records that must come out, in order, one per line (TSV: ``output`` has no header
    line; ``\\t`` is written as a real tab in a YAML block, or use a ``"..."`` string with ``\\t``).
``dead_letters``
    ``{reason: count}`` of the records dead-lettered (default: none).
``held``
    Events a buffering filter still holds at the end (default 0).
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ROOT
from helpers.kb import kb_file

from sidecar.api import FILTERS, Codec, RecordBatch
from sidecar.codecs import codec_for
from sidecar.config import load_config
from sidecar.pipeline import Pipeline
from sidecar.registry import plugins

HERE = Path(__file__).parent
CASES = sorted(HERE.glob("*.yaml"))
KEYS = {
    "description",
    "config",
    "overrides",
    "seed",
    "env",
    "format",
    "batch_size",
    "input",
    "output",
    "dead_letters",
    "held",
}
REQUIRED = {"description", "config", "format", "input", "output"}


def lines(text: str | None) -> list[str]:
    """The records of an ``input``/``output`` block (a final newline ends the last one, it adds none)."""
    if not text:
        return []
    return text[:-1].split("\n") if text.endswith("\n") else text.split("\n")


def load_case(path: Path) -> dict[str, Any]:
    case = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert isinstance(case, dict), f"{path.name}: a case is a mapping"
    assert not set(case) - KEYS, f"{path.name}: unknown keys {sorted(set(case) - KEYS)} (allowed: {sorted(KEYS)})"
    assert not REQUIRED - set(case), f"{path.name}: missing {sorted(REQUIRED - set(case))}"
    assert case["format"] in ("tsv", "jsonl", "access_log"), f"{path.name}: format is tsv, jsonl or access_log"
    return case


def chain_config(case: dict[str, Any], folder: Path) -> Path:
    """The case's config, with its overrides, as a file in ``folder`` (state in ``folder/state``, no sources or
    sinks, the session's knowledge base)."""
    base = case["config"]
    if isinstance(base, str):
        body = yaml.safe_load((ROOT / "config" / f"{base}.yaml").read_text(encoding="utf-8"))
    else:
        body = dict(base)
    overrides = dict(case.get("overrides") or {})
    per_filter = overrides.pop("filters", None) or {}
    body.update(overrides)
    body.pop("sources", None)
    body.pop("sinks", None)
    body["state_dir"] = str(folder / "state")
    filters = body.get("filters") or []
    names = [next(iter(entry)) for entry in filters]
    assert set(per_filter) <= set(names), f"overrides for filters not in the chain: {set(per_filter) - set(names)}"
    for entry in filters:
        ((name, options),) = entry.items()
        options = dict(options or {}, **per_filter.get(name, {}))
        if "kb_path" in {f.name for f in dataclasses.fields(plugins(FILTERS)[name].Config)}:
            options.setdefault("kb_path", str(kb_file()))
        entry[name] = options
    path = folder / "chain.yaml"
    path.write_text(yaml.safe_dump(body, sort_keys=False), encoding="utf-8")
    return path


def run(case: dict[str, Any], folder: Path) -> tuple[list[str], Counter[str], int]:
    """The case through the runtime: the records out (encoded), dead letters by reason, events still held."""
    cfg = load_config(chain_config(case, folder))
    records = lines(case["input"])
    pipeline = Pipeline(cfg, seed=case.get("seed", 7))
    if case["format"] == "access_log":  # a plugin's text format: the runtime's codec of that name
        codec: Codec | None = pipeline.ctx.codec_for("access_log")
        assert codec is not None
    else:
        codec = codec_for(dataclasses.replace(cfg.sidecar.schema, format=case["format"]), None)
    if case["format"] == "tsv":
        codec.accept_header(records.pop(0))
    size = case.get("batch_size") or max(1, len(records))
    out: list[str] = []
    reasons: Counter[str] = Counter()
    try:
        for start in range(0, len(records), size):
            chunk = records[start : start + size]
            positions = range(start + 1, start + 1 + len(chunk))
            receipt = pipeline.receive(RecordBatch(chunk, codec, "behavior", positions))
            out += [ev.codec.encode(ev) for ev in receipt.delivered if ev.codec is not None]
            reasons += receipt.reasons
        with pipeline.transaction(check_outbox=False):  # shutdown: what a buffering filter lets go at the end
            released = pipeline.flush(final=True)
        out += [ev.codec.encode(ev) for ev in released if ev.codec is not None]
        held = pipeline.held()
    finally:
        pipeline.close()
    return out, reasons, held


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_behavior(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain writes exactly the expected records, dead-letters what is expected, and holds what it should."""
    case = load_case(path)
    for name, value in (case.get("env") or {}).items():
        monkeypatch.setenv(name, str(value))
    out, reasons, held = run(case, tmp_path)
    assert out == lines(case["output"])
    assert dict(reasons) == dict(case.get("dead_letters") or {})
    assert held == case.get("held", 0)


def test_every_ready_chain_has_a_behavior_case() -> None:
    """Each ready config of config/ is pinned by at least one case."""
    ready = {p.stem for p in (ROOT / "config").glob("*.yaml")}
    covered = {c for c in (load_case(p)["config"] for p in CASES) if isinstance(c, str)}
    assert ready <= covered, f"ready chains without a behaviour case: {sorted(ready - covered)}"
