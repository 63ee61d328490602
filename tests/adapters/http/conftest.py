"""Fixtures of the HTTP tests: a pipeline with an ``http`` source on a free port, and a scripted HTTP peer."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.httptest import Peer, Served

from adapters.http.config import HttpSourceConfig
from adapters.http.source import HttpSource
from sidecar.config import load_config
from sidecar.pipeline import Pipeline


@pytest.fixture
def serve(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """``serve(sinks_yaml=..., filters_yaml=..., **source_options)``: a pipeline (JSON-lines schema, a file sink by
    default) with a started ``http`` source on a free port; stopped and closed after the test."""
    started: list[Served] = []

    def start(sinks_yaml: str | None = None, filters_yaml: str = "", **options: Any) -> Served:
        out = tmp_path / "out.jsonl"
        config = tmp_path / f"config{len(started)}.yaml"
        sinks = sinks_yaml if sinks_yaml is not None else f"sinks:\n  - file: {{path: {out}}}\n"
        config.write_text(f"state_dir: state\nschema: {{format: jsonl}}\n{filters_yaml}{sinks}", encoding="utf-8")
        pipeline = Pipeline(load_config(config))
        source = HttpSource(HttpSourceConfig(**{"listen": "127.0.0.1:0", **options}), pipeline.ctx)
        source.start(pipeline)
        served = Served(pipeline, source, out, tmp_path / "state")
        started.append(served)
        return served

    yield start
    for served in started:
        served.source.stop(grace=2)
        served.pipeline.close()


@pytest.fixture
def peer() -> Iterator[Peer]:
    """A scripted HTTP peer on a free port (see :class:`helpers.httptest.Peer`)."""
    state = Peer()
    state.start()
    yield state
    state.stop()
