"""A runtime reading UBI records (``format: ubi``) into a file, for the join tests: its config, its input, what it
wrote and dead-lettered. The fixtures are the UBI spec's (tests/adapters/ubi/fixtures, written from the o19s/ubi
schema)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sidecar.api import RecordBatch
from sidecar.pipeline import Pipeline
from sidecar.textcodecs import text_codec

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
