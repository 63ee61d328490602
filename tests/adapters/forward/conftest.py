"""Fixtures of the forward tests: a running forward source over a real pipeline, raw protocol clients, and
the npm package ``@fluent-org/logger`` installed into a test-local folder (skipped only without node/npm)."""

from __future__ import annotations

import os
import shutil
import ssl
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers.forward import FLUENT_LOGGER_NPM, NPM_CACHE, Capture, RawClient, Served, write_sidecar_config

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
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are needed for the @fluent-org/logger interop tests (not installed here)")
    marker = NPM_CACHE / "node_modules" / "@fluent-org" / "logger" / "package.json"
    if not marker.exists():
        NPM_CACHE.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, npm_config_update_notifier="false", npm_config_fund="false", npm_config_audit="false")
        proc = subprocess.run(
            [npm, "install", "--prefix", str(NPM_CACHE), "--no-save", "--no-package-lock", FLUENT_LOGGER_NPM],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            check=False,
        )
        if proc.returncode != 0 or not marker.exists():
            pytest.fail(f"npm install {FLUENT_LOGGER_NPM} failed:\n{proc.stderr[-2000:]}")
    return NPM_CACHE
