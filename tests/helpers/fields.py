"""Shared by the field-policy tests: a config with a field key, records through a runtime, a JSON line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from sidecar.api import RecordBatch
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

KEY_ENV = "QUERYLOG_TEST_FIELD_KEY"
KEY = "field-key-not-secret-0123456789"
ROLES = {"user": "uid", "query": "q", "time": "t", "rank": None, "url": None}
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0"


def write_config(tmp_path: Path, schema: dict[str, Any]) -> Path:
    """A config in ``tmp_path`` whose schema is ``schema`` with the field key read from :data:`KEY_ENV`."""
    path = tmp_path / "querylog.yaml"
    cfg = {"state_dir": "state", "schema": {"field_key_env": KEY_ENV, **schema}}
    path.write_text(yaml.safe_dump(cfg, sort_keys=False), encoding="utf-8")
    return path


def run_records(config: Path, records: list[Any], fmt: str) -> tuple[list[Any], Pipeline]:
    """The records through a runtime without sinks (Runtime.transform): what comes out, encoded by the codec,
    and the runtime (the caller closes it)."""
    pipeline = Pipeline(load_config(config), with_sinks=False)
    codec = pipeline.ctx.codec_for(fmt)
    assert codec is not None
    _, events = pipeline.transform(RecordBatch(records, codec, "test", list(range(1, len(records) + 1))))
    return [codec.encode(ev) for ev in events], pipeline


def json_line(**fields: Any) -> str:
    """A compact JSON line with the roles of :data:`ROLES` and ``fields``."""
    return json.dumps({"uid": "u1", "q": "cheap flights", "t": "2026-11-27 10:00:00", **fields}, separators=(",", ":"))
