"""A real ClickHouse for the session (``clickhouse-server`` 18.16 on loopback, data in a temporary folder); the
tests that need it skip, saying why, only where the binary is not installed."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers.clickhouse import ClickHouse, available

_databases = itertools.count(1)


@pytest.fixture(scope="session")
def clickhouse(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClickHouse]:
    """The server, started once (about a second) and stopped at the end of the session."""
    missing = available()
    if missing is not None:
        pytest.skip(missing)
    server = ClickHouse(tmp_path_factory.mktemp("clickhouse"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def database(clickhouse: ClickHouse) -> str:
    """A fresh database name for one test (not created: the sink or the test creates it)."""
    name = f"t{next(_databases)}"
    clickhouse.query(f"DROP DATABASE IF EXISTS {name}")
    return name


@pytest.fixture
def config_file(tmp_path: Path):  # returns a small writer
    """``config_file(yaml_body)``: a config in tmp_path with its state in tmp_path/state."""

    def write(body: str) -> Path:
        path = tmp_path / "config.yaml"
        path.write_text(f"state_dir: state\n{body}", encoding="utf-8")
        return path

    return write
