"""Fixtures of the forward tests: a running forward source over a real pipeline, raw protocol clients, and
the npm package ``@fluent-org/logger`` installed into a test-local folder (skipped only without node/npm)."""

from __future__ import annotations

import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.forward import Capture, RawClient, Served, fluent_logger_node, write_sidecar_config

from adapters.forward.source import ForwardSource
from sidecar.config import load_config
from sidecar.pipeline import Pipeline


@pytest.fixture
def serve_forward(tmp_path: Path) -> Iterator[Callable[..., Served]]:
    """Start a forward source (listen 127.0.0.1:0) on a passthrough pipeline whose sinks are a Capture."""
    started: list[Served] = []

    def start(name: str = "sidecar.yaml", **options: Any) -> Served:
        options.setdefault("listen", "127.0.0.1:0")
        cfg = load_config(write_sidecar_config(tmp_path, {"sources": [{"forward": options}]}, name))
        pipeline = Pipeline(cfg, seed=7)
        capture = Capture()
        pipeline.sinks.append(capture)
        spec = cfg.source("forward")
        assert spec is not None
        source = ForwardSource(spec.config, pipeline.ctx)
        source.start(pipeline)
        served = Served(source, pipeline, capture)
        started.append(served)
        return served

    yield start
    for s in started:
        s.capture.gate.set()
        s.source.stop(grace=1.0)
        s.pipeline.close()


@pytest.fixture
def clients() -> Iterator[Callable[..., RawClient]]:
    made: list[RawClient] = []

    def connect(port: int, tls: ssl.SSLContext | None = None) -> RawClient:
        c = RawClient(port, tls)
        made.append(c)
        return c

    yield connect
    for c in made:
        c.close()


# ---- node -------------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def fluent_node() -> Path:
    """The folder with node_modules/@fluent-org/logger, installed once into tests/.npm-cache (git-ignored)."""
    return fluent_logger_node("for the @fluent-org/logger interop tests (not installed here)")
