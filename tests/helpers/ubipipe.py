"""A runtime reading UBI records (``format: ubi``) into a file, for the join tests: its config, its input, what it
wrote and dead-lettered. The fixtures are the UBI spec's (tests/adapters/ubi/fixtures, written from the o19s/ubi
schema)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from helpers.kb import kb_file
from sidecar.api import RecordBatch
from sidecar.config import load_config
from sidecar.pipeline import Pipeline
from sidecar.textcodecs import text_codec

ROOT = Path(__file__).resolve().parents[2]

FIXTURES = Path(__file__).resolve().parents[1] / "adapters" / "ubi" / "fixtures"
QUERIES = (FIXTURES / "queries.jsonl").read_text(encoding="utf-8").splitlines()
EVENTS = (FIXTURES / "events.jsonl").read_text(encoding="utf-8").splitlines()


def write_config(folder: Path, filters: str, schema: str = "", out: str = "out.ubi") -> Path:
    """A config of ``format: ubi`` with the chain ``filters`` (YAML list items) and one file sink ``out``."""
    path = folder / "q.yaml"
    chain = "\n" + filters if filters else " []\n"
    path.write_text(
        "state_dir: state\ndead_letter_file: dead.jsonl\nlogging: {format: json}\n"
        f"schema:\n  format: ubi\n{schema}filters:{chain}sinks:\n  - file: {{path: {out}}}\n",
        encoding="utf-8",
    )
    return path


def feed(p: Pipeline, lines: list[str], batch: int = 50) -> None:
    """``lines`` into ``p`` by ``receive``, ``batch`` at a time."""
    codec = text_codec(p.config.sidecar.schema, None)
    for i in range(0, len(lines), batch):
        p.receive(RecordBatch(lines[i : i + batch], codec, "test", positions=list(range(i, i + batch))))


def output(folder: Path, name: str = "out.ubi") -> list[dict[str, Any]]:
    """The records the file sink wrote."""
    out = folder / name
    return [json.loads(x) for x in out.read_text(encoding="utf-8").splitlines()] if out.exists() else []


def dead(folder: Path) -> list[str]:
    """The reasons in the dead-letter file, in order."""
    path = folder / "state" / "dead.jsonl"
    return [json.loads(x)["reason"] for x in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def query_id(line: str) -> str:
    """The ``query_id`` of a UBI record line."""
    return str(json.loads(line)["query_id"])


def released_ok(lines: list[str]) -> Counter[str]:
    """The invariant on a released stream, counted: ``violations`` (a click released before or without its query,
    or under another user than its query's released one) must be 0."""
    seen: dict[str, object] = {}  # query_id -> released user, as far as the output has gone
    counts: Counter[str] = Counter()
    for line in lines:
        record = json.loads(line)
        if "user_query" in record:
            seen[record["query_id"]] = record["client_id"]
            counts["queries"] += 1
        elif record["query_id"] not in seen or record["client_id"] != seen[record["query_id"]]:
            counts["violations"] += 1
        else:
            counts["clicks"] += 1
    return counts


def run(config: Path, lines: list[str], batches: list[int], restart_at: int | None = None) -> Pipeline:
    """Feed ``lines`` in batches of the given sizes (cycled), releasing after each, restarting once."""
    p = Pipeline(load_config(config), seed=3)
    codec = text_codec(p.config.sidecar.schema, None)
    i = n = 0
    while i < len(lines):
        size = batches[n % len(batches)]
        p.receive(RecordBatch(lines[i : i + size], codec, "test"))
        p.release(False)
        i, n = i + size, n + 1
        if restart_at is not None and n == restart_at:
            p.close()
            p = Pipeline(load_config(config), seed=3)
    return p


def k_anonymity_config(folder: Path, fields: dict[str, str] | None = None) -> Path:
    """config/k-anonymity.yaml with ``format: ubi`` (``fields`` as its field policies; default: drop the
    session), writing ``out.ubi`` in ``folder``."""
    doc: dict[str, Any] = yaml.safe_load((ROOT / "config" / "k-anonymity.yaml").read_text(encoding="utf-8"))
    doc["state_dir"] = "state"
    doc["schema"] = {"format": "ubi", "fields": fields if fields is not None else {"session_id": "drop"}}
    doc.pop("sources", None)
    doc["sinks"] = [{"file": {"path": "out.ubi"}}]
    for spec in doc["filters"]:
        if "classify" in spec:
            spec["classify"] = {"kb_path": str(kb_file())}
    path = folder / "k.yaml"
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path
