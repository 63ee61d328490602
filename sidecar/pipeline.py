"""The runtime behind every entry point: state store, chain, dead letters, sinks."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from typing import Any

import structlog

from sidecar.api import BuildContext, ConfigValueError, Event, Filter, Sink
from sidecar.chain import Chain
from sidecar.config import ComponentSpec, LoadedConfig
from sidecar.configload import ConfigError
from sidecar.deadletter import DeadLetters
from sidecar.state import StateStore

log = structlog.get_logger("querylog.pipeline")


def _build(spec: ComponentSpec, ctx: BuildContext, file: str, lines: Any) -> Any:
    try:
        return spec.cls(spec.config, ctx)
    except ConfigValueError as exc:
        key = f"{spec.path}.{exc.key}"
        raise ConfigError(file, lines(key), key, exc.problem, exc.allowed) from None


class Pipeline:
    """A built chain with its state store and dead letters; shared by replay and serve."""

    def __init__(self, config: LoadedConfig, *, seed: int | None = None, with_sinks: bool = True) -> None:
        self.config = config
        self.started = time.monotonic()
        self.state = StateStore(config.state_dir)
        rng = random.Random(seed) if seed is not None else random.SystemRandom()
        self.ctx = BuildContext(
            config_dir=config.config_dir, state=self.state, rng=rng, seed=seed, schema=config.sidecar.schema
        )
        self.dead = DeadLetters(config.dead_letter_path)
        self.ctx.dead_letters = self.dead
        doc = config.doc
        filters: list[Filter] = []
        try:
            for spec in config.filters:
                filters.append(_build(spec, self.ctx, str(config.file), doc.line))
            self.sinks: list[Sink] = (
                [_build(spec, self.ctx, str(config.file), doc.line) for spec in config.sinks] if with_sinks else []
            )
        except BaseException:
            for f in filters:
                f.close()
            self.state.close()
            raise
        self.chain = Chain(filters)
        log.info("pipeline_built", filters=[f.NAME for f in filters], sinks=[s.NAME for s in self.sinks])

    def process(self, batch: list[Event]) -> list[Event]:
        return self.chain.process(batch)

    def flush(self, final: bool) -> list[Event]:
        return self.chain.flush(final)

    def stats(self) -> dict[str, Any]:
        s = self.chain.stats()
        s["dead_letters"] = dict(self.dead.counts)
        s["events_dead_lettered"] = self.dead.total
        s["uptime_seconds"] = round(time.monotonic() - self.started, 3)
        return s

    def deliver(self, events: Iterable[Event]) -> None:
        batch = list(events)
        for sink in self.sinks:
            sink.write(batch)

    def close(self) -> None:
        """Close filters (held state stays in SQLite), sinks, dead letters, database."""
        final_counts = {k: v for k, v in self.stats().items() if k.startswith("events_")}
        for sink in self.sinks:
            sink.close()
        self.chain.close()
        self.dead.close()
        self.state.close()
        log.info("pipeline_closed", **final_counts)
