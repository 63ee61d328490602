"""Shared helpers of the gRPC tests: an in-process sidecar on a free port."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import grpc

from adapters.grpc.client import channel
from adapters.grpc.source import GrpcSource
from sidecar.api import Event, Filter, FilterConfig
from sidecar.config import load_config
from sidecar.pipeline import Pipeline

ROOT = Path(__file__).resolve().parents[2]
SHARED_DATA = ROOT / ".." / "shared" / "data"


@dataclass
class Running:
    source: GrpcSource
    pipeline: Pipeline
    chan: grpc.Channel
    address: str

    @property
    def server(self) -> GrpcSource:
        """The running source (the name older tests use)."""
        return self.source


@contextmanager
def sidecar(config_path: Path, extra_filters: tuple[Filter, ...] = (), stop: bool = True) -> Iterator[Running]:
    """Start a sidecar for ``config_path`` on 127.0.0.1 (port 0: the bound one is read back), with the runtime's
    release timer as ``serve`` runs it; ``extra_filters`` are appended to the chain. ``stop``: at the end, stop
    the source, release (final) and close the runtime as ``serve`` does."""
    cfg = load_config(config_path)
    pipeline = Pipeline(cfg, seed=7)
    pipeline.chain.filters.extend(extra_filters)
    spec = cfg.source("grpc")
    assert spec is not None
    source = GrpcSource(spec.config, pipeline.ctx, listen="127.0.0.1:0")
    source.start(pipeline)
    pipeline.start_release_timer()
    (bound,) = source.listening()
    address = f"127.0.0.1:{bound.port}"
    chan = channel(address)
    try:
        yield Running(source, pipeline, chan, address)
    finally:
        chan.close()
        if stop:
            source.stop(grace=1.0)
            if any(f.BUFFERING for f in pipeline.filters):  # serve's one final release
                pipeline.release(final=True)
            pipeline.close()


def write_config(tmp_path: Path, body: str = "filters: []\n", name: str = "sidecar.yaml") -> Path:
    path = tmp_path / name
    path.write_text("state_dir: state\n" + body, encoding="utf-8")
    return path


class HoldAll(Filter):
    """Test filter: holds every event until flushed; ``released`` lists every event a flush gave back."""

    NAME = "hold_all"
    BUFFERING = True

    def __init__(self) -> None:
        super().__init__(FilterConfig(), None)  # a fake: no BuildContext
        self.buffer: list[Event] = []
        self.released: list[Event] = []

    def process(self, batch: list[Event]) -> list[Event]:
        self.buffer.extend(batch)
        return []

    def flush(self, final: bool) -> list[Event]:
        out, self.buffer = self.buffer, []
        self.released.extend(out)
        return out

    def held(self) -> int:
        return len(self.buffer)


class Profiles(Filter):
    """Test filter: answers get_profile for one known user."""

    NAME = "fake_profile"

    def __init__(self) -> None:
        super().__init__(FilterConfig(), None)  # a fake: no BuildContext

    def process(self, batch: list[Event]) -> list[Event]:
        return batch

    def get_profile(self, user: str) -> dict[str, int] | None:
        return {"Sports": 3, "Health": 1} if user == "42" else None
